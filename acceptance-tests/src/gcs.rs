//! A private Cloud Storage emulator per scenario: `fake-gcs-server` (scripts/setup installs it from PyPI), in
//! memory, on a free loopback port. The provider writes snapshots to it through Google's official client;
//! scenarios read them back over its JSON API with a plain HTTP/1.0 request (no client library of ours between
//! the test and the bucket) and check them with etcd's own `etcdutl`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::paths::{tools_bin, work_dir};

pub struct FakeGcs {
    child: Child,
    port: u16,
    /// Kept for the emulator's log; set once it answers.
    _dir: Option<tempfile::TempDir>,
}

/// One object as the emulator lists it.
#[derive(Debug, Clone)]
pub struct Object {
    pub name: String,
    pub size: u64,
    pub metadata: BTreeMap<String, String>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl FakeGcs {
    /// Starts the emulator and waits until it answers. A free port can be taken by another scenario's process
    /// between the probe and the emulator's bind (an ha-sim picks its ports the same way): then the emulator
    /// exits, or another server answers there, and it is started again on another port.
    pub fn start(scenario: &str) -> FakeGcs {
        let dir = tempfile::Builder::new()
            .prefix(&format!("gcs-{scenario}-"))
            .tempdir_in(work_dir())
            .expect("emulator dir");
        for attempt in 1..=5 {
            let port = free_port();
            let mut gcs = FakeGcs {
                child: spawn(dir.path(), port),
                port,
                _dir: None,
            };
            match gcs.await_listing() {
                Ok(()) => {
                    gcs._dir = Some(dir);
                    return gcs;
                }
                // Dropping `gcs` kills it.
                Err(why) => eprintln!("fake-gcs-server on port {port} (attempt {attempt}): {why}"),
            }
        }
        panic!("fake-gcs-server did not start after 5 attempts; see the lines above");
    }

    /// Until the emulator lists buckets; an error once it exited or after 20 s.
    fn await_listing(&mut self) -> Result<(), String> {
        let started = Instant::now();
        while self.get("/storage/v1/b").is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited: {status}"));
            }
            if started.elapsed() > Duration::from_secs(20) {
                return Err("no bucket listing after 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// What to give the provider as `storage_custom_endpoint`.
    pub fn endpoint(&self) -> String {
        format!("{}/storage/v1/", self.origin())
    }

    /// Where the emulator listens, `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn request(&self, method: &str, path: &str, body: &str) -> Result<(u16, Vec<u8>), String> {
        self.request_bytes(method, path, "application/json", body.as_bytes())
    }

    fn request_bytes(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        // HTTP/1.0: the server answers with the whole body and closes, no chunking to undo.
        let head = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            self.port,
            body.len()
        );
        s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
        s.write_all(body).map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("no HTTP header")?;
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("bad status line: {head}"))?;
        Ok((code, raw[split + 4..].to_vec()))
    }

    fn get(&self, path: &str) -> Result<Vec<u8>, String> {
        match self.request("GET", path, "")? {
            (200, body) => Ok(body),
            (code, body) => Err(format!("HTTP {code}: {}", String::from_utf8_lossy(&body))),
        }
    }

    pub fn create_bucket(&self, name: &str) {
        let (code, body) = self
            .request("POST", "/storage/v1/b", &format!(r#"{{"name":"{name}"}}"#))
            .expect("creating a bucket");
        assert!(
            code == 200,
            "creating bucket {name}: HTTP {code} {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// The bucket's objects under `prefix`, by name.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<Object> {
        let body = self
            .get(&format!("/storage/v1/b/{bucket}/o?prefix={prefix}"))
            .unwrap_or_else(|e| panic!("listing gs://{bucket}/{prefix}: {e}"));
        let v: Value = serde_json::from_slice(&body).expect("a JSON listing");
        let mut out: Vec<Object> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| Object {
                name: o["name"].as_str().unwrap_or_default().to_string(),
                size: o["size"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0),
                metadata: o["metadata"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect(),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Writes `bytes` as the object, with `metadata` as its custom metadata: what someone with write access to
    /// the bucket can do to a snapshot. (An upload replaces the metadata too, so it is patched back after.)
    pub fn put(
        &self,
        bucket: &str,
        object: &str,
        bytes: &[u8],
        metadata: &std::collections::BTreeMap<String, String>,
    ) {
        let encoded = encode(object);
        let (code, body) = self
            .request_bytes(
                "POST",
                &format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={encoded}"),
                "application/octet-stream",
                bytes,
            )
            .unwrap_or_else(|e| panic!("uploading gs://{bucket}/{object}: {e}"));
        assert_eq!(
            code,
            200,
            "uploading gs://{bucket}/{object}: {}",
            String::from_utf8_lossy(&body)
        );
        let patch = serde_json::json!({ "metadata": metadata }).to_string();
        let (code, body) = self
            .request(
                "PATCH",
                &format!("/storage/v1/b/{bucket}/o/{encoded}"),
                &patch,
            )
            .unwrap_or_else(|e| panic!("patching gs://{bucket}/{object}: {e}"));
        assert_eq!(
            code,
            200,
            "patching gs://{bucket}/{object}: {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// The object's bytes, written to a file under `dir`.
    pub fn download(&self, bucket: &str, object: &str, dir: &std::path::Path) -> PathBuf {
        let encoded = encode(object);
        let body = self
            .get(&format!("/storage/v1/b/{bucket}/o/{encoded}?alt=media"))
            .unwrap_or_else(|e| panic!("downloading gs://{bucket}/{object}: {e}"));
        let path = dir.join(object.replace('/', "_"));
        std::fs::write(&path, body).expect("writing the download");
        path
    }
}

/// An object name as one path segment of the JSON API.
fn encode(object: &str) -> String {
    object
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn spawn(dir: &std::path::Path, port: u16) -> std::process::Child {
    let log = std::fs::File::create(dir.join("fake-gcs.log")).expect("emulator log");
    let host = format!("127.0.0.1:{port}");
    Command::new(tools_bin().join("fake-gcs-server"))
        .args([
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            &port.to_string(),
        ])
        .args(["-backend", "memory", "-public-host", &host])
        .args([
            "-external-url",
            &format!("http://{host}"),
            "-log-level",
            "warn",
        ])
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("starting fake-gcs-server (run scripts/setup)")
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What etcd's own tool says of a snapshot file: `etcdutl snapshot status -w json` (3.5.1, which reads 3.4's
/// databases too). It checks the file's hash and reads its revision and key count; it fails on a corrupt file.
pub fn snapshot_status(file: &std::path::Path) -> Value {
    let etcdutl = crate::paths::repo_root().join(".tools/etcd-3.5/bin/etcdutl");
    let out = Command::new(&etcdutl)
        .args(["snapshot", "status", "-w", "json"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", etcdutl.display()));
    assert!(
        out.status.success(),
        "etcdutl snapshot status {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("etcdutl's JSON")
}
