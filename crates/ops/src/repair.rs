//! Repairs after the world moved behind Terraform's back.
//!
//! `repair_shape` puts a cluster's load balancer and static IP back into the shape its replicas call for: observe,
//! ask `domain::shape::cluster_repairs`, run the steps (`ops::execute`). Every step is an "ensure" (membership changes skip members
//! already in or out, deletes accept "not found"), so a repair that is interrupted, or followed by a replica's join
//! or leave in the same apply, resumes and composes cleanly. The caller holds the cluster's lock.
//!
//! `mend_replica` puts one replica's VM back in place (`domain::mend`): metadata edited by hand written back, a
//! VM that stopped or crashed started again and its etcd member awaited, its labels set.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Replica, Run};
use super::observe::{Snapshot, observe};
use ha_domain::mend::mend_steps;
use ha_domain::shape::{cluster_repairs, reachability_repairs};
use ha_domain::step::ClusterStep;
use ha_gce::InstanceInfo;

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

/// The replica an in-place update mends (`mend_replica`).
pub struct MendRequest {
    pub name: String,
    pub zone: String,
    /// The replica's own labels (the provider adds the cluster's and its own).
    pub labels: BTreeMap<String, String>,
    /// The metadata the provider wrote on the VM, as the replica's state keeps it; none for a replica that keeps
    /// none (imported), whose metadata is then left as it is.
    pub metadata: Option<BTreeMap<String, String>>,
}

/// Puts a replica's VM back as the provider made it, with no rebuild: observe, ask `domain::mend::mend_steps`
/// (metadata written back, the VM started again and its member awaited, labels), run the steps. Returns the VM as
/// it then is. A replica in order costs the observation and no call.
pub async fn mend_replica(
    ctx: &ClusterCtx,
    req: &MendRequest,
    deadline: Instant,
) -> Result<InstanceInfo> {
    let snap = observe(ctx, &[], deadline).await?;
    let vm = snap.instances.get(&req.name);
    let carries = vm.map(|v| v.metadata.as_slice()).unwrap_or_default();
    let steps = mend_steps(&snap.observed, &req.name, req.metadata.as_ref(), carries)
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    // The mend's steps never use the replica's internal IP (they neither create nor move a VM); the VM's own is
    // given for the run's bookkeeping, and every GCE VM has one.
    let internal_ip = vm
        .and_then(|v| v.internal_ip.as_deref())
        .and_then(|ip| ip.parse().ok())
        .unwrap_or(Ipv4Addr::UNSPECIFIED);
    let me = Replica::new(&req.name, &req.zone, &req.labels, internal_ip);
    let mut run = Run::for_replica(ctx, &snap, &me, deadline);
    run.execute(&steps).await?;
    run.into_progress().instance.ok_or_else(|| {
        OpError::Other(format!(
            "the VM of replica {} vanished while it was mended",
            req.name
        ))
    })
}
