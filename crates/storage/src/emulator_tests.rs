//! The bucket against a real Cloud Storage emulator (fake-gcs-server, installed by scripts/setup): what the
//! backup's naming relies on.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Bucket, Error};
use ha_settings::{Auth, Settings};

struct Emulator {
    child: Child,
    port: u16,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// The emulator on a free port, with bucket `ha-test`; retried on another port if the one probed was taken meanwhile.
async fn emulator() -> Emulator {
    let bin =
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(".tools/bin/fake-gcs-server");
    let http = reqwest::Client::new();
    for _ in 0..5 {
        let port = free_port();
        let mut e = Emulator {
            child: Command::new(&bin)
                .args([
                    "-scheme",
                    "http",
                    "-host",
                    "127.0.0.1",
                    "-port",
                    &port.to_string(),
                ])
                .args(["-backend", "memory", "-log-level", "error"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("fake-gcs-server (run scripts/setup)"),
            port,
        };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if matches!(e.child.try_wait(), Ok(Some(_))) {
                break;
            }
            let made = http
                .post(format!("http://127.0.0.1:{port}/storage/v1/b"))
                .header("content-type", "application/json")
                .body(r#"{"name":"ha-test"}"#)
                .send()
                .await;
            match made {
                Ok(r) if r.status().is_success() => return e,
                Ok(r) => eprintln!("bucket: HTTP {} {:?}", r.status(), r.text().await),
                Err(err) => eprintln!("bucket: {err:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = e.child.kill();
    }
    panic!("fake-gcs-server did not start");
}

#[tokio::test]
async fn a_name_is_written_once_and_the_second_write_says_it_exists() {
    let e = emulator().await;
    let settings = Settings {
        auth: Auth::AccessToken("test-token".into()),
        storage_endpoint: Some(format!("http://127.0.0.1:{}/storage/v1/", e.port)),
        ..Settings::default()
    };
    let bucket = Bucket::connect(&settings, "ha-test").await.unwrap();
    let meta = Default::default();
    let first = bytes::Bytes::from_static(b"first");
    assert_eq!(
        bucket.put("c/etcd-1.db", first, &meta, None).await.unwrap(),
        5
    );
    let again = bucket
        .put(
            "c/etcd-1.db",
            bytes::Bytes::from_static(b"second"),
            &meta,
            None,
        )
        .await;
    assert!(
        matches!(again, Err(Error::Exists { .. })),
        "a second write of a name must be refused as existing: {again:?}"
    );
    assert_eq!(bucket.get("c/etcd-1.db").await.unwrap(), b"first");
}
