//! Before a join, under the cluster's lock: remove what joins that died left under names no state holds, then
//! reserve the joining replica's internal IP (`domain::orphans` decides; this reads the world and carries it out).
//! VMs an interrupted IP move left without an external IP get one first (`repair::restore_reachability`), so every
//! etcd member can be asked. A VM a dead join made leaves the cluster exactly as a deleted replica does
//! (`ops::leave`: pool, member, VM, address, keys, and the load balancer's shape); an address with no VM is
//! released, keys with neither are deleted, and the joining replica's address is reserved, as steps of one run
//! (`Orphans::before_join`).

use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::build::list_keys;
use super::change::observe_reachable;
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::Run;
use super::leave::leave;
use super::shared::{JOINING_LABEL, internal_address_description, zone_of};
use ha_domain::orphans::{AddressSeen, MemberSeen, VmSeen, orphans};

/// Clears what dead joins left and reserves `me`'s internal IP; returns the IP.
pub async fn prepare_join(ctx: &ClusterCtx, me: &str, deadline: Instant) -> Result<Ipv4Addr> {
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
    if !found.addresses.is_empty() || !found.secrets.is_empty() {
        tracing::info!(
            "{me}: releasing the internal addresses {:?} and deleting the keys secrets {:?} of joins killed \
             before their VMs existed",
            found.addresses,
            found.secrets
        );
    }
    let mut run = Run::for_cluster(ctx, &snap, deadline);
    run.execute(&found.before_join(me)).await?;
    run.progress.internal_ip.ok_or_else(|| {
        OpError::Other(format!(
            "the join of replica {me} reserved no internal address"
        ))
    })
}
