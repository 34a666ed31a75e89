//! A replica joins its cluster: the remaining steps `domain::topology::join_steps` returns, run by `ops::execute`.
//! The internal IP is reserved first (etcd's initial cluster must name the new member before it exists); the
//! member is added as a learner before the VM starts and promoted once caught up; the second replica builds the
//! load balancer and moves the static IP onto it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::time::Instant;

use super::backup::backup_first;
use super::change::preflight_removals;
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Progress, Replica, Run, ip, issue_certs};
use super::observe::observe;
use super::orphans::clear_orphans;
use super::shared::{internal_address_description, internal_address_name};
use ha_domain::restore::SnapshotChoice;
use ha_domain::step::labelled_last;
use ha_domain::topology::join_steps;
use ha_etcd::EtcdTarget;
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

pub async fn join(ctx: &ClusterCtx, req: &JoinRequest, deadline: Instant) -> Result<Joined> {
    let spec = &ctx.spec;
    let c = &ctx.compute;
    // A restore that failed before (its etcd never answered) left VMs that would make the member list unreadable:
    // they go first.
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
    // A join that was killed before Terraform saved anything left its objects under a name no state holds.
    clear_orphans(ctx, &req.name, deadline).await?;
    let address = c
        .reserve_internal_address(
            &spec.region,
            &internal_address_name(&req.name),
            spec.master.subnetwork.as_deref(),
            &internal_address_description(&spec.name),
            deadline,
        )
        .await?;
    let internal_ip = ip(&address.ip, "the reserved internal address")?;

    let snap = observe(ctx, &[(req.name.clone(), address.ip.clone())], deadline).await?;
    let steps = join_steps(&snap.observed, &req.name).map_err(|(s, d)| OpError::Refused(s, d))?;
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
        &format!("join of replica {}", req.name),
    ));
    tracing::debug!(replica = %req.name, steps = ?steps, "join steps");

    // Clearing the learners that interrupted joins left is a removal: it gets the removal preflight.
    preflight_removals(ctx, &snap, &steps, &req.name).await?;

    let me = Replica::new(&req.name, &req.zone, &req.labels, internal_ip);
    let mut run = Run::for_replica(ctx, &snap, &me, deadline);
    run.progress.certs = Some(issue_certs(ctx, &me)?);
    run.progress.restore = restore;
    if let Err(e) = run.execute(&steps).await {
        if let Some(id) = run.progress.added_learner {
            remove_failed_learner(ctx, &req.name, id, &run.progress.targets, &e).await;
        }
        return Err(e);
    }
    let Progress {
        member_id,
        certs,
        instance,
        ..
    } = run.into_progress();
    let certs = certs.ok_or_else(|| OpError::Other("the join issued no certificates".into()))?;
    Ok(Joined {
        instance,
        internal_ip,
        member_id,
        certs,
    })
}

/// How long undoing a failed join's learner may take: the join has already failed, so its deadline may be spent.
const LEARNER_CLEANUP: Duration = Duration::from_secs(30);

/// Best effort: the join's error is what the user reads; a learner that stays is removed by the next join
/// (`ClusterStep::RemoveStaleMember`) or by this replica's replacement.
async fn remove_failed_learner(
    ctx: &ClusterCtx,
    name: &str,
    id: u64,
    targets: &[EtcdTarget],
    cause: &OpError,
) {
    tracing::warn!(replica = %name, error = %cause, "join failed after its etcd learner was added; removing the learner");
    match tokio::time::timeout(LEARNER_CLEANUP, ctx.etcd.remove_member(targets, id)).await {
        Ok(Ok(())) => tracing::info!("{name} learner {id:x} removed after the failed join"),
        Ok(Err(e)) => {
            tracing::warn!(replica = %name, error = %e, "could not remove the failed join's learner; the next apply does")
        }
        Err(_) => tracing::warn!(
            replica = %name,
            "removing the failed join's learner took longer than {LEARNER_CLEANUP:?}; the next apply does"
        ),
    }
}
