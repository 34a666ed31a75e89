//! Why an operation failed, as one sentence the user reads, with every cause beneath it.

/// Why an operation failed. Display is the sentence the user reads.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("{0}")]
    Gce(#[from] ha_gce::Error),
    #[error("{0}")]
    Etcd(#[from] ha_etcd::EtcdError),
    #[error("{0}")]
    Preflight(#[from] ha_etcd::PreflightError),
    #[error("{0}")]
    Pki(#[from] ha_pki::PkiError),
    #[error("{0}")]
    Storage(#[from] ha_storage::Error),
    #[error("{0}")]
    Secrets(#[from] ha_secrets::Error),
    #[error("the master configuration is invalid: {0}")]
    Master(#[from] ha_master::MasterError),
    /// A change the domain refuses (quorum): summary and what to do.
    #[error("{0}. {1}")]
    Refused(String, String),
    /// A change that cannot start yet, for a reason another change under way may lift (a sibling replica still
    /// rolling): summary and what to do. The caller may wait and ask again.
    #[error("{0}. {1}")]
    NotYet(String, String),
    /// The cluster's keys secret must be written again (gone, or holding other keys) and the private key of a
    /// CA the user brought, which only the secret and the user's configuration hold, was not given: nothing can be
    /// signed with it until it is. The resource names where to give it.
    #[error(
        "cluster {cluster}'s keys secret must be written again, and the private key of the CA its user brought \
         ({which:?}) was not given and is not in the secret; nothing was changed"
    )]
    BroughtCaKeyNeeded { cluster: String, which: BroughtKey },
    #[error("{0}")]
    Other(String),
}

/// Which brought cluster CA's key a write of the keys secret lacks (`cluster_keys::ClusterKeys::completed_from`):
/// the CA's (`ca_private_key_wo`), or the next one's while the CAs rotate (`next_ca_private_key_wo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BroughtKey {
    Current,
    Next,
}

impl OpError {
    /// Whether running the same change again may finish it with nothing changed by the user: a passing failure
    /// of the Compute or the Secret Manager API (`gce::Error::is_transient`, `secrets::Error::is_transient`).
    pub fn is_transient(&self) -> bool {
        match self {
            OpError::Gce(e) => e.is_transient(),
            OpError::Secrets(e) => e.is_transient(),
            _ => false,
        }
    }

    /// Whether the change's own deadline (the resource's `timeouts`) passed before a Compute call or its
    /// operation finished: the work was too long for the timeout, not a failure of the API.
    pub fn ran_out_of_time(&self) -> bool {
        matches!(self, OpError::Gce(ha_gce::Error::Timeout { .. }))
    }

    /// The error with every cause beneath it, as the user reads it in a diagnostic: "adding etcd learner … failed"
    /// alone does not say why, its source does.
    pub fn explain(&self) -> String {
        ha_settings::error_chain::explain(self)
    }
}

pub type Result<T, E = OpError> = std::result::Result<T, E>;
