//! A replica leaves its cluster: out of the pool, leadership handed away if it leads, out of etcd, then the VM,
//! its data disk and its internal IP go; when one replica remains the load balancer goes and the static IP
//! returns to the survivor. The steps are `domain::topology::leave_steps`, run by `ops::execute`, so an
//! interrupted delete resumes. Removing the member waits for etcd's removal preflight, as adding one does.

use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::backup::backup_first;
use super::change::{observe_reachable, preflight_removals};
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Replica, Run};
use ha_domain::protection::check_leave;
use ha_domain::topology::leave_steps;

pub async fn leave(ctx: &ClusterCtx, name: &str, zone: &str, deadline: Instant) -> Result<()> {
    let snap = observe_reachable(ctx, deadline).await?;
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

    // The removal gets the same preflight as an addition, before anything changes (out of the pool, leadership).
    preflight_removals(ctx, &snap, &steps, name).await?;

    // A leave creates and labels nothing, so the replica's labels and addresses are never asked for.
    let me = Replica::new(name, zone, &Default::default(), Ipv4Addr::UNSPECIFIED);
    Run::for_replica(ctx, &snap, &me, deadline)
        .execute(&steps)
        .await
}
