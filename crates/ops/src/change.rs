//! What every change to a replica does around the steps `domain` decides for it, written once: the cluster read
//! with every replica reachable, and etcd's removal preflight for each member the steps remove
//! (`ha_domain::step::removed_members`). A join, a leave and
//! a roll then differ only in what they decide and what their run starts with (`ops::execute::Run`).

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::Result;
use super::observe::{Snapshot, observe};
use super::repair::restore_reachability;
use ha_domain::step::{Step, removed_members};

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
