//! A replica joins its cluster: carry out the remaining steps `domain::topology::join_steps` returns, in order.
//! The internal IP is reserved first (etcd's initial cluster must name the new member before it exists); the
//! member is added as a learner before the VM starts and promoted once caught up; the second replica builds the
//! load balancer and moves the static IP onto it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use tokio::time::Instant;

use super::build::{Identity, create_instance, master_config, vm_labels};
use super::context::{ClusterCtx, OpError, Result};
use super::endpoint::{await_serving, await_static_ip};
use super::observe::{Snapshot, etcd_target, observe};
use super::orphans::clear_orphans;
use super::shared::{
    HEALTH_PORT, internal_address_description, internal_address_name, peer_url, zone_of,
};
use crate::domain::topology::{Step, join_steps};
use crate::etcd::EtcdTarget;
use crate::gce::{
    ExternalIp, ForwardingRuleSpec, HealthCheckSpec, InstanceInfo, InstanceRef, TargetPoolSpec,
};
use crate::master::{self, InitialState};
use crate::pki::{self, ReplicaCertRequest, ReplicaCerts};

pub struct JoinRequest {
    pub name: String,
    pub zone: String,
    pub labels: BTreeMap<String, String>,
}

/// What exists once the join is done (or as far as it got).
pub struct Joined {
    pub instance: Option<InstanceInfo>,
    pub internal_ip: Ipv4Addr,
    pub member_id: Option<u64>,
    pub certs: ReplicaCerts,
}

fn ip(s: &str, what: &str) -> Result<Ipv4Addr> {
    s.parse()
        .map_err(|_| OpError::Other(format!("{what} {s:?} is not an IPv4 address")))
}

pub async fn join(ctx: &ClusterCtx, req: &JoinRequest, deadline: Instant) -> Result<Joined> {
    let spec = &ctx.spec;
    let c = &ctx.compute;
    // A join that was killed before Terraform saved anything left its objects under a name no state holds.
    clear_orphans(ctx, &req.name, deadline).await?;
    let address = c
        .reserve_internal_address(
            &spec.region,
            &internal_address_name(&req.name),
            spec.subnetwork.as_deref(),
            &internal_address_description(&spec.name),
            deadline,
        )
        .await?;
    let internal_ip = ip(&address.ip, "the reserved internal address")?;
    let static_ip = ip(&spec.external_ip, "the cluster's external IP")?;
    let certs = pki::issue_replica_certs(
        &spec.cas,
        &ReplicaCertRequest {
            name: req.name.clone(),
            internal_ip,
            static_ip,
            first_service_ip: master::first_service_ip(&spec.service_range),
            dns_domain: spec.dns_domain.clone(),
        },
    )?;

    let snap = observe(ctx, &[(req.name.clone(), address.ip.clone())], deadline).await?;
    let steps = join_steps(&snap.observed, &req.name).map_err(|(s, d)| OpError::Refused(s, d))?;
    tracing::debug!(replica = %req.name, steps = ?steps, "join steps");
    let mut j = Joined {
        instance: snap.instances.get(&req.name).cloned(),
        internal_ip,
        member_id: snap.member_named(&req.name).map(|m| m.id),
        certs,
    };
    let mut initial_cluster = initial_cluster_of(&snap, &req.name, internal_ip);
    let mut targets = snap.targets.clone();
    // Set once this call adds the learner, cleared once it is promoted: a join that fails in between takes its
    // learner back out, so the half-member does not block the next join's preflight.
    let mut added_learner: Option<u64> = None;

    // Clearing the learners that interrupted joins left is a removal: it gets the removal preflight, with all
    // of them leaving at once (each would otherwise count the others as leftovers).
    let stale: Vec<u64> = steps
        .iter()
        .filter_map(|s| match s {
            Step::RemoveStaleMember { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    if !stale.is_empty() {
        ctx.etcd
            .preflight_removal(&stale, &others(&snap, &req.name), &targets)
            .await?;
    }

    let outcome: Result<()> = async {
        for step in steps {
            tracing::debug!(replica = %req.name, step = ?step, "step");
            match step {
                Step::RemoveStaleMember { name, id } => {
                    tracing::info!(
                        "{} removing learner {name}, left by an interrupted join",
                        req.name
                    );
                    ctx.etcd.remove_member(&targets, id).await?;
                }
                Step::CreateFoundingInstance { with_static_ip } => {
                    let external = if with_static_ip {
                        ExternalIp::Static(spec.external_ip.clone())
                    } else {
                        ExternalIp::Ephemeral
                    };
                    tracing::info!("{} creating the first master, which founds etcd", req.name);
                    let who = identity(req, internal_ip, &j.certs);
                    let cfg = master_config(
                        ctx,
                        &who,
                        vec![(req.name.clone(), internal_ip)],
                        InitialState::New,
                    );
                    j.instance = Some(
                        create_instance(ctx, &who, &req.labels, external, &cfg, true, deadline)
                            .await?,
                    );
                    if with_static_ip {
                        await_static_ip(ctx, deadline).await?;
                    }
                    if let Some(t) = j.instance.as_ref().and_then(|i| etcd_target(ctx, i)) {
                        targets = vec![t];
                        j.member_id = ctx
                            .etcd
                            .member_list(&targets)
                            .await?
                            .iter()
                            .find(|m| m.name == req.name)
                            .map(|m| m.id);
                    }
                }
                Step::AddLearner => {
                    // As Cluster API does before every membership change: the members are the replicas we know,
                    // every member reports the same list, no alarms, no leftover learner.
                    ctx.etcd
                        .preflight(&others(&snap, &req.name), &targets)
                        .await?;
                    let (me, all) = ctx
                        .etcd
                        .add_learner(&targets, &peer_url(&address.ip))
                        .await?;
                    tracing::info!(
                        "{} added to etcd as a learner ({} members now)",
                        req.name,
                        all.len()
                    );
                    j.member_id = Some(me.id);
                    added_learner = Some(me.id);
                    initial_cluster = all
                        .iter()
                        .filter_map(|m| {
                            let peer_ip = m
                                .peer_urls
                                .first()?
                                .trim_start_matches("https://")
                                .split(':')
                                .next()?
                                .parse()
                                .ok()?;
                            let name = if m.id == me.id {
                                req.name.clone()
                            } else {
                                m.name.clone()
                            };
                            Some((name, peer_ip))
                        })
                        .collect();
                }
                Step::CreateJoiningInstance => {
                    tracing::info!(
                        "{} creating its VM to join the existing etcd cluster",
                        req.name
                    );
                    let who = identity(req, internal_ip, &j.certs);
                    let cfg =
                        master_config(ctx, &who, initial_cluster.clone(), InitialState::Existing);
                    j.instance = Some(
                        create_instance(
                            ctx,
                            &who,
                            &req.labels,
                            ExternalIp::Ephemeral,
                            &cfg,
                            true,
                            deadline,
                        )
                        .await?,
                    );
                }
                Step::AwaitCaughtUpAndPromote => {
                    let me = match &j.instance {
                        Some(i) => i.clone(),
                        None => c
                            .get_instance(&req.zone, &req.name, deadline)
                            .await?
                            .ok_or_else(|| {
                                OpError::Other(format!(
                                    "instance {} vanished while joining",
                                    req.name
                                ))
                            })?,
                    };
                    if let Some(t) = etcd_target(ctx, &me)
                        && !targets.contains(&t)
                    {
                        targets.push(t);
                    }
                    let id = j.member_id.ok_or_else(|| {
                        OpError::Other(format!("{} has no etcd member to promote", req.name))
                    })?;
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    ctx.etcd
                        .promote_when_caught_up(&targets, id, remaining)
                        .await?;
                    added_learner = None;
                    tracing::info!(
                        "{} learner caught up, promoted to a voting member",
                        req.name
                    );
                }
                Step::CreateHealthCheck => {
                    let mut hc = HealthCheckSpec::new(ctx.names.health_check.clone());
                    hc.port = HEALTH_PORT;
                    hc.request_path = "/healthz".into();
                    c.ensure_http_health_check(&hc, deadline).await?;
                }
                Step::CreatePool { instances } => {
                    let refs = instances
                        .iter()
                        .map(|n| InstanceRef {
                            zone: snap
                                .instances
                                .get(n)
                                .map(zone_of)
                                .unwrap_or_else(|| req.zone.clone()),
                            name: n.clone(),
                        })
                        .collect();
                    let pool = TargetPoolSpec {
                        name: ctx.names.target_pool.clone(),
                        region: spec.region.clone(),
                        health_check: Some(ctx.names.health_check.clone()),
                        instances: refs,
                        description: Some(format!("API servers of {}", spec.name)),
                    };
                    tracing::info!("creating the load balancer (health check, target pool)");
                    c.ensure_target_pool(&pool, deadline).await?;
                }
                Step::AddToPool => {
                    // Join the pool only once this replica's API server is healthy, so the LB never sends traffic to it early.
                    if let Some(ext) = j.instance.as_ref().and_then(|i| i.external_ip.clone()) {
                        await_serving(
                            &spec.cas.cluster_ca.cert_pem,
                            IpAddr::V4(ip(&ext, "external IP")?),
                            IpAddr::V4(internal_ip),
                            spec.api_port,
                            deadline,
                        )
                        .await?;
                    }
                    let me = InstanceRef {
                        zone: req.zone.clone(),
                        name: req.name.clone(),
                    };
                    tracing::info!("{} API server healthy, joining the load balancer", req.name);
                    c.add_target_pool_instance(&spec.region, &ctx.names.target_pool, &me, deadline)
                        .await?;
                }
                Step::DetachStaticIp { from } => {
                    let zone = snap
                        .instances
                        .get(&from)
                        .map(zone_of)
                        .unwrap_or_else(|| spec.zone.clone());
                    tracing::info!("moving the static IP off {from}, which gets an ephemeral IP");
                    c.swap_access_config(&zone, &from, None, deadline).await?;
                }
                Step::CreateForwardingRule => {
                    let rule = ForwardingRuleSpec {
                        name: ctx.names.forwarding_rule.clone(),
                        region: spec.region.clone(),
                        ip_address: spec.external_ip.clone(),
                        port_range: format!("{0}-{0}", spec.api_port),
                        target_pool: ctx.names.target_pool.clone(),
                        description: Some(format!("API endpoint of {}", spec.name)),
                    };
                    c.ensure_forwarding_rule(&rule, deadline).await?;
                    tracing::info!(
                        "forwarding rule created on the static IP, waiting for traffic to flow"
                    );
                }
                Step::AwaitEndpoint => {
                    await_static_ip(ctx, deadline).await?;
                }
                other => {
                    return Err(OpError::Other(format!(
                        "a join cannot take the step {other:?}; this is a bug"
                    )));
                }
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = outcome {
        if let Some(id) = added_learner {
            remove_failed_learner(ctx, &req.name, id, &targets, &e).await;
        }
        return Err(e);
    }
    // Done: the VM stops looking like a dead join's leftover. Last, so that a join killed anywhere before this
    // point is recognised by the next one (`ops::orphans`).
    j.instance = Some(
        c.set_labels(&req.zone, &req.name, &vm_labels(ctx, &req.labels), deadline)
            .await?,
    );
    Ok(j)
}

fn identity<'a>(
    req: &'a JoinRequest,
    internal_ip: Ipv4Addr,
    certs: &'a ReplicaCerts,
) -> Identity<'a> {
    Identity {
        name: &req.name,
        zone: &req.zone,
        internal_ip,
        certs,
    }
}

/// How long undoing a failed join's learner may take: the join has already failed, so its deadline may be spent.
const LEARNER_CLEANUP: Duration = Duration::from_secs(30);

/// Best effort: the join's error is what the user reads; a learner that stays is removed by the next join
/// (`Step::RemoveStaleMember`) or by this replica's replacement.
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

/// The replicas other than `me` that exist now: who etcd's members must be.
fn others(snap: &Snapshot, me: &str) -> Vec<String> {
    snap.instances
        .keys()
        .filter(|n| n.as_str() != me)
        .cloned()
        .collect()
}

/// The initial cluster when the learner already exists (a resumed join): every member, by name and peer IP.
fn initial_cluster_of(snap: &Snapshot, me: &str, my_ip: Ipv4Addr) -> Vec<(String, Ipv4Addr)> {
    let Some(views) = &snap.observed.members else {
        return vec![(me.to_string(), my_ip)];
    };
    snap.members
        .iter()
        .filter_map(|m| {
            let name = views.iter().find(|v| v.id == m.id)?.name.clone();
            let ip = m
                .peer_urls
                .first()?
                .trim_start_matches("https://")
                .split(':')
                .next()?
                .parse()
                .ok()?;
            Some((name, ip))
        })
        .collect()
}
