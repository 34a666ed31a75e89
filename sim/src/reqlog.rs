//! The request log: every API call with its outcome, and counts per API method, for measuring how many calls
//! a `terraform apply` or `plan` makes (`GET /_sim/requests`, reset with `POST /_sim/requests/reset`).

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// Entries kept; counts are kept for everything since the last reset.
const KEEP: usize = 5_000;

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub seq: u64,
    pub at: String,
    pub method: String,
    pub path: String,
    /// API method, e.g. `compute.instances.insert`; `compute.unknown` for unrouted paths; `batch` for a
    /// `POST /batch/compute/v1` itself (each call inside it has its own entry).
    pub api: String,
    pub status: u16,
    pub millis: u64,
    /// The caller's `User-Agent`, so tests can check who made each call (the provider names itself and the
    /// Terraform that ran it; gcloud names itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
}

#[derive(Default, Debug)]
pub struct RequestLog {
    seq: u64,
    entries: VecDeque<Entry>,
    counts: BTreeMap<String, u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub total: u64,
    pub by_method: BTreeMap<String, u64>,
    pub entries: Vec<Entry>,
}

impl RequestLog {
    pub fn record(&mut self, mut e: Entry) {
        self.seq += 1;
        e.seq = self.seq;
        *self.counts.entry(e.api.clone()).or_default() += 1;
        if self.entries.len() == KEEP {
            self.entries.pop_front();
        }
        self.entries.push_back(e);
    }

    pub fn summary(&self) -> Summary {
        Summary {
            total: self.counts.values().sum(),
            by_method: self.counts.clone(),
            entries: self.entries.iter().cloned().collect(),
        }
    }

    pub fn reset(&mut self) {
        self.entries.clear();
        self.counts.clear();
    }
}
