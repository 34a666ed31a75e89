//! A replica leaves its cluster: out of the pool, leadership handed away if it leads, out of etcd, then the VM,
//! its data disk and its internal IP go; when one replica remains the load balancer goes and the static IP
//! returns to the survivor. The steps are `domain::topology::leave_steps`, run by `ops::execute`, so an
//! interrupted delete resumes. Removing the member waits for etcd's removal preflight, as adding one does.

use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::backup::backup_first;
use super::change::{Change, Decision, run_change};
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::Replica;
use super::observe::Snapshot;
use ha_domain::protection::check_leave;
use ha_domain::topology::leave_steps;

/// Takes replica `name` in `zone` out of its cluster; the caller holds the cluster's lock.
pub async fn leave(ctx: &ClusterCtx, name: &str, zone: &str, deadline: Instant) -> Result<()> {
    run_change(ctx, Leave { name, zone }, deadline).await?;
    Ok(())
}

/// A leave as a [`Change`]: it reads the cluster as every change does, and decides its steps and whether deletion
/// protection lets it remove the last member.
struct Leave<'a> {
    name: &'a str,
    zone: &'a str,
}

impl Change for Leave<'_> {
    type Kept = ();

    fn what(&self) -> String {
        format!("removal of replica {}", self.name)
    }

    async fn decide(
        &mut self,
        ctx: &ClusterCtx,
        snap: &Snapshot,
        _deadline: Instant,
    ) -> Result<(Decision, ())> {
        let name = self.name;
        let steps = leave_steps(&snap.observed, name).map_err(|(s, d)| OpError::Refused(s, d))?;
        let steps = backup_first(ctx, steps, &snap.observed, name, &self.what());
        check_leave(&snap.observed, name, ctx.spec.deletion_protection)
            .map_err(|(s, d)| OpError::Refused(s, d))?;
        // A leave creates and labels nothing, so the replica's labels and addresses are never asked for.
        let me = Replica::new(name, self.zone, &Default::default(), Ipv4Addr::UNSPECIFIED);
        Ok((Decision::new(me, steps), ()))
    }
}
