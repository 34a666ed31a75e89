//! The etcd backend's error: one variant per step, each with what it was doing and why each endpoint failed.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Why a backend step failed. Variants are named for the step; `source` says what every endpoint answered.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("listing etcd members failed")]
    MemberList(#[source] CallError),

    #[error("reading etcd status of {target} failed")]
    Status {
        target: String,
        #[source]
        source: CallError,
    },

    #[error("reading etcd's versions from {target} failed: {message}")]
    Version { target: String, message: String },

    /// The snapshot stream broke off, or did not end within its time.
    #[error("taking an etcd snapshot from {target} failed: {message}")]
    Snapshot { target: String, message: String },

    #[error("listing etcd alarms failed")]
    Alarms(#[source] CallError),

    #[error("reading etcd's keys under {prefix} failed")]
    Scan {
        prefix: String,
        #[source]
        source: CallError,
    },

    #[error("adding etcd learner {peer_url} failed")]
    AddLearner {
        peer_url: String,
        #[source]
        source: CallError,
    },

    /// The learner never reported itself close enough to the leader. Nothing was changed; the caller may
    /// wait again or remove the learner.
    #[error("etcd learner {id:x} did not catch up with the leader within {timeout:?}: {last}")]
    AwaitLearner {
        id: u64,
        timeout: Duration,
        last: String,
    },

    /// A restarted member never reported itself healthy and close to the leader. Nothing was changed.
    #[error(
        "etcd member {id:x} did not come back healthy and caught up within {timeout:?}: {last}"
    )]
    AwaitMember {
        id: u64,
        timeout: Duration,
        last: String,
    },

    #[error("promoting etcd learner {id:x} failed")]
    Promote {
        id: u64,
        #[source]
        source: CallError,
    },

    /// etcd kept answering that the learner is not in sync with the leader until the deadline.
    #[error("etcd learner {id:x} was still not in sync with the leader after {timeout:?}")]
    PromoteTimedOut { id: u64, timeout: Duration },

    /// The member the step needs is not in the cluster (removed meanwhile, or never added).
    #[error("{step}: etcd member {id:x} is not in the cluster")]
    MemberNotFound { step: &'static str, id: u64 },

    #[error("moving etcd leadership to {to:x} failed: {reason}")]
    MoveLeader { to: u64, reason: String },

    /// The member to remove leads and no other voter answers to take over; removing it would force an
    /// election among members that may not be able to hold one.
    #[error("etcd member {id:x} leads and no other voting member answers to take over")]
    NoSuccessor { id: u64 },

    #[error("removing etcd member {id:x} failed")]
    RemoveMember {
        id: u64,
        #[source]
        source: CallError,
    },

    #[error("telling etcd that member {id:x} now listens for peers at {peer_url} failed")]
    UpdateMember {
        id: u64,
        peer_url: String,
        #[source]
        source: CallError,
    },

    /// Removing the only member would destroy the cluster's data; that is the cluster's deletion, not ours.
    #[error("refusing to remove etcd member {name} ({id:x}): it is the last member")]
    RemoveLastMember { id: u64, name: String },
}

pub type Result<T, E = EtcdError> = std::result::Result<T, E>;

/// What went wrong talking to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointFailure {
    pub endpoint: SocketAddr,
    pub server_name: String,
    pub kind: FailureKind,
    /// The error and its causes, e.g. the TLS verification failure behind a transport error.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No answer: refused, timed out, TLS failed, or etcd said it cannot serve now (no leader).
    Unreachable,
    /// The endpoint is a learner, which serves only status and serializable reads.
    Learner,
    /// etcd answered and refused the request; asking another member would get the same answer.
    Rejected,
}

impl fmt::Display for EndpointFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.server_name, self.endpoint, self.message
        )
    }
}

impl EndpointFailure {
    /// Whether etcd's answer contains `text` (etcd's errors are only distinguishable by message).
    pub(crate) fn says(&self, text: &str) -> bool {
        self.kind == FailureKind::Rejected && self.message.contains(text)
    }
}

/// Every endpoint tried for one call, and what each answered. Empty when no endpoint was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub failures: Vec<EndpointFailure>,
}

impl CallError {
    /// The definitive answer, if an endpoint gave one (the last failure is the one that stopped the call).
    pub fn rejection(&self) -> Option<&EndpointFailure> {
        self.failures
            .last()
            .filter(|f| f.kind == FailureKind::Rejected)
    }

    pub(crate) fn says(&self, text: &str) -> bool {
        self.rejection().is_some_and(|f| f.says(text))
    }

    /// Whether any endpoint's answer contains `text`, refusals and "try elsewhere" answers alike.
    pub(crate) fn mentions(&self, text: &str) -> bool {
        self.failures.iter().any(|f| f.message.contains(text))
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.failures.is_empty() {
            return f.write_str("no etcd endpoint was given");
        }
        for (i, failure) in self.failures.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CallError {}

impl From<EndpointFailure> for CallError {
    fn from(failure: EndpointFailure) -> Self {
        CallError {
            failures: vec![failure],
        }
    }
}
