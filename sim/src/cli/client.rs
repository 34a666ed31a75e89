//! Finding a running sim and calling its admin API.

use super::Target;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Written by `serve` into the state directory so other commands (and scripts) find the sim.
pub const DISCOVERY_FILE: &str = "sim.json";

pub struct Client {
    /// Where the sim listens, e.g. `http://127.0.0.1:8085/`.
    pub endpoint: String,
    http: reqwest::Client,
}

impl Client {
    pub fn find(target: &Target) -> Result<Self, String> {
        let endpoint = match (&target.url, &target.state_dir) {
            (Some(u), _) => format!("{}/", u.trim_end_matches('/')),
            (None, Some(dir)) => read_discovery(dir)?,
            (None, None) => {
                return Err(
                    "say which sim: --state-dir DIR or --url URL (or HA_SIM_STATE_DIR)".into(),
                );
            }
        };
        Ok(Client {
            endpoint,
            http: crate::http::http_client(),
        })
    }

    async fn send(&self, rb: reqwest::RequestBuilder, what: &str) -> Result<Value, String> {
        let resp = rb
            .send()
            .await
            .map_err(|e| format!("{what}: is the sim at {} running? {e}", self.endpoint))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| format!("{what}: reading the answer: {e}"))?;
        if !status.is_success() {
            return Err(format!(
                "{what}: {status}: {}",
                body["error"].as_str().unwrap_or(&body.to_string())
            ));
        }
        Ok(body)
    }

    pub async fn get(&self, path: &str) -> Result<Value, String> {
        self.send(
            self.http.get(format!("{}_sim/{path}", self.endpoint)),
            &format!("GET /_sim/{path}"),
        )
        .await
    }

    /// `get` with a query string, each value encoded (a VM reference may be a link with `/` and `:`).
    pub async fn get_with(&self, path: &str, query: &[(&str, &str)]) -> Result<Value, String> {
        let mut url = reqwest::Url::parse(&format!("{}_sim/{path}", self.endpoint))
            .map_err(|e| format!("GET /_sim/{path}: {e}"))?;
        url.query_pairs_mut().extend_pairs(query);
        self.send(self.http.get(url), &format!("GET /_sim/{path}"))
            .await
    }

    pub async fn post(&self, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut rb = self.http.post(format!("{}_sim/{path}", self.endpoint));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        self.send(rb, &format!("POST /_sim/{path}")).await
    }

    pub async fn delete(&self, path: &str) -> Result<Value, String> {
        self.send(
            self.http.delete(format!("{}_sim/{path}", self.endpoint)),
            &format!("DELETE /_sim/{path}"),
        )
        .await
    }

    /// After `shutdown`: waits until the listener is gone (VMs are stopped before the process exits).
    pub async fn wait_gone(&self) -> Result<(), String> {
        for _ in 0..600 {
            if self
                .http
                .get(format!("{}_sim/health", self.endpoint))
                .send()
                .await
                .is_err()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "the sim at {} did not stop within 60 s",
            self.endpoint
        ))
    }
}

fn read_discovery(dir: &Path) -> Result<String, String> {
    let path = dir.join(DISCOVERY_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "reading {} (is a sim serving this state dir?): {e}",
            path.display()
        )
    })?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    v["endpoint"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{} has no endpoint", path.display()))
}
