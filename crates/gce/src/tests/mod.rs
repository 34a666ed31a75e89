//! Tests of the GCE backend against the real simulator: each test starts its own `ha-sim serve` (API only,
//! fresh state dir, test latencies) and talks to it through `Compute` with an access token, exactly as the
//! provider would. Faults and call counts go through the sim's admin API under `/_sim/`.
//!
//! Needs `target/debug/ha-sim`: run `cargo build -p ha-sim` first.

// Built without cfg(test) for ha-ops (feature `testing`), where the helpers only these tests call are unused.
#![cfg_attr(not(test), allow(dead_code, unused_imports))]

mod addresses;
mod instances;
mod lb;
mod retries;
mod user_agent;

use super::{Backoff, Compute};
use ha_settings::{Auth, Settings};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

pub const PROJECT: &str = "proj";
pub const REGION: &str = "us-central1";
pub const ZONE: &str = "us-central1-a";

/// A deadline comfortably beyond what any sim call needs with test latencies.
pub fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

/// Backoff short enough that retry tests run in well under a second per retry.
pub fn fast() -> Backoff {
    Backoff {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(400),
        attempt_timeout: Duration::from_secs(10),
    }
}

fn sim_binary() -> PathBuf {
    // The test binary is target/<profile>/deps/<name>; the sim is target/<profile>/ha-sim.
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("ha-sim"))
        .expect("target directory");
    assert!(
        bin.is_file(),
        "{} not found: build the simulator first with `cargo build -p ha-sim`",
        bin.display()
    );
    bin
}

pub struct Sim {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Sim {
    fn drop(&mut self) {
        // Our own child, by handle: never a broad kill.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sim {
    pub async fn start() -> Sim {
        Sim::start_with(&[]).await
    }

    /// A sim with extra `serve` arguments (e.g. `--wait-deadline-secs`).
    pub async fn start_with(extra: &[&str]) -> Sim {
        let dir = tempfile::tempdir().expect("temp dir");
        let port_file = dir.path().join("port");
        let log = std::fs::File::create(dir.path().join("sim.log")).expect("log file");
        std::fs::create_dir_all(dir.path().join("state")).expect("state dir");
        let child = Command::new(sim_binary())
            .args([
                "serve",
                "--no-vms",
                "--latency-profile",
                "test",
                "--listen",
                "127.0.0.1:0",
            ])
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--port-file")
            .arg(&port_file)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("ha-sim starts");
        let mut sim = Sim {
            child,
            port: 0,
            dir,
        };
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                sim.port = p;
                return sim;
            }
            if let Ok(Some(status)) = sim.child.try_wait() {
                panic!("ha-sim exited with {status}: {}", sim.log());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("ha-sim did not write its port file: {}", sim.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sim.log")).unwrap_or_default()
    }

    pub fn settings(&self) -> Settings {
        Settings {
            project: Some(PROJECT.into()),
            region: Some(REGION.into()),
            zone: Some(ZONE.into()),
            // The sim accepts any bearer token; a real one would come the same way.
            auth: Auth::AccessToken("test-token".into()),
            compute_endpoint: Some(format!("http://127.0.0.1:{}/compute/v1/", self.port)),
            ..Settings::default()
        }
    }

    pub async fn compute(&self) -> Compute {
        Compute::new(&self.settings())
            .await
            .expect("client")
            .with_backoff(fast())
    }

    /// One admin call; returns the JSON body (panics on transport errors or non-2xx).
    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("connect");
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.expect("send");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.expect("read");
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, payload) = text.split_once("\r\n\r\n").expect("HTTP response");
        assert!(
            head.starts_with("HTTP/1.1 2"),
            "{method} {path}: {head}\n{payload}"
        );
        let payload = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(payload)
        } else {
            payload.to_string()
        };
        serde_json::from_str(&payload).unwrap_or(Value::Null)
    }

    pub async fn fault(&self, failpoint: Value) {
        self.admin("POST", "/_sim/faults", Some(failpoint)).await;
    }

    /// Fail the next `times` requests of API method `api` (e.g. `addresses.insert`) with HTTP `status`.
    pub async fn fail_requests(&self, api: &str, status: u16, times: u32) {
        self.fault(json!({"when": {"on": "request", "api": api}, "then": {"effect": "status", "status": status}, "times": times}))
            .await;
    }

    /// The next operation of `kind` ends DONE with error `code`.
    pub async fn fail_operation(&self, kind: &str, code: &str) {
        self.fault(json!({"when": {"on": "operation", "kind": kind}, "then": {"effect": "fail", "code": code}, "times": 1}))
            .await;
    }

    /// Calls of one API method (`addresses.insert`) since the start.
    pub async fn calls(&self, api: &str) -> u64 {
        let r = self.admin("GET", "/_sim/requests", None).await;
        r["byMethod"][format!("compute.{api}")]
            .as_u64()
            .unwrap_or(0)
    }

    /// HTTP statuses of the logged calls of one API method, in order.
    pub async fn statuses(&self, api: &str) -> Vec<u64> {
        let r = self.admin("GET", "/_sim/requests", None).await;
        let want = format!("compute.{api}");
        r["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["api"] == want.as_str())
            .filter_map(|e| e["status"].as_u64())
            .collect()
    }

    pub async fn state(&self) -> Value {
        self.admin("GET", "/_sim/state", None).await
    }
}

fn dechunk(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// Operations in the sim's state whose target ends with `target` (`/addresses/a`).
pub fn operations_on(state: &Value, target: &str) -> Vec<Value> {
    state["operations"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .map(|r| r["op"].clone())
        .filter(|op| {
            op["targetLink"]
                .as_str()
                .is_some_and(|t| t.ends_with(target))
        })
        .collect()
}
