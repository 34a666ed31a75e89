//! gcloud pointed at ha-sim (issue #12): the operator's read commands and the provider's calls work.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};

const Z: &str = "europe-west1-b";
const R: &str = "europe-west1";

/// Runs gcloud against the sim in a blocking thread (the sim serves on this runtime).
async fn gcloud(sim: &Sim, args: &[&str]) -> Result<Value, String> {
    let dir = sim.dir.path().join("gcloud");
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "sim-token").unwrap();
    let endpoint = format!("{}compute/v1/", sim.endpoint);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = Command::new("gcloud")
            .args(&args)
            .arg("--format=json")
            .env("CLOUDSDK_CONFIG", dir.join("config"))
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", endpoint)
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token)
            .env("CLOUDSDK_CORE_PROJECT", PROJECT)
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running gcloud: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "gcloud {args:?}: {}\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = if stdout.trim().is_empty() {
            "null"
        } else {
            &stdout
        };
        serde_json::from_str(text)
            .map_err(|e| format!("gcloud {args:?} is not JSON ({e}): {stdout}"))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_reads_and_writes() {
    let sim = start().await;
    let zones = gcloud(&sim, &["compute", "zones", "list"]).await.unwrap();
    assert!(zones.as_array().unwrap().iter().any(|z| z["name"] == Z));
    let zone = gcloud(&sim, &["compute", "zones", "describe", Z])
        .await
        .unwrap();
    assert_eq!(zone["name"], Z);
    let region = gcloud(&sim, &["compute", "regions", "describe", R])
        .await
        .unwrap();
    assert_eq!(region["name"], R);

    gcloud(
        &sim,
        &["compute", "addresses", "create", "ip1", "--region", R],
    )
    .await
    .unwrap();
    let list = gcloud(&sim, &["compute", "addresses", "list"])
        .await
        .unwrap();
    assert_eq!(list[0]["name"], "ip1", "{list}");
    let ip = gcloud(
        &sim,
        &["compute", "addresses", "describe", "ip1", "--region", R],
    )
    .await
    .unwrap();
    assert_eq!(ip["status"], "RESERVED");
}
