//! Repairs after the world moved behind Terraform's back.
//!
//! `repair_shape` puts a cluster's load balancer and static IP back into the shape its replicas call for: observe,
//! ask `domain::shape::cluster_repairs`, run the steps (`ops::execute`). Every step is an "ensure" (membership changes skip members
//! already in or out, deletes accept "not found"), so a repair that is interrupted, or followed by a replica's join
//! or leave in the same apply, resumes and composes cleanly. The caller holds the cluster's lock.
//!
//! `restart_replica` starts a replica VM that stopped or crashed and returns once its etcd member is healthy again.
//!
//! `restore_metadata` writes back the metadata the provider set on a replica VM when it was edited by hand
//! (`domain::metadata`); it runs before a restart, since a VM boots from its metadata.

use std::time::Duration;

use tokio::time::Instant;

use super::build::vm_labels;
use super::context::ClusterCtx;
use super::endpoint::await_static_ip;
use super::error::{OpError, Result};
use super::execute::Run;
use super::observe::{Snapshot, etcd_target, observe};
use ha_domain::metadata::metadata_drift;
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

/// Writes the replica VM's labels as the provider sets them (the cluster's, the replica's own, and the provider's
/// own: cluster, build), over whatever was edited by hand.
pub async fn restore_labels(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    own: &std::collections::BTreeMap<String, String>,
    deadline: Instant,
) -> Result<InstanceInfo> {
    Ok(ctx
        .compute
        .set_labels(zone, name, &vm_labels(ctx, own), deadline)
        .await?)
}

/// How often a restarted VM and its etcd member are looked at: they have no operation to wait on.
const POLL: Duration = Duration::from_millis(200);

/// Writes `wrote` back as the VM's whole metadata if it differs (in any item) from what the VM carries.
pub async fn restore_metadata(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    wrote: &std::collections::BTreeMap<String, String>,
    deadline: Instant,
) -> Result<()> {
    let c = &ctx.compute;
    let Some(vm) = c.get_instance(zone, name, deadline).await? else {
        return Err(OpError::Other(format!(
            "the VM of replica {name} in {zone} does not exist"
        )));
    };
    let drift = metadata_drift(wrote, &vm.metadata);
    if drift.is_empty() {
        return Ok(());
    }
    tracing::info!("{name}: {}; writing its metadata back", drift.join("; "));
    let items: Vec<(String, String)> = wrote.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    c.set_metadata(zone, name, &items, deadline).await?;
    Ok(())
}

/// Starts replica `name` if its VM is not running, waits until GCE shows it RUNNING and its etcd member answers
/// healthy (and, when it holds the static IP, until the IP serves again). Returns the VM as it then is; a VM that
/// was running already is returned at once.
pub async fn restart_replica(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<InstanceInfo> {
    let c = &ctx.compute;
    let gone = || OpError::Other(format!("the VM of replica {name} in {zone} does not exist"));
    let mut vm = c
        .get_instance(zone, name, deadline)
        .await?
        .ok_or_else(gone)?;
    if vm.status == "RUNNING" {
        return Ok(vm);
    }
    tracing::info!("{name} is {}, starting its VM again", vm.status);
    vm = c.start_instance(zone, name, deadline).await?;
    while vm.status != "RUNNING" {
        if Instant::now() >= deadline {
            return Err(OpError::Other(format!(
                "the VM of replica {name} was started but is still {}; look at its serial console, then apply again",
                vm.status
            )));
        }
        tokio::time::sleep(POLL).await;
        vm = c
            .get_instance(zone, name, deadline)
            .await?
            .ok_or_else(gone)?;
    }
    let target = etcd_target(ctx, &vm).ok_or_else(|| {
        OpError::Other(format!(
            "replica {name} runs again but has no IP to reach its etcd through"
        ))
    })?;
    loop {
        let health = ctx.etcd.health(std::slice::from_ref(&target)).await;
        let last = match health.first().map(|h| &h.health) {
            Some(h) if h.is_healthy() => break,
            Some(ha_etcd::Health::Unhealthy { reason, .. }) => reason.clone(),
            Some(ha_etcd::Health::Unreachable { reason }) => reason.clone(),
            _ => "no answer".to_string(),
        };
        if Instant::now() >= deadline {
            return Err(OpError::Other(format!(
                "replica {name} runs again but its etcd member did not become healthy in time (last: {last}). If it cannot recover, replace the replica (`terraform apply -replace=...`)."
            )));
        }
        tokio::time::sleep(POLL).await;
    }
    tracing::info!("{name} runs again and its etcd member is healthy");
    if vm.external_ip.as_deref() == Some(ctx.spec.external_ip.as_str()) {
        await_static_ip(ctx, deadline).await?;
    }
    Ok(vm)
}
