//! Before a join, under the cluster's lock: remove what joins that died left under names no state holds
//! (`domain::orphans` decides; this reads the world and carries it out). VMs an interrupted IP move left without
//! an external IP get one first (`repair::restore_reachability`), so every etcd member can be asked. A VM a dead join made leaves the cluster
//! exactly as a deleted replica does (`ops::leave`: pool, member, VM, address, keys, and the load balancer's
//! shape); an address with no VM is released, and keys with neither are deleted, as steps of one run
//! (`Orphans::cleanup_steps`).

use tokio::time::Instant;

use super::build::list_keys;
use super::change::observe_reachable;
use super::context::ClusterCtx;
use super::error::Result;
use super::execute::Run;
use super::leave::leave;
use super::shared::{JOINING_LABEL, internal_address_description, zone_of};
use ha_domain::orphans::{AddressSeen, MemberSeen, VmSeen, orphans};

pub async fn clear_orphans(ctx: &ClusterCtx, me: &str, deadline: Instant) -> Result<()> {
    let spec = &ctx.spec;
    let addresses = ctx
        .compute
        .list_addresses_described(
            &spec.region,
            &internal_address_description(&spec.name),
            deadline,
        )
        .await?;
    let snap = observe_reachable(ctx, deadline).await?;
    let vms: Vec<VmSeen> = snap
        .instances
        .values()
        .map(|i| VmSeen {
            name: i.name.clone(),
            joining: i.labels.contains_key(JOINING_LABEL),
        })
        .collect();
    let addresses: Vec<AddressSeen> = addresses
        .iter()
        .filter_map(|a| {
            Some(AddressSeen {
                replica: a.name.strip_suffix("-int")?.to_string(),
                ip: a.ip.clone(),
            })
        })
        .collect();
    let members: Vec<MemberSeen> = snap
        .members
        .iter()
        .filter_map(|m| {
            let ip = m
                .peer_urls
                .first()?
                .trim_start_matches("https://")
                .split(':')
                .next()?;
            Some(MemberSeen {
                peer_ip: ip.to_string(),
                is_learner: m.is_learner,
            })
        })
        .collect();
    let secrets = list_keys(ctx).await?;
    let found = orphans(me, &vms, &addresses, &members, &secrets);
    for name in &found.replicas {
        tracing::info!(
            "{me}: removing {name}, a replica whose create was killed before Terraform saved it"
        );
        let zone = snap
            .instances
            .get(name)
            .map(zone_of)
            .unwrap_or_else(|| spec.zone.clone());
        leave(ctx, name, &zone, deadline).await?;
    }
    let cleanup = found.cleanup_steps();
    if !cleanup.is_empty() {
        tracing::info!(
            "{me}: releasing the internal addresses {:?} and deleting the keys secrets {:?} of joins killed \
             before their VMs existed",
            found.addresses,
            found.secrets
        );
        Run::for_cluster(ctx, &snap, deadline)
            .execute(&cleanup)
            .await?;
    }
    Ok(())
}
