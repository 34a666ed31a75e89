//! The facts `ha_domain::health` judges a cluster by, read from the real APIs: one `observe` (VMs, pool, static
//! IP holder, etcd's member list and each member's status), then what observe does not need: the load balancer's
//! view of each backend, raised alarms, the certificates in each VM's public files, and the newest snapshot.
//! Read-only: nothing here changes the cluster or takes its lock.

use std::time::Duration;

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::Result;
use super::observe::{Snapshot, observe};
use super::spec::Spec;
use ha_domain::health::{Facts, MemberFacts, MemberState, ReplicaFacts};
use ha_etcd::Health;
use ha_gce::InstanceRef;
use ha_settings::Settings;

/// How long the alarm list may take: it is answered through raft, so without quorum it would wait out etcd's own
/// request timeout for nothing (as `ha_etcd::Etcd::health` bounds it).
const ALARMS_WAIT: Duration = Duration::from_secs(2);

/// Reads everything the verdict needs about the cluster of `spec`, even when its CA keys cannot be used: that is
/// then one of the facts (`ClusterCtx::for_reading`). Compute calls share `deadline`.
pub async fn read_cluster(settings: &Settings, spec: Spec, deadline: Instant) -> Result<Facts> {
    let (ctx, keys_error) = ClusterCtx::for_reading(settings, spec).await?;
    let mut facts = read(&ctx, deadline).await?;
    facts.keys_error = keys_error;
    Ok(facts)
}

/// Reads everything the verdict needs about the cluster. Compute calls share `deadline`.
async fn read(ctx: &ClusterCtx, deadline: Instant) -> Result<Facts> {
    let snap = observe(ctx, &[], deadline).await?;
    let mut replicas = Vec::with_capacity(snap.instances.len());
    for vm in snap.instances.values() {
        replicas.push(ReplicaFacts {
            name: vm.name.clone(),
            zone: vm.zone.clone(),
            vm_status: vm.status.clone(),
            certificates_expire_at: super::adopt::certs_expire_on(vm),
            backend_healthy: backend_healthy(ctx, &snap, &vm.zone, &vm.name, deadline).await?,
        });
    }
    let alarms = alarms(ctx, &snap).await;
    let (last_backup, backup_error) = match &ctx.spec.backup {
        None => (None, None),
        Some(policy) => match super::backup::latest(&ctx.settings, policy, &ctx.spec.name).await {
            Ok(newest) => (newest, None),
            Err(e) => (None, Some(e.to_string())),
        },
    };
    let cas = &ctx.spec.cas;
    Ok(Facts {
        cluster: ctx.spec.name.clone(),
        replicas,
        members: members(&snap),
        etcd_unreachable: snap.observed.etcd_unreachable.clone(),
        alarms,
        ip_holder: snap
            .observed
            .ip_holder
            .clone()
            .unwrap_or(ha_domain::topology::IpHolder::Nobody),
        load_balancer: snap.observed.pool.is_some(),
        last_backup,
        backup_policy: ctx.spec.backup.is_some(),
        backup_error,
        keys_error: None,
        ca_expires_at: ha_pki::cas_expire_at([
            cas.cluster_ca.cert_pem.as_str(),
            cas.etcd_peer_ca.cert_pem.as_str(),
            cas.etcd_client_ca.cert_pem.as_str(),
        ]),
        renew_before: ctx.spec.certificate_renew_before,
    })
}

/// The balancer's view of one replica: `None` when it is not in the pool, else whether any forwarding rule's
/// check finds it HEALTHY.
async fn backend_healthy(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<Option<bool>> {
    if !snap.pool_members.iter().any(|m| m.name == name) {
        return Ok(None);
    }
    let member = InstanceRef {
        zone: zone.to_string(),
        name: name.to_string(),
    };
    let states = ctx
        .compute
        .target_pool_health(&ctx.spec.region, &ctx.names.target_pool, &member, deadline)
        .await?;
    Ok(Some(states.iter().any(|h| h.state == "HEALTHY")))
}

/// Each listed member with what it said about itself: its own status when one of the targets answered as it, or
/// why its replica's etcd did not answer, or nothing when no running VM carries it.
fn members(snap: &Snapshot) -> Option<Vec<MemberFacts>> {
    let views = snap.observed.members.as_ref()?;
    Some(
        views
            .iter()
            .map(|v| {
                let said = snap
                    .health
                    .iter()
                    .find(|h| h.health.member_id() == Some(v.id));
                let unanswered = snap
                    .health
                    .iter()
                    .find(|h| h.target.server_name == v.name && h.health.member_id().is_none());
                let (state, status) = said
                    .or(unanswered)
                    .map_or((MemberState::NotAsked, None), |h| state_of(&h.health));
                // A member that never started has no name of its own; observe calls it by its replica's VM
                // (matched by internal IP) or, matching none, by its peer URL, which is no replica's name.
                let unattributed = snap
                    .members
                    .iter()
                    .any(|m| m.id == v.id && !m.started() && m.label() == v.name);
                MemberFacts {
                    id: v.id,
                    name: if unattributed {
                        String::new()
                    } else {
                        v.name.clone()
                    },
                    learner: v.is_learner,
                    state,
                    db_size: status.map(|s| s.db_size),
                    leader_id: status.map(|s| s.leader_id),
                }
            })
            .collect(),
    )
}

fn state_of(h: &Health) -> (MemberState, Option<&ha_etcd::MemberStatus>) {
    match h {
        Health::Healthy(s) => (MemberState::Healthy, Some(s)),
        Health::Unhealthy { status, reason } => {
            (MemberState::Unhealthy(reason.clone()), Some(status))
        }
        Health::Unreachable { reason } => (MemberState::Unreachable(reason.clone()), None),
    }
}

/// Raised alarms, as `NOSPACE on member <name>`; none when no member knows a leader (the list would only time
/// out) or the list does not come in time.
async fn alarms(ctx: &ClusterCtx, snap: &Snapshot) -> Vec<String> {
    let led = snap.health.iter().any(|h| match &h.health {
        Health::Healthy(s) | Health::Unhealthy { status: s, .. } => s.leader_id != 0,
        Health::Unreachable { .. } => false,
    });
    if !led {
        return Vec::new();
    }
    let Ok(Ok(alarms)) = tokio::time::timeout(ALARMS_WAIT, ctx.etcd.alarms(&snap.targets)).await
    else {
        return Vec::new();
    };
    let name_of = |id: u64| {
        snap.observed
            .members
            .iter()
            .flatten()
            .find(|m| m.id == id)
            .map_or_else(|| format!("{id:x}"), |m| m.name.clone())
    };
    alarms
        .iter()
        .map(|a| format!("{} on member {}", a.kind, name_of(a.member_id)))
        .collect()
}
