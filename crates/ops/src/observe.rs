//! One read of a cluster's world: its replica VMs (by label, across the region's zones), the load balancer, who
//! holds the static IP, and etcd's member list and health. Every decision in `ha_domain::topology` is made
//! from this snapshot, so plan and apply see the world the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::Result;
use super::shared::{CLUSTER_LABEL, ETCD_CLIENT_PORT};
use ha_domain::topology::{IpHolder, MemberView, Observed};
use ha_etcd::{EndpointHealth, EtcdTarget, Member};
/// A replica's VM as observed (the resources read its fields at refresh without depending on ha-gce).
pub use ha_gce::InstanceInfo;
use ha_gce::InstanceRef;

pub struct Snapshot {
    pub observed: Observed,
    /// Replica VMs by name.
    pub instances: BTreeMap<String, InstanceInfo>,
    /// etcd members as etcd reports them (empty when unreachable).
    pub members: Vec<Member>,
    /// Where to reach each running replica's etcd.
    pub targets: Vec<EtcdTarget>,
    /// What each target said about itself, in the order of `targets` (empty when the member list was not read).
    pub health: Vec<EndpointHealth>,
    /// The target pool's members with their zones (empty without a pool): a member that is not a replica VM is
    /// removed by zone and name.
    pub pool_members: Vec<InstanceRef>,
}

impl Snapshot {
    /// Replica VMs whose status is RUNNING: the ones that can serve.
    pub fn running(&self) -> BTreeSet<String> {
        self.instances
            .values()
            .filter(|i| i.status == "RUNNING")
            .map(|i| i.name.clone())
            .collect()
    }

    pub fn member_named(&self, name: &str) -> Option<&Member> {
        let view = self
            .observed
            .members
            .as_ref()?
            .iter()
            .find(|m| m.name == name)?;
        self.members.iter().find(|m| m.id == view.id)
    }
}

/// How the provider reaches a replica's etcd: its external IP (ephemeral or static), or its internal IP from
/// inside the VPC. Verification always uses the member's name, never the IP.
pub fn etcd_target(ctx: &ClusterCtx, i: &InstanceInfo) -> Option<EtcdTarget> {
    let ip = if ctx.etcd_via_internal_ip {
        i.internal_ip.as_ref()
    } else {
        i.external_ip.as_ref()
    }?;
    let addr: SocketAddr = format!("{ip}:{ETCD_CLIENT_PORT}").parse().ok()?;
    Some(EtcdTarget::new(addr, i.name.clone()))
}

/// Reads the cluster. `pending` names replicas whose VM may not exist yet, with their reserved internal IP, so a
/// learner that has not started (etcd reports no name for it) is still attributed.
pub async fn observe(
    ctx: &ClusterCtx,
    pending: &[(String, String)],
    deadline: Instant,
) -> Result<Snapshot> {
    let spec = &ctx.spec;
    let c = &ctx.compute;
    let labels: BTreeMap<String, String> = [(CLUSTER_LABEL.to_string(), spec.name.clone())].into();
    // One aggregatedList finds the replicas in every zone of the region.
    let instances: BTreeMap<String, InstanceInfo> = c
        .list_instances_in_region(&spec.region, &labels, deadline)
        .await?
        .into_iter()
        .map(|i| (i.name.clone(), i))
        .collect();
    let pool = c
        .get_target_pool(&spec.region, &ctx.names.target_pool, deadline)
        .await?;
    let rule = c
        .get_forwarding_rule(&spec.region, &ctx.names.forwarding_rule, deadline)
        .await?;
    // A pool names its health check; without a pool the check may still be left over (a shrink interrupted
    // between deleting the pool and the check), so only then is it read on its own: no extra call while an LB
    // exists.
    let health_check = match &pool {
        Some(p) => !p.health_checks.is_empty(),
        None => {
            c.http_health_check_exists(&ctx.names.health_check, deadline)
                .await?
        }
    };

    let ip_holder = ip_holder(rule.as_ref(), &instances, &spec.external_ip);
    let targets: Vec<EtcdTarget> = instances
        .values()
        .filter(|i| i.status == "RUNNING")
        .filter_map(|i| etcd_target(ctx, i))
        .collect();
    let etcd = read_etcd(ctx, &targets, &instances, pending).await;
    let pool_members = pool
        .as_ref()
        .map(|p| p.instances.clone())
        .unwrap_or_default();
    Ok(Snapshot {
        observed: Observed {
            instances: instances.keys().cloned().collect(),
            ip_holder: Some(ip_holder),
            health_check,
            pool: pool.map(|p| p.instances.into_iter().map(|r| r.name).collect()),
            forwarding_rule: rule.is_some(),
            members: etcd.views,
            etcd_unreachable: etcd.unreachable,
            stopped: instances
                .values()
                .filter(|i| i.status != "RUNNING")
                .map(|i| i.name.clone())
                .collect(),
            without_external_ip: instances
                .values()
                .filter(|i| i.external_ip.is_none())
                .map(|i| i.name.clone())
                .collect(),
            keys_in_metadata: instances
                .values()
                .filter(|i| {
                    ha_domain::key_placement::in_metadata(&i.metadata.iter().cloned().collect())
                })
                .map(|i| i.name.clone())
                .collect(),
        },
        instances,
        members: etcd.members,
        targets,
        health: etcd.health,
        pool_members,
    })
}

/// Who holds the static IP: the forwarding rule, an instance's access config, or nobody.
fn ip_holder(
    rule: Option<&ha_gce::ForwardingRuleInfo>,
    instances: &BTreeMap<String, InstanceInfo>,
    external_ip: &str,
) -> IpHolder {
    if rule.is_some_and(|r| r.ip_address == external_ip) {
        IpHolder::ForwardingRule
    } else if let Some(i) = instances
        .values()
        .find(|i| i.external_ip.as_deref() == Some(external_ip))
    {
        IpHolder::Instance(i.name.clone())
    } else {
        IpHolder::Nobody
    }
}

/// etcd as the running replicas show it: the member list, each target's health, and the members as the domain
/// sees them; or, when no target answers, why (`views` is then `None`).
struct EtcdView {
    members: Vec<Member>,
    views: Option<Vec<MemberView>>,
    health: Vec<EndpointHealth>,
    unreachable: Option<String>,
}

async fn read_etcd(
    ctx: &ClusterCtx,
    targets: &[EtcdTarget],
    instances: &BTreeMap<String, InstanceInfo>,
    pending: &[(String, String)],
) -> EtcdView {
    let mut view = EtcdView {
        members: Vec::new(),
        views: None,
        health: Vec::new(),
        unreachable: None,
    };
    if targets.is_empty() {
        return view;
    }
    match ctx.etcd.member_list(targets).await {
        Ok(members) => {
            let health = ctx.etcd.health(targets).await;
            view.views = Some(
                members
                    .iter()
                    .map(|m| MemberView {
                        name: member_name(m, instances, pending),
                        id: m.id,
                        is_learner: m.is_learner,
                        healthy: health
                            .iter()
                            .any(|h| h.health.is_healthy() && h.health.member_id() == Some(m.id)),
                        answered: health.iter().any(|h| h.health.member_id() == Some(m.id)),
                    })
                    .collect(),
            );
            view.members = members;
            view.health = health;
        }
        Err(e) => {
            tracing::warn!(error = %e, "etcd is unreachable through every replica");
            let tried: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
            view.unreachable = Some(format!(
                "tried {}; {}",
                tried.join(", "),
                super::OpError::Etcd(e).explain()
            ));
        }
    }
    view
}

/// A started member names itself; a learner that has not started yet is known by its peer URL.
fn member_name(
    m: &Member,
    instances: &BTreeMap<String, InstanceInfo>,
    pending: &[(String, String)],
) -> String {
    if !m.name.is_empty() {
        return m.name.clone();
    }
    let has_ip = |ip: &str| m.peer_urls.iter().any(|u| u.contains(&format!("//{ip}:")));
    if let Some(i) = instances
        .values()
        .find(|i| i.internal_ip.as_deref().is_some_and(has_ip))
    {
        return i.name.clone();
    }
    if let Some((name, _)) = pending.iter().find(|(_, ip)| has_ip(ip)) {
        return name.clone();
    }
    m.label()
}

/// Replica `name`'s VM, read by name: the cluster finds its VMs by label, and one whose labels were edited by
/// hand is still this replica.
pub async fn replica_vm(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<Option<InstanceInfo>> {
    Ok(ctx.compute.get_instance(zone, name, deadline).await?)
}

/// Whether replica `name`'s etcd data disk exists: a replica whose VM is gone (deleted by hand, or by a roll that
/// was interrupted before creating it again) is rebuilt on it, as the same member with its data.
pub async fn data_disk_exists(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<bool> {
    Ok(ctx
        .compute
        .get_disk(zone, &super::build::data_disk_name(name), deadline)
        .await?
        .is_some())
}

/// The labels of replica `name`'s etcd data disk, `None` when it has none.
pub async fn data_disk_labels(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<Option<std::collections::BTreeMap<String, String>>> {
    Ok(ctx
        .compute
        .get_disk(zone, &super::build::data_disk_name(name), deadline)
        .await?
        .map(|d| d.labels))
}

/// The size in GB of replica `name`'s etcd data disk, `None` when it has none.
pub async fn data_disk_size(
    ctx: &ClusterCtx,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<Option<i64>> {
    Ok(ctx
        .compute
        .get_disk(zone, &super::build::data_disk_name(name), deadline)
        .await?
        .map(|d| d.size_gb))
}
