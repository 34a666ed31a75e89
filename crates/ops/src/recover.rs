//! Disaster recovery from a surviving member (`domain::recovery`): observe, ask the domain whether a recovery is
//! possible and which steps the survivor's replica takes, and run them (`ops::execute`). The replicas whose
//! members etcd forgot rejoin afterwards through their own resources (a join, as for a new replica). The caller
//! holds the cluster's lock.

use std::collections::BTreeSet;

use tokio::time::Instant;

use super::change::{Change, Decision, run_change};
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Replica, ip};
use super::observe::{Snapshot, data_disk_exists, observe};
use super::shared::{CLUSTER_LABEL, JOINING_LABEL, zone_of};
use ha_domain::recovery::{RECOVERING_BUILD, Recovery, decide};
use ha_domain::roll::BUILD_LABEL;

/// Reads the cluster and decides: the recovery the apply would run, or why none can.
pub async fn plan(ctx: &ClusterCtx, deadline: Instant) -> Result<Recovery> {
    let snap = observe(ctx, &[], deadline).await?;
    decide_recovery(ctx, &snap, deadline).await
}

/// The recovery `snap` calls for, or why none can run.
async fn decide_recovery(ctx: &ClusterCtx, snap: &Snapshot, deadline: Instant) -> Result<Recovery> {
    let recovering = snap
        .instances
        .values()
        .find(|i| i.labels.get(BUILD_LABEL).map(String::as_str) == Some(RECOVERING_BUILD))
        .map(|i| i.name.clone());
    let lost = lost_with_disk(ctx, snap, deadline).await?;
    decide(&snap.observed, &lost, recovering.as_deref())
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))
}

/// Runs the recovery; returns what it did.
pub async fn recover(ctx: &ClusterCtx, deadline: Instant) -> Result<Recovery> {
    let (_, recovery) = run_change(ctx, Recover, deadline).await?;
    tracing::info!(
        "{}: etcd recovered as a one-member cluster; the other replicas rejoin",
        recovery.survivor
    );
    Ok(recovery)
}

/// A recovery as a [`Change`]: it reads the cluster as it is (a cluster that lost quorum has members that cannot
/// be asked, so nothing is repaired first) and decides which survivor becomes the one-member cluster.
struct Recover;

impl Change for Recover {
    type Kept = Recovery;

    fn what(&self) -> String {
        "recovery of etcd from a surviving member".into()
    }

    async fn observe(&mut self, ctx: &ClusterCtx, deadline: Instant) -> Result<Snapshot> {
        observe(ctx, &[], deadline).await
    }

    async fn decide(
        &mut self,
        ctx: &ClusterCtx,
        snap: &Snapshot,
        deadline: Instant,
    ) -> Result<(Decision, Recovery)> {
        let recovery = decide_recovery(ctx, snap, deadline).await?;
        tracing::info!(
            cluster = %ctx.spec.name,
            survivor = %recovery.survivor,
            dropped = ?recovery.dropped,
            "recovering etcd from a surviving member"
        );
        let vm = snap.instances.get(&recovery.survivor).ok_or_else(|| {
            OpError::Other(format!(
                "the VM of replica {} vanished during the recovery",
                recovery.survivor
            ))
        })?;
        let internal = vm.internal_ip.as_deref().ok_or_else(|| {
            OpError::Other(format!("replica {} has no internal IP", recovery.survivor))
        })?;
        // The replica's own labels are what its VM carries beyond the provider's: the rebuilt VM carries the same.
        let own = vm
            .labels
            .iter()
            .filter(|(k, _)| ![CLUSTER_LABEL, JOINING_LABEL, BUILD_LABEL].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let me = Replica {
            name: recovery.survivor.clone(),
            zone: zone_of(vm),
            labels: own,
            internal_ip: ip(internal, "the survivor's internal IP")?,
        };
        let steps = if ctx.spec.backup.is_some() {
            ha_domain::recovery::with_backup(&recovery)
        } else {
            recovery.steps.clone()
        };
        Ok((Decision::new(me, steps), recovery))
    }
}

/// The members without a VM whose etcd data disk remains, looked for in every zone of the cluster's region (a
/// member's name is its replica's; its zone went with its VM).
async fn lost_with_disk(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    deadline: Instant,
) -> Result<BTreeSet<String>> {
    let lost: Vec<&str> = snap
        .observed
        .members
        .iter()
        .flatten()
        .filter(|m| !snap.instances.contains_key(&m.name) && !m.name.is_empty())
        .map(|m| m.name.as_str())
        .collect();
    let mut found = BTreeSet::new();
    if lost.is_empty() {
        return Ok(found);
    }
    let zones = ctx
        .compute
        .get_region(&ctx.spec.region, deadline)
        .await?
        .zones;
    for name in lost {
        for zone in &zones {
            if data_disk_exists(ctx, zone, name, deadline).await? {
                found.insert(name.to_string());
                break;
            }
        }
    }
    Ok(found)
}
