//! Reads etcd's versions for the plan of an `etcd_version` change: each voting member's server version and health
//! (Status), and the cluster version (`/version`), from etcd itself. `domain::etcd_version` judges them.

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::refresh::observe_shared;
use ha_domain::etcd_version::{EtcdVersions, MemberVersion};

/// `None` when the cluster has no replica VM (nothing runs etcd yet).
pub async fn read(ctx: &ClusterCtx) -> Result<Option<EtcdVersions>> {
    let snap = observe_shared(ctx).await?;
    if snap.observed.instances.is_empty() {
        return Ok(None);
    }
    if let Some(why) = &snap.observed.etcd_unreachable {
        return Err(OpError::Other(why.clone()));
    }
    let health = ctx.etcd.health(&snap.targets).await;
    let members = snap
        .observed
        .members
        .iter()
        .flatten()
        .filter(|m| !m.is_learner)
        .map(|m| {
            let status = health.iter().find_map(|h| match &h.health {
                ha_etcd::Health::Healthy(s) | ha_etcd::Health::Unhealthy { status: s, .. }
                    if s.member_id == m.id =>
                {
                    Some((s.version.clone(), h.health.is_healthy()))
                }
                _ => None,
            });
            MemberVersion {
                name: m.name.clone(),
                server: status.as_ref().map(|(v, _)| v.clone()),
                healthy: status.is_some_and(|(_, h)| h),
            }
        })
        .collect();
    // Any member that answers knows the cluster version; a healthy one first.
    let mut cluster = None;
    let mut order: Vec<_> = health.iter().collect();
    order.sort_by_key(|h| !h.health.is_healthy());
    for h in order {
        match ctx.etcd.versions(&h.target).await {
            Ok(v) if v.cluster != "not_decided" => {
                cluster = Some(v.cluster);
                break;
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "etcd /version"),
        }
    }
    Ok(Some(EtcdVersions { members, cluster }))
}
