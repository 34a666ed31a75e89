//! A replica rolls onto the cluster's current settings: carry out the steps `domain::roll::roll_steps` returns
//! from an observed snapshot, in order. The caller holds the cluster's lock, so replicas roll one at a time
//! (siblings in one apply, and replicas of other states). No member is added or removed: a machine type change
//! stops and starts the VM on its own disks; anything else rebuilds the VM on its etcd data disk and internal IP,
//! and etcd restarts as the same member with its data.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use tokio::time::Instant;

use super::build::{Identity, build_of, create_instance, master_config, vm_labels};
use super::context::{ClusterCtx, OpError, Result};
use super::endpoint::{await_serving, await_static_ip};
use super::leave::hand_leadership_away;
use super::observe::{Snapshot, etcd_target, observe};
use super::repair::restore_reachability;
use crate::domain::roll::{BUILD_LABEL, Build, RollStep, VmFacts, roll_steps};
use crate::etcd::EtcdTarget;
use crate::gce::{ExternalIp, InstanceInfo, InstanceRef};
use crate::master::{self, DATA_DEVICE, InitialState};
use crate::pki::{self, ReplicaCertRequest, ReplicaCerts};

/// Consecutive healthy checks (member healthy, API serving) before the next replica may roll, as kops validates
/// a cluster several times after each master: a member that flaps right after its restart is caught here.
const SOAK_CHECKS: u32 = 3;
const SOAK_INTERVAL: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(250);

pub struct RollRequest {
    pub name: String,
    pub zone: String,
    pub labels: BTreeMap<String, String>,
    /// What the VM was built from according to state: the build of a VM made before builds were labelled.
    pub prior: Build,
}

/// The replica as the roll left it.
pub struct Rolled {
    pub instance: InstanceInfo,
    /// Issued anew (same CAs) when the VM was rebuilt: the settings they name may have changed. A machine type
    /// change keeps the VM and its certificates.
    pub certs: Option<ReplicaCerts>,
    pub member_id: u64,
}

fn facts(vm: &InstanceInfo, prior: &Build) -> VmFacts {
    VmFacts {
        status: vm.status.clone(),
        machine_type: vm.machine_type.clone(),
        build: Some(
            vm.labels
                .get(BUILD_LABEL)
                .cloned()
                .unwrap_or_else(|| prior.digest()),
        ),
        has_data_disk: vm.attached_disks.contains_key(DATA_DEVICE),
    }
}

pub async fn roll(ctx: &ClusterCtx, r: &RollRequest, deadline: Instant) -> Result<Rolled> {
    let spec = &ctx.spec;
    let c = &ctx.compute;
    let mut snap = observe(ctx, &[], deadline).await?;
    if restore_reachability(ctx, &snap, deadline).await? {
        snap = observe(ctx, &[], deadline).await?;
    }
    let want = build_of(spec);
    // A VM whose labels were edited by hand is not found by label; it is still this replica.
    let vm = match snap.instances.get(&r.name) {
        Some(i) => Some(i.clone()),
        None => c.get_instance(&r.zone, &r.name, deadline).await?,
    };
    let steps = roll_steps(
        &snap.observed,
        &r.name,
        vm.as_ref().map(|v| facts(v, &r.prior)).as_ref(),
        &want,
    )
    .map_err(|(s, d)| OpError::NotYet(s, d))?;
    tracing::debug!(replica = %r.name, steps = ?steps, "roll steps");
    let member_id = snap
        .member_named(&r.name)
        .map(|m| m.id)
        .ok_or_else(|| OpError::Other(format!("replica {} has no etcd member", r.name)))?;
    let me = InstanceRef {
        zone: r.zone.clone(),
        name: r.name.clone(),
    };
    let alone = snap.instances.keys().all(|n| *n == r.name);
    let mut certs = None;
    let mut vm = vm;
    let internal_ip = internal_ip_of(vm.as_ref(), &snap, member_id)?;
    for step in steps {
        tracing::debug!(replica = %r.name, step = ?step, "roll step");
        match step {
            RollStep::LeavePool => {
                tracing::info!("{}: leaving the load balancer to roll", r.name);
                c.remove_target_pool_instance(&spec.region, &ctx.names.target_pool, &me, deadline)
                    .await?;
                // The pool change takes a moment to reach every forwarder, and requests in flight must finish.
                tokio::time::sleep(ctx.drain_delay).await;
            }
            RollStep::MoveLeadership => hand_leadership_away(ctx, &snap, &r.name).await?,
            RollStep::StopVm => {
                tracing::info!("{}: stopping its VM to change its machine type", r.name);
                c.stop_instance(&r.zone, &r.name, deadline).await?;
            }
            RollStep::SetMachineType => {
                tracing::info!("{}: machine type {}", r.name, want.machine_type);
                c.set_machine_type(&r.zone, &r.name, &want.machine_type, deadline)
                    .await?;
            }
            RollStep::StartVm => {
                tracing::info!("{}: starting its VM again", r.name);
                vm = Some(c.start_instance(&r.zone, &r.name, deadline).await?);
            }
            RollStep::DeleteVm => {
                tracing::info!(
                    "{}: deleting its VM to rebuild it on its etcd data disk",
                    r.name
                );
                c.delete_instance(&r.zone, &r.name, deadline).await?;
                vm = None;
            }
            RollStep::CreateVm => {
                let issued = reissue(ctx, &r.name, internal_ip)?;
                let who = Identity {
                    name: &r.name,
                    zone: &r.zone,
                    internal_ip,
                    certs: &issued,
                };
                let cfg = master_config(
                    ctx,
                    &who,
                    initial_cluster(&snap, &r.name, internal_ip),
                    InitialState::Existing,
                );
                let external = if alone {
                    ExternalIp::Static(spec.external_ip.clone())
                } else {
                    ExternalIp::Ephemeral
                };
                tracing::info!(
                    "{}: creating its VM again with the new settings on its data disk",
                    r.name
                );
                vm = Some(
                    create_instance(ctx, &who, &r.labels, external, &cfg, false, deadline).await?,
                );
                certs = Some(issued);
            }
            RollStep::AwaitMember => {
                let target = target_of(ctx, &r.zone, &r.name, deadline).await?;
                let mut endpoints = snap.targets.clone();
                endpoints.retain(|t| t.server_name != r.name);
                endpoints.push(target);
                let remaining = deadline.saturating_duration_since(Instant::now());
                ctx.etcd
                    .await_caught_up(&endpoints, member_id, remaining)
                    .await?;
                tracing::info!("{}: etcd member healthy and caught up", r.name);
            }
            RollStep::AwaitApi => {
                let now = refreshed(ctx, &r.zone, &r.name, deadline).await?;
                let ext = now.external_ip.clone().ok_or_else(|| {
                    OpError::Other(format!(
                        "replica {} has no external IP after its roll",
                        r.name
                    ))
                })?;
                await_serving(
                    &spec.cas.cluster_ca.cert_pem,
                    IpAddr::V4(ip(&ext)?),
                    IpAddr::V4(internal_ip),
                    spec.api_port,
                    deadline,
                )
                .await?;
                vm = Some(now);
            }
            RollStep::JoinPool => {
                tracing::info!("{}: API server healthy, back in the load balancer", r.name);
                c.add_target_pool_instance(&spec.region, &ctx.names.target_pool, &me, deadline)
                    .await?;
            }
            RollStep::AwaitEndpoint => {
                await_static_ip(ctx, deadline).await?;
            }
            RollStep::Soak => soak(ctx, &r.zone, &r.name, member_id, internal_ip, deadline).await?,
        }
    }
    let mut now = match vm {
        Some(v) => v,
        None => refreshed(ctx, &r.zone, &r.name, deadline).await?,
    };
    // A VM made before builds were labelled, or resized in place: it carries its build from now on.
    if now.labels.get(BUILD_LABEL) != Some(&want.digest()) {
        now = c
            .set_labels(&r.zone, &r.name, &vm_labels(ctx, &r.labels), deadline)
            .await?;
    }
    Ok(Rolled {
        instance: now,
        certs,
        member_id,
    })
}

fn ip(s: &str) -> Result<Ipv4Addr> {
    s.parse()
        .map_err(|_| OpError::Other(format!("{s:?} is not an IPv4 address")))
}

/// The replica's internal IP: its VM's, or (between delete and create) its member's peer URL.
fn internal_ip_of(vm: Option<&InstanceInfo>, snap: &Snapshot, member_id: u64) -> Result<Ipv4Addr> {
    let from_vm = vm.and_then(|v| v.internal_ip.clone());
    let from_member = || {
        snap.members
            .iter()
            .find(|m| m.id == member_id)
            .and_then(|m| m.peer_ip().map(|i| i.to_string()))
    };
    let s = from_vm.or_else(from_member).ok_or_else(|| {
        OpError::Other(
            "the replica's internal IP is known neither from its VM nor from its etcd member"
                .into(),
        )
    })?;
    ip(&s)
}

/// Every member by name and peer IP, for the rebuilt member's `--initial-cluster` (etcd ignores it when it
/// starts on an existing data directory, but it must still name every member consistently).
fn initial_cluster(snap: &Snapshot, me: &str, my_ip: Ipv4Addr) -> Vec<(String, Ipv4Addr)> {
    let views = snap.observed.members.clone().unwrap_or_default();
    let mut out: Vec<(String, Ipv4Addr)> = snap
        .members
        .iter()
        .filter_map(|m| {
            let name = views.iter().find(|v| v.id == m.id)?.name.clone();
            Some((name, m.peer_ip()?))
        })
        .filter(|(n, _)| n != me)
        .collect();
    out.push((me.to_string(), my_ip));
    out
}

fn reissue(ctx: &ClusterCtx, name: &str, internal_ip: Ipv4Addr) -> Result<ReplicaCerts> {
    let spec = &ctx.spec;
    Ok(pki::issue_replica_certs(
        &spec.cas,
        &ReplicaCertRequest {
            name: name.to_string(),
            internal_ip,
            static_ip: ip(&spec.external_ip)?,
            first_service_ip: master::first_service_ip(&spec.service_range),
            dns_domain: spec.dns_domain.clone(),
        },
    )?)
}

async fn refreshed(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<InstanceInfo> {
    ctx.compute
        .get_instance(zone, name, deadline)
        .await?
        .ok_or_else(|| OpError::Other(format!("the VM of replica {name} vanished during its roll")))
}

/// Where to reach the replica's etcd once its VM runs (a restarted VM may have a new ephemeral IP).
async fn target_of(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<EtcdTarget> {
    loop {
        let vm = refreshed(ctx, zone, name, deadline).await?;
        if vm.status == "RUNNING"
            && let Some(t) = etcd_target(ctx, &vm)
        {
            return Ok(t);
        }
        if Instant::now() >= deadline {
            return Err(OpError::Other(format!(
                "the VM of replica {name} is {} after its roll; look at its serial console, then apply again",
                vm.status
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// SOAK_CHECKS consecutive rounds in which the member is healthy and the replica's API serves; a failure starts
/// the count again, until the deadline.
async fn soak(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    member_id: u64,
    internal_ip: Ipv4Addr,
    deadline: Instant,
) -> Result<()> {
    let spec = &ctx.spec;
    let mut good = 0;
    let mut last = String::new();
    while good < SOAK_CHECKS {
        if Instant::now() >= deadline {
            return Err(OpError::Other(format!(
                "replica {name} did not stay healthy after its roll (last: {last}); the next apply checks it again"
            )));
        }
        tokio::time::sleep(SOAK_INTERVAL).await;
        let vm = refreshed(ctx, zone, name, deadline).await?;
        let member_ok = match etcd_target(ctx, &vm) {
            Some(t) => ctx
                .etcd
                .health(std::slice::from_ref(&t))
                .await
                .first()
                .is_some_and(|h| h.health.is_healthy() && h.health.member_id() == Some(member_id)),
            None => false,
        };
        let api_ok = match vm.external_ip.as_deref().map(ip) {
            Some(Ok(ext)) => {
                let quick = Instant::now() + Duration::from_secs(5);
                await_serving(
                    &spec.cas.cluster_ca.cert_pem,
                    IpAddr::V4(ext),
                    IpAddr::V4(internal_ip),
                    spec.api_port,
                    quick.min(deadline),
                )
                .await
                .is_ok()
            }
            _ => false,
        };
        if member_ok && api_ok {
            good += 1;
        } else {
            good = 0;
            last = format!("etcd member healthy: {member_ok}, API serving: {api_ok}");
        }
    }
    Ok(())
}
