//! A replica leaves its cluster: out of the pool, leadership handed away if it leads, out of etcd, then the VM
//! goes; when one replica remains the load balancer goes and the static IP returns to the survivor. Each step is
//! one of `domain::topology::leave_steps`, so an interrupted delete resumes. Removing the member waits for etcd's
//! removal preflight, as adding one does.

use tokio::time::Instant;

use super::build::data_disk_name;
use super::context::{ClusterCtx, OpError, Result};
use super::endpoint::await_static_ip;
use super::observe::{Snapshot, etcd_target, observe};
use super::repair::restore_reachability;
use super::shared::{internal_address_name, zone_of};
use crate::domain::protection::check_leave;
use crate::domain::topology::{Step, leave_steps};
use crate::gce::InstanceRef;

/// If `name`'s member leads etcd, hands leadership to another voter first, so its going away costs no election.
/// Best effort on the asking side: a member that does not answer is not leading anyone.
pub async fn hand_leadership_away(ctx: &ClusterCtx, snap: &Snapshot, name: &str) -> Result<()> {
    let Some(me) = snap.member_named(name) else {
        return Ok(());
    };
    let Some(target) = snap.instances.get(name).and_then(|i| etcd_target(ctx, i)) else {
        return Ok(());
    };
    let Ok(status) = ctx.etcd.status(&target).await else {
        return Ok(());
    };
    if status.leader_id == me.id
        && let Some(next) = snap.members.iter().find(|m| m.id != me.id && !m.is_learner)
    {
        tracing::info!("{name} leads etcd, handing leadership to {}", next.name);
        ctx.etcd.move_leader(&snap.targets, next.id).await?;
    }
    Ok(())
}

pub async fn leave(ctx: &ClusterCtx, name: &str, zone: &str, deadline: Instant) -> Result<()> {
    let spec = &ctx.spec;
    let c = &ctx.compute;
    let mut snap = observe(ctx, &[], deadline).await?;
    if restore_reachability(ctx, &snap, deadline).await? {
        snap = observe(ctx, &[], deadline).await?;
    }
    let steps = leave_steps(&snap.observed, name).map_err(|(s, d)| OpError::Refused(s, d))?;
    check_leave(&snap.observed, name, spec.deletion_protection)
        .map_err(|(s, d)| OpError::Refused(s, d))?;
    tracing::debug!(replica = %name, steps = ?steps, "leave steps");
    let me_target = snap.instances.get(name).and_then(|i| etcd_target(ctx, i));
    let survivors: Vec<_> = snap
        .targets
        .iter()
        .filter(|t| Some(*t) != me_target.as_ref())
        .cloned()
        .collect();

    // The removal gets the same preflight as an addition, before anything changes (out of the pool, leadership):
    // the members that stay are the replicas that stay, agree on the list, and carry no alarm. The leaving
    // member is exempt: replacing a vanished or crashed VM removes exactly such a dead member.
    let removing: Vec<u64> = steps
        .iter()
        .filter_map(|s| match s {
            Step::RemoveMember { id } => Some(*id),
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

    for step in steps {
        tracing::debug!(replica = %name, step = ?step, "step");
        match step {
            Step::RemoveFromPool => {
                let me = InstanceRef {
                    zone: zone.to_string(),
                    name: name.to_string(),
                };
                tracing::info!("{name} leaving the load balancer");
                c.remove_target_pool_instance(&spec.region, &ctx.names.target_pool, &me, deadline)
                    .await?;
                // Its API server stops answering once its member goes: let the pool change reach every
                // forwarder and requests in flight finish first.
                tokio::time::sleep(ctx.drain_delay).await;
            }
            Step::MoveLeadership => hand_leadership_away(ctx, &snap, name).await?,
            Step::RemoveMember { id } => {
                let via = if survivors.is_empty() {
                    snap.targets.clone()
                } else {
                    survivors.clone()
                };
                ctx.etcd.remove_member(&via, id).await?;
                tracing::info!("{name} removed from etcd");
            }
            Step::DeleteInstance => {
                tracing::info!("{name} deleting its VM");
                c.delete_instance(zone, name, deadline).await?
            }
            Step::DeleteForwardingRule => {
                c.delete_forwarding_rule(&spec.region, &ctx.names.forwarding_rule, deadline)
                    .await?
            }
            Step::AttachStaticIp { to } => {
                let z = snap
                    .instances
                    .get(&to)
                    .map(zone_of)
                    .unwrap_or_else(|| spec.zone.clone());
                tracing::info!("one replica left, giving the static IP back to {to}");
                c.swap_access_config(&z, &to, Some(&spec.external_ip), deadline)
                    .await?;
            }
            Step::AwaitEndpoint => {
                await_static_ip(ctx, deadline).await?;
            }
            Step::DeletePool => {
                c.delete_target_pool(&spec.region, &ctx.names.target_pool, deadline)
                    .await?
            }
            Step::DeleteHealthCheck => {
                c.delete_http_health_check(&ctx.names.health_check, deadline)
                    .await?
            }
            other => {
                return Err(OpError::Other(format!(
                    "a leave cannot take the step {other:?}; this is a bug"
                )));
            }
        }
    }
    // The VM is gone, so GCE lets its data disk go too (a replica leaving takes its etcd data with it).
    if c.get_disk(zone, &data_disk_name(name), deadline)
        .await?
        .is_some()
    {
        c.delete_disk(zone, &data_disk_name(name), deadline).await?;
    }
    c.delete_address(&spec.region, &internal_address_name(name), deadline)
        .await?;
    Ok(())
}
