//! Test harness: a sim started in-process on 127.0.0.1:0 with near-zero latencies, and a client whose every
//! successful response is parsed with the official `google-cloud-compute-v1` model type named by its `kind`
//! (the contract: a field or shape the SDK would reject fails the test that produced it).

#![allow(dead_code)]

use google_cloud_compute_v1::model as gce;
use ha_sim::{LatencyProfile, Running, SimConfig};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub const PROJECT: &str = "proj";

pub struct Sim {
    pub running: Option<Running>,
    /// The root links are built from (`running.url`).
    pub url: String,
    /// Where requests go (the bound address); differs from `url` when a base URL is configured.
    pub endpoint: String,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
    /// How many responses were checked against the official types.
    pub checked: AtomicUsize,
}

pub struct Resp {
    pub status: u16,
    pub body: Value,
}

impl Resp {
    /// The error reason of a Google error body.
    pub fn reason(&self) -> &str {
        self.body["error"]["errors"][0]["reason"]
            .as_str()
            .unwrap_or_default()
    }

    #[track_caller]
    pub fn expect(&self, status: u16, reason: &str) {
        assert_eq!(
            (self.status, self.reason()),
            (status, reason),
            "{}",
            self.body
        );
    }
}

/// Parses `text` as the official type for `kind`; panics on mismatch or unknown kinds.
pub fn contract_check(kind: &str, text: &str) {
    fn p<T: for<'de> serde::Deserialize<'de>>(kind: &str, text: &str) {
        if let Err(e) = serde_json::from_str::<T>(text) {
            panic!("official model type for {kind} rejects the response: {e}\n{text}");
        }
    }
    match kind {
        "compute#instance" => p::<gce::Instance>(kind, text),
        "compute#instanceList" => p::<gce::InstanceList>(kind, text),
        "compute#instanceAggregatedList" => p::<gce::InstanceAggregatedList>(kind, text),
        "compute#disk" => p::<gce::Disk>(kind, text),
        "compute#diskList" => p::<gce::DiskList>(kind, text),
        "compute#diskAggregatedList" => p::<gce::DiskAggregatedList>(kind, text),
        "compute#address" => p::<gce::Address>(kind, text),
        "compute#addressList" => p::<gce::AddressList>(kind, text),
        "compute#addressAggregatedList" => p::<gce::AddressAggregatedList>(kind, text),
        "compute#subnetwork" => p::<gce::Subnetwork>(kind, text),
        "compute#subnetworkList" => p::<gce::SubnetworkList>(kind, text),
        "compute#subnetworkAggregatedList" => p::<gce::SubnetworkAggregatedList>(kind, text),
        "compute#forwardingRuleAggregatedList" => {
            p::<gce::ForwardingRuleAggregatedList>(kind, text)
        }
        "compute#firewall" => p::<gce::Firewall>(kind, text),
        "compute#firewallList" => p::<gce::FirewallList>(kind, text),
        "compute#httpHealthCheck" => p::<gce::HttpHealthCheck>(kind, text),
        "compute#httpHealthCheckList" => p::<gce::HttpHealthCheckList>(kind, text),
        "compute#targetPool" => p::<gce::TargetPool>(kind, text),
        "compute#targetPoolList" => p::<gce::TargetPoolList>(kind, text),
        "compute#targetPoolInstanceHealth" => p::<gce::TargetPoolInstanceHealth>(kind, text),
        "compute#forwardingRule" => p::<gce::ForwardingRule>(kind, text),
        "compute#forwardingRuleList" => p::<gce::ForwardingRuleList>(kind, text),
        "compute#operation" => p::<gce::Operation>(kind, text),
        "compute#operationList" => p::<gce::OperationList>(kind, text),
        "compute#operationAggregatedList" => p::<gce::OperationAggregatedList>(kind, text),
        "compute#machineType" => p::<gce::MachineType>(kind, text),
        "compute#machineTypeList" => p::<gce::MachineTypeList>(kind, text),
        "compute#machineTypeAggregatedList" => p::<gce::MachineTypeAggregatedList>(kind, text),
        "compute#image" => p::<gce::Image>(kind, text),
        "compute#imageList" => p::<gce::ImageList>(kind, text),
        "compute#imageFamilyView" => p::<gce::ImageFamilyView>(kind, text),
        "compute#zone" => p::<gce::Zone>(kind, text),
        "compute#zoneList" => p::<gce::ZoneList>(kind, text),
        "compute#region" => p::<gce::Region>(kind, text),
        "compute#regionList" => p::<gce::RegionList>(kind, text),
        "compute#project" => p::<gce::Project>(kind, text),
        other => {
            panic!("response kind {other:?} has no official type in the contract check:\n{text}")
        }
    }
}

pub async fn start() -> Sim {
    start_with(|_| {}).await
}

pub async fn start_with(tweak: impl FnOnce(&mut SimConfig)) -> Sim {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = SimConfig::for_tests(dir.path().to_path_buf());
    cfg.latency = LatencyProfile::test();
    tweak(&mut cfg);
    start_in(dir, cfg).await
}

pub async fn start_in(dir: tempfile::TempDir, cfg: SimConfig) -> Sim {
    let running = ha_sim::start(cfg, std::sync::Arc::new(ha_sim::fabric::NoFabric))
        .await
        .expect("sim starts");
    let url = running.url.clone();
    let endpoint = format!("http://{}/", running.addr);
    Sim {
        running: Some(running),
        url,
        endpoint,
        http: ha_sim::http::http_client(),
        dir,
        checked: AtomicUsize::new(0),
    }
}

impl Sim {
    pub fn api(&self, path: &str) -> String {
        format!("{}compute/v1/projects/{PROJECT}/{path}", self.endpoint)
    }

    /// One API call with a bearer token; 2xx bodies go through the contract check.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        self.call_as(method, path, body, Some("test-token")).await
    }

    pub async fn call_as(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> Resp {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            self.api(path)
        };
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        // What the Rust SDK sends on every call: `$alt=json` (and `$apiVersion` on the main call).
        let sep = if url.contains('?') { '&' } else { '?' };
        let mut rb = self
            .http
            .request(m, format!("{url}{sep}%24alt=json&%24apiVersion=2026-09-01"));
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body read");
        let body: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("JSON body")
        };
        if (200..300).contains(&status) && !text.is_empty() {
            let kind = body["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("2xx response without kind: {text}"));
            contract_check(kind, &text);
            self.checked.fetch_add(1, Ordering::SeqCst);
        }
        Resp { status, body }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call("POST", path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.call("DELETE", path, None).await
    }

    /// Polls an operation with GET (as terraform-provider-google and the SDK poller do) until DONE.
    pub async fn done(&self, op: &Resp) -> Value {
        assert_eq!(op.status, 200, "not an operation: {}", op.body);
        assert_eq!(op.body["kind"], "compute#operation", "{}", op.body);
        let link = op.body["selfLink"]
            .as_str()
            .expect("op selfLink")
            .to_string();
        for _ in 0..500 {
            let now = self.get(&link).await;
            if now.body["status"] == "DONE" {
                return now.body;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("operation never finished: {}", op.body);
    }

    /// A mutation that must succeed: returns the DONE operation (asserting it has no error).
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let op = self.call(method, path, body).await;
        let done = self.done(&op).await;
        assert!(done.get("error").is_none(), "operation failed: {done}");
        done
    }

    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self
            .http
            .request(m, format!("{}_sim/{path}", self.endpoint));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb.send().await.expect("admin request");
        let status = resp.status();
        let v: Value = resp.json().await.expect("admin JSON");
        assert!(status.is_success(), "admin {path}: {status} {v}");
        v
    }

    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(r) = self.running.take() {
            r.stop().await;
        }
        self.dir
    }
}

/// A minimal instance body, as the provider would send.
pub fn instance_body(name: &str, zone: &str) -> Value {
    json!({
        "name": name,
        "machineType": format!("zones/{zone}/machineTypes/e2-standard-2"),
        "disks": [{"boot": true, "autoDelete": true, "initializeParams": {"sourceImage": "projects/debian-cloud/global/images/family/debian-12", "diskSizeGb": "20"}}],
        "networkInterfaces": [{"network": "global/networks/default"}],
        "metadata": {"items": [{"key": "startup-script", "value": "echo hi"}]},
        "labels": {"role": "master"},
        "tags": {"items": ["master"]},
    })
}

/// Creates a RUNNING instance and returns it.
pub async fn instance(sim: &Sim, name: &str, zone: &str, body: Option<Value>) -> Value {
    sim.ok(
        "POST",
        &format!("zones/{zone}/instances"),
        Some(body.unwrap_or_else(|| instance_body(name, zone))),
    )
    .await;
    sim.get(&format!("zones/{zone}/instances/{name}"))
        .await
        .body
}

/// A blank data disk, as the provider would create it.
pub fn disk_body(name: &str, zone: &str) -> Value {
    json!({
        "name": name,
        "sizeGb": "20",
        "type": format!("zones/{zone}/diskTypes/pd-ssd"),
        "labels": {"role": "master-pd"},
        "description": "etcd data",
    })
}

/// Creates a READY disk and returns it.
pub async fn disk(sim: &Sim, name: &str, zone: &str) -> Value {
    sim.ok(
        "POST",
        &format!("zones/{zone}/disks"),
        Some(disk_body(name, zone)),
    )
    .await;
    sim.get(&format!("zones/{zone}/disks/{name}")).await.body
}
