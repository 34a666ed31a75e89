//! What every change to a replica does around the steps `domain` decides for it, written once: the cluster read
//! with every replica reachable, and etcd's removal preflight for each member the steps remove. A join, a leave and
//! a roll then differ only in what they decide and what their run starts with (`ops::execute::Run`).

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::Result;
use super::observe::{Snapshot, observe};
use super::repair::restore_reachability;
use ha_domain::step::{ClusterStep, ReplicaStep, Step};

/// The cluster as it is once replica VMs that lost their external IP to an interrupted IP move have an ephemeral
/// one again, so that every etcd member can be asked (`domain::shape::reachability_repairs`): read twice only when
/// that repair changed something. The caller holds the cluster's lock.
pub async fn observe_reachable(ctx: &ClusterCtx, deadline: Instant) -> Result<Snapshot> {
    let snap = observe(ctx, &[], deadline).await?;
    if restore_reachability(ctx, &snap, deadline).await? {
        return observe(ctx, &[], deadline).await;
    }
    Ok(snap)
}

/// The members `steps` remove from etcd: the replica's own (a leave) and the learners interrupted joins left (a
/// join clears them first).
fn removed_members(steps: &[Step]) -> Vec<u64> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Replica(ReplicaStep::RemoveMember { id })
            | Step::Cluster(ClusterStep::RemoveStaleMember { id, .. }) => Some(*id),
            _ => None,
        })
        .collect()
}

/// etcd's removal preflight, before anything of the change runs, for every member `steps` remove, all at once (each
/// would otherwise count the others as leftovers): the members that stay are the replicas other than `replica`,
/// agree on the list and carry no alarm. The members removed are exempt: replacing a vanished or crashed VM
/// removes exactly such a dead member. Nothing to check when the steps remove none.
pub async fn preflight_removals(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    steps: &[Step],
    replica: &str,
) -> Result<()> {
    let removing = removed_members(steps);
    if removing.is_empty() {
        return Ok(());
    }
    let staying: Vec<String> = snap
        .instances
        .keys()
        .filter(|n| n.as_str() != replica)
        .cloned()
        .collect();
    ctx.etcd
        .preflight_removal(&removing, &staying, &snap.targets)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
