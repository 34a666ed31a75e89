//! A replica leaves its cluster: out of the pool, leadership handed away if it leads, out of etcd, then the VM,
//! its data disk and its internal IP go; when one replica remains the load balancer goes and the static IP
//! returns to the survivor. The steps are `domain::topology::leave_steps`, run by `ops::execute`, so an
//! interrupted delete resumes. Removing the member waits for etcd's removal preflight, as adding one does.

use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::backup::backup_first;
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Replica, Run};
use super::observe::observe;
use super::repair::restore_reachability;
use ha_domain::protection::check_leave;
use ha_domain::step::{ReplicaStep, Step};
use ha_domain::topology::leave_steps;

pub async fn leave(ctx: &ClusterCtx, name: &str, zone: &str, deadline: Instant) -> Result<()> {
    let mut snap = observe(ctx, &[], deadline).await?;
    if restore_reachability(ctx, &snap, deadline).await? {
        snap = observe(ctx, &[], deadline).await?;
    }
    let steps = leave_steps(&snap.observed, name).map_err(|(s, d)| OpError::Refused(s, d))?;
    let steps = backup_first(
        ctx,
        steps,
        &snap.observed,
        name,
        &format!("removal of replica {name}"),
    );
    check_leave(&snap.observed, name, ctx.spec.deletion_protection)
        .map_err(|(s, d)| OpError::Refused(s, d))?;
    tracing::debug!(replica = %name, steps = ?steps, "leave steps");

    // The removal gets the same preflight as an addition, before anything changes (out of the pool, leadership):
    // the members that stay are the replicas that stay, agree on the list, and carry no alarm. The leaving
    // member is exempt: replacing a vanished or crashed VM removes exactly such a dead member.
    let removing: Vec<u64> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Replica(ReplicaStep::RemoveMember { id }) => Some(*id),
            _ => None,
        })
        .collect();
    if !removing.is_empty() {
        let staying: Vec<String> = snap
            .instances
            .keys()
            .filter(|n| n.as_str() != name)
            .cloned()
            .collect();
        ctx.etcd
            .preflight_removal(&removing, &staying, &snap.targets)
            .await?;
    }

    let me = Replica {
        name: name.to_string(),
        zone: zone.to_string(),
        labels: Default::default(),
        // A leave creates nothing, so the replica's addresses are never asked for.
        internal_ip: Ipv4Addr::UNSPECIFIED,
    };
    Run::for_replica(ctx, &snap, &me, deadline)
        .execute(&steps)
        .await
}
