//! The Operation resource (wire shape) and what the sim does when one advances.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `compute#operation`, exactly the fields GCE returns.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub kind: String,
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub operation_type: String,
    pub target_link: String,
    pub target_id: String,
    pub status: String,
    pub progress: i32,
    pub insert_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    pub user: String,
    pub self_link: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_operation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<OpErrorBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_error_status_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_error_message: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct OpErrorBody {
    pub errors: Vec<OpErrorItem>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OpErrorItem {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_details: Vec<Value>,
}

/// Which stored collection a resource lives in.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collection {
    Instances,
    Addresses,
    Firewalls,
    HttpHealthChecks,
    TargetPools,
    ForwardingRules,
    Disks,
    Subnetworks,
}

/// A state change the sim applies when an operation reaches RUNNING or DONE. Data, not a closure, so
/// operations in flight survive a restart of the sim.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "do", rename_all = "camelCase")]
pub enum Transition {
    Nothing,
    /// Set an instance's status (STAGING, RUNNING, TERMINATED); the fabric then boots or stops its VM.
    InstanceStatus {
        key: String,
        status: String,
    },
    /// Set an address's stored status (RESERVING → RESERVED).
    AddressStatus {
        key: String,
        status: String,
    },
    /// Set a disk's stored status (CREATING → READY).
    DiskStatus {
        key: String,
        status: String,
    },
    /// Set a disk's size (the end of disks.resize: GCE shows the new size once the operation is DONE).
    DiskSize {
        key: String,
        size_gb: String,
    },
    /// The resource disappears (end of a delete).
    Remove {
        collection: Collection,
        key: String,
    },
}

/// How an operation ends badly, fixed when it is accepted (from a failpoint).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OpFailure {
    pub code: String,
    pub message: String,
    pub http_status: i32,
    pub http_message: String,
    #[serde(default)]
    pub details: Vec<Value>,
}

/// An operation plus the sim's plan for it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OpRecord {
    pub op: Operation,
    /// `instances.insert`, `addresses.delete`...: selects latency and operation failpoints.
    pub kind: String,
    /// Unix millis when it turns RUNNING and when it is due DONE.
    pub run_at: u64,
    pub done_at: u64,
    pub on_running: Transition,
    pub on_done: Transition,
    #[serde(default)]
    pub failure: Option<OpFailure>,
    /// Held RUNNING by a stall failpoint until that failpoint is cleared.
    #[serde(default)]
    pub stalled: bool,
}

impl OpRecord {
    pub fn is_done(&self) -> bool {
        self.op.status == "DONE"
    }
}
