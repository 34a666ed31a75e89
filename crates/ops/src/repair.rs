//! Repairs after the world moved behind Terraform's back.
//!
//! `repair_shape` puts a cluster's load balancer and static IP back into the shape its replicas call for: observe,
//! ask `domain::shape::cluster_repairs`, run the steps (`ops::execute`). Every step is an "ensure" (membership changes skip members
//! already in or out, deletes accept "not found"), so a repair that is interrupted, or followed by a replica's join
//! or leave in the same apply, resumes and composes cleanly. The caller holds the cluster's lock.
//!
//! One replica's VM is put back in place by `ops::mend`.

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::Result;
use super::execute::Run;
use super::observe::{Snapshot, observe};
use ha_domain::shape::{cluster_repairs, reachability_repairs};
use ha_domain::step::ClusterStep;

/// Before a join, a leave or a roll: gives replica VMs that lost their external IP to an interrupted IP move an
/// ephemeral one again, so their etcd members can be asked (`domain::shape::reachability_repairs`). Returns
/// whether anything changed, in which case `snap` is stale. The caller holds the cluster's lock.
pub async fn restore_reachability(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    deadline: Instant,
) -> Result<bool> {
    let steps = reachability_repairs(&snap.observed);
    Run::for_cluster(ctx, snap, deadline)
        .execute(&steps)
        .await?;
    Ok(!steps.is_empty())
}

/// Repairs the cluster's shape; returns the steps taken (empty when it was in shape).
pub async fn repair_shape(ctx: &ClusterCtx, deadline: Instant) -> Result<Vec<ClusterStep>> {
    let snap = observe(ctx, &[], deadline).await?;
    let steps = cluster_repairs(&snap.observed, &snap.running());
    tracing::debug!(cluster = %ctx.spec.name, steps = ?steps, "repair steps");
    Run::for_cluster(ctx, &snap, deadline)
        .execute(&steps)
        .await?;
    Ok(steps)
}
