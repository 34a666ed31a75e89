//! The etcd backend: membership changes and health of the masters' etcd cluster, over mutual TLS.
//!
//! It knows nothing of Terraform. Its types are its own ([`Member`], [`MemberStatus`], [`Alarm`]), not
//! etcd-client's, so callers and their tests never see gRPC. Every call names the endpoints to use; each
//! endpoint is a [`EtcdTarget`] whose certificate is verified against the etcd client CA *for the member's
//! name*, never skipped and never by IP (an external IP can move to another replica).
//!
//! How a replica joins (etcd's learner flow, one change at a time, as Cluster API does):
//! 1. [`Etcd::preflight`] — members equal the replicas we know, every member agrees, no alarm, no learner.
//! 2. [`Etcd::add_learner`] — idempotent on the peer URL; returns the `--initial-cluster` list.
//! 3. the caller boots the VM with `--initial-cluster-state=existing`;
//! 4. [`Etcd::await_learner_caught_up`], then [`Etcd::promote`] (or [`Etcd::promote_when_caught_up`]).
//!
//! Each step is separately callable so an interrupted apply can resume where it stopped. Leaving: the caller
//! checks quorum, then [`Etcd::preflight_removal`] (the same rules, waived for the leaving member, which may be
//! dead), then [`Etcd::remove_member`], which hands leadership away first when the member leads.
//! Health ([`Etcd::health`]) is best effort: a value per endpoint, never an error for an unhealthy member.

mod client;
mod error;
mod members;
mod preflight;
mod snapshot;
mod status;
mod values;
mod version;

#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;

pub use client::{Etcd, Mint, MintedIdentity};
pub use error::{CallError, EndpointFailure, EtcdError, FailureKind};
pub use preflight::{PreflightError, PreflightProblem};
pub use status::{EndpointHealth, Health};
pub use version::Versions;

/// One member's client endpoint and the name its serving certificate must carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EtcdTarget {
    /// Where to dial, often the replica's external IP and port 2379.
    pub endpoint: SocketAddr,
    /// The member's name (its instance name): the DNS name the server certificate is verified against.
    pub server_name: String,
}

impl EtcdTarget {
    pub fn new(endpoint: SocketAddr, server_name: impl Into<String>) -> Self {
        Self {
            endpoint,
            server_name: server_name.into(),
        }
    }
}

impl fmt::Display for EtcdTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.server_name, self.endpoint)
    }
}

/// Client-side TLS material: the CA that signs etcd's client-port certificates, and our client certificate.
#[derive(Clone)]
pub struct EtcdTls {
    pub ca_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

// The key never reaches a log, even through a `{:?}` of a struct that holds this.
impl fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_pem", &format_args!("<{} bytes>", self.ca_pem.len()))
            .field(
                "client_cert_pem",
                &format_args!("<{} bytes>", self.client_cert_pem.len()),
            )
            .field("client_key_pem", &"<redacted>")
            .finish()
    }
}

/// An etcd cluster member as etcd reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    /// Empty until the member has started and published itself (a learner that never booted has none).
    pub name: String,
    pub peer_urls: Vec<String>,
    /// Empty until the member has started.
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

impl Member {
    /// The IP of the member's first peer URL (`https://<ip>:2380`): the replica's internal IP.
    pub fn peer_ip(&self) -> Option<std::net::Ipv4Addr> {
        self.peer_urls
            .first()?
            .trim_start_matches("https://")
            .split(':')
            .next()?
            .parse()
            .ok()
    }

    /// Whether the member has ever started: etcd fills in the name when it first publishes itself.
    pub fn started(&self) -> bool {
        !self.name.is_empty()
    }

    /// How to name the member in messages: its name, or its peer URL before it has started.
    pub fn label(&self) -> String {
        if self.started() {
            self.name.clone()
        } else {
            self.peer_urls
                .first()
                .cloned()
                .unwrap_or_else(|| format!("{:x}", self.id))
        }
    }
}

/// The `--initial-cluster` value for a member joining with `--initial-cluster-state=existing`: every member
/// `name=peer_url`, where the joining member (the one with `joining_peer_url`, not yet started, so nameless)
/// gets `joining_name`. `None` if another member has not started either: etcd would refuse such a list.
pub fn initial_cluster(
    members: &[Member],
    joining_name: &str,
    joining_peer_url: &str,
) -> Option<String> {
    let mut parts = Vec::new();
    for m in members {
        let joining = m.peer_urls.iter().any(|u| u == joining_peer_url);
        let name = if joining {
            joining_name
        } else {
            m.name.as_str()
        };
        if name.is_empty() {
            return None;
        }
        for url in &m.peer_urls {
            parts.push(format!("{name}={url}"));
        }
    }
    Some(parts.join(","))
}

/// What one member says about itself (etcd's Status RPC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    /// The id of the member that answered.
    pub member_id: u64,
    /// The leader it knows; 0 when it knows none.
    pub leader_id: u64,
    /// The key-value store's revision as this member has applied it.
    pub revision: i64,
    /// Raft committed index.
    pub raft_index: u64,
    pub raft_applied_index: u64,
    pub raft_term: u64,
    pub is_learner: bool,
    pub db_size: i64,
    pub version: String,
    /// Errors the member reports about itself (e.g. a raised alarm).
    pub errors: Vec<String>,
}

/// A raised etcd alarm. Alarms are cluster state: any member reports all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alarm {
    pub member_id: u64,
    pub kind: AlarmKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmKind {
    /// The backend hit its quota: etcd accepts only reads and deletes until it is compacted and disarmed.
    NoSpace,
    /// A corruption check failed.
    Corrupt,
    /// An alarm this client does not know, by its protobuf number.
    Other(i32),
}

impl fmt::Display for AlarmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // etcd's own spelling (etcdctl alarm list), so operators can search for it.
            AlarmKind::NoSpace => f.write_str("NOSPACE"),
            AlarmKind::Corrupt => f.write_str("CORRUPT"),
            AlarmKind::Other(n) => write!(f, "alarm type {n}"),
        }
    }
}
