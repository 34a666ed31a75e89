//! Secret Manager's resources as the sim stores them, and as the API shows them (`Secret`, `SecretVersion`,
//! `Policy` of v1). Payloads are kept as the base64 the API carries, in the sim's `state.json`: the sim's
//! state directory is the machine's own, as Google's storage is Google's.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One secret: its labels, its versions in order (version `n` at index `n - 1`) and its IAM policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    pub project: String,
    pub name: String,
    pub create_time: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The `replication` object as the creator gave it (`automatic` or `userManaged`).
    pub replication: Value,
    #[serde(default)]
    pub versions: Vec<Version>,
    #[serde(default)]
    pub policy: Policy,
    /// Bumped on every change to the secret or its policy: the policy's and the secret's etag.
    #[serde(default)]
    pub revision: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VersionState {
    Enabled,
    Disabled,
    Destroyed,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    pub create_time: String,
    pub state: VersionState,
    /// Base64, as carried; none once destroyed (Secret Manager discards a destroyed version's payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroy_time: Option<String>,
}

/// An IAM policy: bindings of a role to members. Conditions and audit configs are not modelled; a policy that
/// carries them is refused rather than half-applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    #[serde(default)]
    pub bindings: Vec<Binding>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub role: String,
    pub members: Vec<String>,
}

impl Secret {
    /// `projects/{project}/secrets/{name}`, as the API names it.
    pub fn path(&self) -> String {
        format!("projects/{}/secrets/{}", self.project, self.name)
    }

    pub fn etag(&self) -> String {
        format!("\"{:x}\"", self.revision)
    }

    /// The API's `Secret`.
    pub fn view(&self) -> Value {
        json!({
            "name": self.path(),
            "replication": self.replication,
            "createTime": self.create_time,
            "labels": self.labels,
            "annotations": self.annotations,
            "etag": self.etag(),
        })
    }

    /// The API's `SecretVersion` for version `n` (1-based).
    pub fn version_view(&self, n: usize) -> Value {
        let v = &self.versions[n - 1];
        let mut out = json!({
            "name": format!("{}/versions/{n}", self.path()),
            "createTime": v.create_time,
            "state": v.state,
            "replicationStatus": {"automatic": {}},
            "etag": format!("\"{:x}\"", self.revision),
            "clientSpecifiedPayloadChecksum": true,
        });
        if let Some(t) = &v.destroy_time {
            out["destroyTime"] = json!(t);
        }
        out
    }

    /// The newest version that is enabled: what `latest` names for an access.
    pub fn latest_enabled(&self) -> Option<usize> {
        self.versions
            .iter()
            .rposition(|v| v.state == VersionState::Enabled)
            .map(|i| i + 1)
    }

    /// The newest version in any state: what `latest` names for a get.
    pub fn latest(&self) -> Option<usize> {
        (!self.versions.is_empty()).then_some(self.versions.len())
    }

    /// The API's `Policy`, with the etag a `setIamPolicy` must send back unchanged.
    pub fn policy_view(&self) -> Value {
        let mut out = json!({"version": 1, "etag": policy_etag(self.revision)});
        if !self.policy.bindings.is_empty() {
            out["bindings"] = json!(self.policy.bindings);
        }
        out
    }
}

/// IAM etags are base64 of opaque bytes.
pub fn policy_etag(revision: u64) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(revision.to_be_bytes())
}
