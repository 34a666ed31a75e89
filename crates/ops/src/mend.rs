//! `mend_replica` puts one replica's VM back in place (`domain::mend`): metadata edited by hand written back, a
//! VM that stopped or crashed started again and its etcd member awaited, its labels set. What an update that rolls
//! nothing does.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::change::{Change, Decision, run_change};
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::Replica;
use super::observe::{Snapshot, observe};
use ha_domain::mend::mend_steps;
use ha_gce::InstanceInfo;

/// The replica an in-place update mends (`mend_replica`).
pub struct MendRequest {
    pub name: String,
    pub zone: String,
    /// The replica's own labels (the provider adds the cluster's and its own).
    pub labels: BTreeMap<String, String>,
    /// The digest of each metadata item the provider wrote on the VM, as the replica's state keeps them
    /// (`domain::metadata`); none for a replica that keeps none, whose metadata is then left as it is.
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
    let (progress, ()) = run_change(ctx, Mend { req }, deadline).await?;
    progress.instance.ok_or_else(|| {
        OpError::Other(format!(
            "the VM of replica {} vanished while it was mended",
            req.name
        ))
    })
}

/// A mend as a [`Change`]: it reads the cluster as it is (it moves no IP, so it needs no member it cannot ask) and
/// decides from what the VM carries against what the provider wrote.
struct Mend<'a> {
    req: &'a MendRequest,
}

impl Change for Mend<'_> {
    type Kept = ();

    fn what(&self) -> String {
        format!("repair of replica {}", self.req.name)
    }

    async fn observe(&mut self, ctx: &ClusterCtx, deadline: Instant) -> Result<Snapshot> {
        observe(ctx, &[], deadline).await
    }

    async fn decide(
        &mut self,
        ctx: &ClusterCtx,
        snap: &Snapshot,
        _deadline: Instant,
    ) -> Result<(Decision, ())> {
        let req = self.req;
        let vm = snap.instances.get(&req.name);
        let carries = vm.map(|v| v.metadata.as_slice()).unwrap_or_default();
        // The item the settings make again (`domain::metadata::REMADE_ITEMS`), as `ha_master::metadata_items`
        // writes it.
        let remade = BTreeMap::from([("cluster-name".to_string(), ctx.spec.name.clone())]);
        let steps = mend_steps(
            &snap.observed,
            &req.name,
            req.metadata.as_ref(),
            carries,
            &remade,
        )
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
        // The mend's steps never use the replica's internal IP (they neither create nor move a VM); the VM's own
        // is given for the run's bookkeeping, and every GCE VM has one.
        let internal_ip = vm
            .and_then(|v| v.internal_ip.as_deref())
            .and_then(|ip| ip.parse().ok())
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        let me = Replica::new(&req.name, &req.zone, &req.labels, internal_ip);
        Ok((Decision::new(me, steps), ()))
    }
}
