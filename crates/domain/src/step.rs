//! The steps every change to a cluster is made of, as data. `domain` decides which steps remain from an observed
//! snapshot (`topology::join_steps`, `topology::leave_steps`, `roll::roll_steps`, `shape::cluster_repairs`); one
//! executor, `ops::execute`, carries out any list of them. A step is idempotent where it can be (an "ensure", a
//! delete that accepts "not found"), so a list decided again after a kill resumes where the last one stopped.
//!
//! Three families, by what a step needs (the third, [`FoundationStep`], is the cluster's own objects, run before a
//! cluster has a context or after it has no replica): a [`ReplicaStep`] acts on "the replica" the change is about (the one
//! joining, leaving or rolling) and can only be run by a run about one; a [`ClusterStep`] names what it acts on
//! (`{ name }`, `{ to }`, `{ from }`) or acts on the cluster, so repairs, which are about no replica, are made of
//! these alone. Adding a step: a variant in its family here, decided in a `domain` function, carried out once in
//! `ops::execute` (the family's `match` says which method does it).

use std::collections::BTreeMap;
use std::fmt;

/// A step of a change to one replica (a join, leave, roll, recovery or restore): either about that replica, or
/// about what it names. Only a run about a replica (`ops::execute::ReplicaRun`) carries these out, so a step that
/// needs the replica is never run without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Replica(ReplicaStep),
    Cluster(ClusterStep),
}

impl From<ReplicaStep> for Step {
    fn from(s: ReplicaStep) -> Step {
        Step::Replica(s)
    }
}

impl From<ClusterStep> for Step {
    fn from(s: ClusterStep) -> Step {
        Step::Cluster(s)
    }
}

/// A step about the replica the change is about: its etcd member, its VM, its place in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaStep {
    /// The replica is added to etcd as a learner (non-voting) before its VM starts.
    AddLearner,
    /// The learner has applied what the leader committed: promote it to a voting member.
    AwaitCaughtUpAndPromote,
    /// Hand etcd leadership to another voter if the replica's member leads.
    MoveLeadership,
    RemoveMember {
        id: u64,
    },
    /// The replica's member (the same one, after a restart or rebuild) answers healthy and is caught up.
    AwaitMember,
    /// Consecutive healthy checks (member healthy, API serving) before the cluster lock goes to the next replica.
    Soak,
    /// Bootstrap: the first replica founds etcd (initial-cluster-state new).
    CreateFoundingInstance {
        with_static_ip: bool,
    },
    /// Joiners start with initial-cluster-state existing and an ephemeral IP.
    CreateJoiningInstance,
    /// Create the VM again with the cluster's current settings on its own etcd data disk and internal IP.
    RebuildInstance,
    /// Disaster recovery (`domain::recovery`): create the VM again on its data disk with etcd's
    /// `--force-new-cluster`, so its member becomes a one-member cluster with all its data.
    RecoverAsSoleMember,
    /// Disaster recovery (`domain::restore`): the replica's VM on a new data disk, restoring a Cloud Storage
    /// snapshot as a new one-member cluster before etcd starts.
    RestoreFromSnapshot {
        with_static_ip: bool,
    },
    /// Grow the replica's etcd data disk to the cluster's `data_disk_size_gb` (GCE only grows disks); the
    /// rebuilt VM's first boot grows the filesystem.
    GrowDataDisk,
    StopInstance,
    /// The cluster's machine type, on the stopped VM.
    SetMachineType,
    StartInstance,
    /// A VM started again without a rebuild (`domain::mend`) runs and its etcd member answers healthy; when it
    /// holds the static IP, the IP serves the API again. Asks the member itself, not the cluster: a replica that
    /// was the only one running has no other member to ask.
    AwaitRestarted,
    /// Write the provider's metadata back as the VM's whole metadata, over a hand edit (`domain::metadata`);
    /// before a start, since a VM boots from it.
    WriteMetadata {
        items: MetadataItems,
    },
    /// Delete the VM; its etcd data disk (`autoDelete=false`) and reserved internal IP stay.
    DeleteInstance,
    /// Delete the replica's etcd data disk, if it exists; only once its VM is gone.
    DeleteDataDisk,
    /// Release the replica's reserved internal IP, if still reserved.
    ReleaseInternalAddress,
    /// Delete the replica's secret in Secret Manager (its keys, `names::keys_secret`), if it exists; only once
    /// its VM is gone.
    DeleteKeys,
    /// A move to another subnetwork, once the VM is gone: the reserved internal IP is released from the old
    /// subnetwork and reserved again (same name) in the cluster's; the steps after it use the new IP.
    MoveInternalAddress,
    /// Tell etcd the replica's member's peer URL on its current internal IP (`member update`): the same member
    /// and data, at a new address.
    UpdatePeerUrl,
    /// The replica's own API server answers `/healthz` over TLS.
    AwaitApi,
    /// The replica's API server finds the `ha-master:cluster-admins` binding (`admin_access::BOUND_GROUP`):
    /// where etcd starts new or from a snapshot, the addon manager creates it only some time after the first API
    /// server answers (on its start, then every minute), so a new cluster's default admin credential would be
    /// refused until then. The apply ends once a credential in the group is served, as kubeadm's init ends
    /// once its own `kubeadm:cluster-admins` binding exists.
    AwaitAdminBinding,
    /// The replica joins the pool, once its API server answers, so the LB never sends to it early.
    AddToPool,
    /// The replica leaves the pool, then the drain delay passes so requests in flight finish.
    RemoveFromPool,
    /// The VM carries the labels the change leaves it with: the cluster's and its own, the build it runs, and no
    /// joining mark; nothing is called when it already does. The last step of every join and roll
    /// ([`labelled_last`]). In a join it is the commit point: a VM still marked joining is a dead join's leftover
    /// (`domain::orphans`), so a join killed anywhere before it is swept by the next, and one killed after it is a
    /// replica. In a roll it labels a VM that kept its old build label (resized in place, or made before builds
    /// were labelled); a rebuilt VM is made with its labels.
    LabelVm,
}

impl ReplicaStep {
    /// Whether the step creates the replica's VM, which boots with certificates signed by the cluster's CAs
    /// (issued for it, as a rebuilt VM's are renewed): a cluster whose CAs cannot sign cannot run it.
    pub fn builds_vm(&self) -> bool {
        matches!(
            self,
            ReplicaStep::CreateFoundingInstance { .. }
                | ReplicaStep::CreateJoiningInstance
                | ReplicaStep::RebuildInstance
                | ReplicaStep::RecoverAsSoleMember
                | ReplicaStep::RestoreFromSnapshot { .. }
        )
    }
}

/// A VM's whole metadata as the provider writes it. Its `Debug` names the keys only: steps are logged, and a VM
/// made by an earlier release carries private keys in `user-data`.
#[derive(Clone, PartialEq, Eq)]
pub struct MetadataItems(pub BTreeMap<String, String>);

impl fmt::Debug for MetadataItems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// The members `steps` remove from etcd: the replica's own (a leave) and the learners interrupted joins left (a
/// join clears them first). Each gets etcd's removal preflight before the change runs (`ops::change`).
pub fn removed_members(steps: &[Step]) -> Vec<u64> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Replica(ReplicaStep::RemoveMember { id })
            | Step::Cluster(ClusterStep::RemoveStaleMember { id, .. }) => Some(*id),
            _ => None,
        })
        .collect()
}

/// A join's or a roll's steps with [`ReplicaStep::LabelVm`] last.
pub fn labelled_last(mut steps: Vec<Step>) -> Vec<Step> {
    steps.push(ReplicaStep::LabelVm.into());
    steps
}

/// A step that needs no replica: it names what it acts on, or acts on the cluster as a whole (its backup, load
/// balancer and static IP). Repairs are made of these alone (`shape::cluster_repairs`), and run with no replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterStep {
    /// Before a change that touches etcd (`domain::backup::before`): a snapshot from a healthy member, checked
    /// and uploaded to the cluster's backup bucket, old ones pruned. `change` names what follows, for the
    /// snapshot's metadata.
    TakeBackup {
        change: String,
    },
    /// A learner left by an interrupted join of another replica blocks new joins: remove it first.
    RemoveStaleMember {
        name: String,
        id: u64,
    },
    /// Give a VM that lost its access config an ephemeral external IP again.
    AttachEphemeralIp {
        to: String,
    },
    CreateHealthCheck,
    /// Create the pool with these instances.
    CreatePool {
        instances: Vec<String>,
    },
    /// Repairs, by name: put a replica back into the pool, or take a VM that is no replica out of it.
    AddPoolMember {
        name: String,
    },
    RemovePoolMember {
        name: String,
    },
    CreateForwardingRule,
    DeleteForwardingRule,
    DeletePool,
    DeleteHealthCheck,
    /// Replace the holder's access config with an ephemeral one.
    DetachStaticIp {
        from: String,
    },
    AttachStaticIp {
        to: String,
    },
    /// The static IP really serves the API over TLS again.
    AwaitEndpoint,
    /// Reserve `<replica>-int`, the joining replica's internal IP in the cluster's subnetwork, or find it reserved
    /// by an attempt that died: a join's last step before it reads the cluster, since etcd's initial cluster must
    /// name the new member by its IP before it exists (`domain::orphans::Orphans::before_join`).
    ReserveAddressOf {
        replica: String,
    },
    /// Release `<replica>-int`, the internal IP a dead join reserved (`domain::orphans`), if still reserved.
    ReleaseAddressOf {
        replica: String,
    },
    /// Delete secret `id`, the keys a dead join wrote (`domain::orphans`), if it exists.
    DeleteSecret {
        id: String,
    },
}

/// A step on the cluster's foundation (`domain::foundation`): the objects it owns whether or not it has replicas,
/// and what its delete sweeps. Run with no cluster context (`ops::execute::foundation`): a cluster being created has
/// none yet, and one being deleted has no replica left to observe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoundationStep {
    /// Reserve the static regional address, or find the one a killed create reserved.
    ReserveStaticAddress,
    /// Create a firewall rule the cluster lacks.
    CreateFirewall {
        rule: crate::firewall_rule::FirewallRule,
    },
    /// Bring a rule that admits other traffic than the settings say back in line (the settings changed, or a
    /// hand edit).
    PatchFirewall {
        rule: crate::firewall_rule::FirewallRule,
    },
    DeleteFirewall {
        name: String,
    },
    /// Release a dead join's reserved internal address, by name.
    ReleaseAddress {
        name: String,
    },
    /// Delete a dead join's keys' secret, by id.
    DeleteSecret {
        id: String,
    },
    /// The load balancer an interrupted shrink left (each "not found" is done).
    DeleteForwardingRule,
    DeletePool,
    DeleteHealthCheck,
    /// Write the cluster's CA keys to their secret (made when missing; a new version when it holds others). The
    /// run holds the keys: a step carries no secret, since every step is logged.
    WriteKeysSecret,
    /// Delete the secret that holds the cluster's CA keys.
    DeleteKeysSecret,
    /// Release the static address: the cluster's identity, so the last step of a delete.
    ReleaseStaticAddress,
}

/// A `Vec<Step>` from steps of either family, in order: `steps![ReplicaStep::AddLearner, ClusterStep::AwaitEndpoint]`.
#[macro_export]
macro_rules! steps {
    ($($step:expr),* $(,)?) => {
        vec![$($crate::step::Step::from($step)),*]
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps are logged at debug: a metadata write shows which items it writes, never what they hold.
    #[test]
    fn a_metadata_write_logs_its_keys_and_not_their_values() {
        let step = ReplicaStep::WriteMetadata {
            items: MetadataItems(
                [
                    ("cluster-name".to_string(), "walk".to_string()),
                    (
                        "user-data".to_string(),
                        "-----BEGIN PRIVATE KEY-----".to_string(),
                    ),
                ]
                .into(),
            ),
        };
        let shown = format!("{step:?}");
        assert!(
            shown.contains("user-data") && shown.contains("cluster-name"),
            "{shown}"
        );
        assert!(
            !shown.contains("PRIVATE") && !shown.contains("walk"),
            "{shown}"
        );
    }

    #[test]
    fn a_leave_and_a_join_that_clears_stale_learners_remove_members_and_nothing_else_does() {
        let leave: Vec<Step> = vec![
            ReplicaStep::RemoveFromPool.into(),
            ReplicaStep::MoveLeadership.into(),
            ReplicaStep::RemoveMember { id: 7 }.into(),
            ReplicaStep::DeleteInstance.into(),
        ];
        assert_eq!(removed_members(&leave), vec![7]);
        let join: Vec<Step> = vec![
            ClusterStep::RemoveStaleMember {
                name: "a".into(),
                id: 3,
            }
            .into(),
            ClusterStep::RemoveStaleMember {
                name: "b".into(),
                id: 4,
            }
            .into(),
            ReplicaStep::AddLearner.into(),
            ReplicaStep::CreateJoiningInstance.into(),
        ];
        assert_eq!(removed_members(&join), vec![3, 4]);
        let roll: Vec<Step> = vec![
            ReplicaStep::RemoveFromPool.into(),
            ReplicaStep::DeleteInstance.into(),
            ReplicaStep::RebuildInstance.into(),
            ReplicaStep::AwaitMember.into(),
        ];
        assert!(removed_members(&roll).is_empty());
    }
}
