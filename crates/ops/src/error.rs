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
    /// A step of a change failed: the error, and where in the change it stopped (`domain::step_words`), so the
    /// user reads the phase as well as the cause.
    #[error("step {index} of {total} ({doing}) failed")]
    AtStep {
        index: usize,
        total: usize,
        doing: String,
        #[source]
        source: Box<OpError>,
    },
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
            OpError::AtStep { source, .. } => source.is_transient(),
            _ => false,
        }
    }

    /// The error of step `index` (from 0) of `steps`, saying which step it was; a refusal, which says its own
    /// sentence, is left as it is.
    pub fn at_step(self, index: usize, steps: &[ha_domain::step::Step]) -> OpError {
        match self {
            OpError::Refused(..)
            | OpError::NotYet(..)
            | OpError::BroughtCaKeyNeeded { .. }
            | OpError::AtStep { .. } => self,
            e => OpError::AtStep {
                index: index + 1,
                total: steps.len(),
                doing: ha_domain::step_words::doing(&steps[index]),
                source: Box::new(e),
            },
        }
    }

    /// Whether the change's own deadline (the resource's `timeouts`) passed before a Compute call or its
    /// operation finished: the work was too long for the timeout, not a failure of the API.
    pub fn ran_out_of_time(&self) -> bool {
        match self {
            OpError::AtStep { source, .. } => source.ran_out_of_time(),
            e => matches!(e, OpError::Gce(ha_gce::Error::Timeout { .. })),
        }
    }

    /// The error with every cause beneath it, as the user reads it in a diagnostic: "adding etcd learner … failed"
    /// alone does not say why, its source does.
    pub fn explain(&self) -> String {
        ha_settings::error_chain::explain(self)
    }
}

pub type Result<T, E = OpError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use ha_domain::step::{ReplicaStep, Step};

    #[test]
    fn a_failed_step_says_which_it_was_and_keeps_what_its_cause_means() {
        let steps: Vec<Step> = vec![
            ReplicaStep::RemoveFromPool.into(),
            ReplicaStep::DeleteInstance.into(),
            ReplicaStep::RebuildInstance.into(),
        ];
        let timeout = OpError::Gce(ha_gce::Error::Timeout {
            resource: "instance walk-a".into(),
            action: "delete".into(),
            last: String::new(),
        });
        let at = timeout.at_step(1, &steps);
        assert_eq!(
            at.explain(),
            "step 2 of 3 (deleting its VM) failed: instance walk-a: delete did not finish before the deadline"
        );
        assert!(at.ran_out_of_time());
        assert!(at.is_transient());
        // Wrapped once: a step's error passed up again keeps its place.
        assert_eq!(at.at_step(0, &steps).explain().matches("step ").count(), 1);
        // A refusal says its own sentence.
        let refused = OpError::Refused("No".into(), "Because.".into()).at_step(2, &steps);
        assert_eq!(refused.to_string(), "No. Because.");
        let other = OpError::Other("boom".into()).at_step(2, &steps);
        assert!(!other.is_transient() && !other.ran_out_of_time());
        assert_eq!(
            other.explain(),
            "step 3 of 3 (creating its VM again on its etcd data disk) failed: boom"
        );
    }
}
