//! A replica joins its cluster: the remaining steps `domain::topology::join_steps` returns, run by `ops::execute`.
//! The internal IP is reserved first (etcd's initial cluster must name the new member before it exists); the
//! member is added as a learner before the VM starts and promoted once caught up; the second replica builds the
//! load balancer and moves the static IP onto it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::backup::backup_first;
use super::change::{Change, Decision, run_change};
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Progress, Replica, issue_certs};
use super::observe::{Snapshot, observe};
use super::orphans::prepare_join;
use ha_domain::restore::SnapshotChoice;
use ha_domain::step::labelled_last;
use ha_domain::topology::join_steps;
use ha_gce::InstanceInfo;
use ha_pki::ReplicaCerts;

pub struct JoinRequest {
    pub name: String,
    pub zone: String,
    pub labels: BTreeMap<String, String>,
    /// The cluster restores etcd from this snapshot in this apply: a join that finds no member restores it
    /// instead of founding an empty etcd (`domain::restore`).
    pub restore: Option<SnapshotChoice>,
    /// `restore` comes from the cluster's `restore` block at the replica's create, not from a raised generation:
    /// the join restores only where the cluster shows no data of its own (a new cluster started from another's
    /// snapshot, `domain::start_empty`'s evidence); where it had data, the founding rules stand and a restore needs
    /// its generation raised.
    pub restore_at_create: bool,
    /// The replica's state records an etcd member: a data disk found without its VM then held that member's data,
    /// and is never taken for a failed restore's leftover.
    pub member_recorded: bool,
}

/// What exists once the join is done (or as far as it got).
pub struct Joined {
    pub instance: Option<InstanceInfo>,
    pub internal_ip: Ipv4Addr,
    pub member_id: Option<u64>,
    pub certs: ReplicaCerts,
}

/// Joins `req`'s replica to its cluster; the caller holds the cluster's lock.
pub async fn join(ctx: &ClusterCtx, req: &JoinRequest, deadline: Instant) -> Result<Joined> {
    let change = Join {
        req,
        internal_ip: Ipv4Addr::UNSPECIFIED,
    };
    let (progress, internal_ip) = run_change(ctx, change, deadline).await?;
    let Progress {
        member_id,
        certs,
        instance,
        ..
    } = progress;
    let certs = certs.ok_or_else(|| OpError::Other("the join issued no certificates".into()))?;
    Ok(Joined {
        instance,
        internal_ip,
        member_id,
        certs,
    })
}

/// A join as a [`Change`]: what it clears and reserves before it reads the cluster, and what it decides.
struct Join<'a> {
    req: &'a JoinRequest,
    /// The replica's reserved internal IP, once `observe` has reserved it.
    internal_ip: Ipv4Addr,
}

impl Change for Join<'_> {
    /// The replica's internal IP.
    type Kept = Ipv4Addr;

    fn what(&self) -> String {
        format!("join of replica {}", self.req.name)
    }

    /// Clears what failed attempts left, reserves the replica's internal IP, and reads the cluster with the new
    /// member's address among etcd's: the IP comes first because etcd's initial cluster must name the new member
    /// before it exists.
    async fn observe(&mut self, ctx: &ClusterCtx, deadline: Instant) -> Result<Snapshot> {
        let req = self.req;
        // A restore that failed before (its etcd never answered) left VMs that would make the member list
        // unreadable: they go first.
        if req.restore.is_some() {
            super::restore::clear_failed_attempts(
                ctx,
                &req.name,
                &req.zone,
                req.member_recorded,
                deadline,
            )
            .await?;
        }
        // A join that was killed before Terraform saved anything left its objects under a name no state holds: they
        // go, then the replica's internal IP is reserved (steps both).
        self.internal_ip = prepare_join(ctx, &req.name, deadline).await?;
        observe(
            ctx,
            &[(req.name.clone(), self.internal_ip.to_string())],
            deadline,
        )
        .await
    }

    async fn decide(
        &mut self,
        ctx: &ClusterCtx,
        snap: &Snapshot,
        _deadline: Instant,
    ) -> Result<(Decision, Ipv4Addr)> {
        let req = self.req;
        let steps =
            join_steps(&snap.observed, &req.name).map_err(|(s, d)| OpError::Refused(s, d))?;
        let (steps, restoring) = match &req.restore {
            Some(_) => ha_domain::restore::join_steps(steps),
            None => (steps, false),
        };
        let restore = match (&req.restore, restoring) {
            (Some(choice), true) => Some(super::restore::source(ctx, choice).await?),
            _ => None,
        };
        if !restoring || req.restore_at_create {
            super::restore::check_founding(ctx, &snap.observed).await?;
        }
        let steps = labelled_last(backup_first(
            ctx,
            steps,
            &snap.observed,
            &req.name,
            &self.what(),
        ));
        let me = Replica::new(&req.name, &req.zone, &req.labels, self.internal_ip);
        let certs = issue_certs(ctx, &me)?;
        Ok((
            Decision {
                certs: Some(certs),
                restore,
                ..Decision::new(me, steps)
            },
            self.internal_ip,
        ))
    }
}
