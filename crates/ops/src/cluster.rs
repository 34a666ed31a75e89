//! The cluster's foundation, observed, decided by `ha_domain::foundation` and carried out by
//! `execute::foundation`: its static regional address and firewall rules at create, the rules brought back in line
//! at update, and everything it owns swept at delete.

use tokio::time::Instant;

use super::cloud::Cloud;
use super::cluster_keys::{self, ClusterKeys};
use super::error::{OpError, Result};
use super::execute::foundation::FoundationRun;
use super::shared::{CLUSTER_LABEL, internal_address_description, zone_of};
use ha_domain::firewall_handover::{
    self, Handover, Master, MasterTags, found_foreign_tags, rules_during_handover,
};
use ha_domain::firewall_rule::FirewallRule;
pub use ha_domain::foundation::ClusterNetwork;
use ha_domain::foundation::{
    FoundRules, Leftovers, create_steps, delete_steps, firewall_rules, update_steps,
};
use ha_domain::names::DerivedNames;

/// The cluster's firewall rules as they are now, by name.
async fn found_rules(
    cloud: &Cloud,
    want: &[FirewallRule],
    deadline: Instant,
) -> Result<FoundRules> {
    let mut found = FoundRules::new();
    for rule in want {
        if let Some(have) = cloud.compute.get_firewall(&rule.name, deadline).await? {
            found.insert(
                have.name.clone(),
                FirewallRule {
                    name: have.name,
                    network: have.network,
                    tcp_ports: have.tcp_ports,
                    source_ranges: have.source_ranges,
                    source_tags: have.source_tags,
                    target_tags: have.target_tags,
                    description: String::new(),
                },
            );
        }
    }
    Ok(found)
}

/// The rules to bring the found ones to: the cluster's own, widened while some masters lack its network tag (an
/// imported kube-up cluster's, `ha_domain::firewall_handover`). The masters are listed only when a found rule
/// names a tag the cluster's rules do not, which a cluster this provider made never does.
async fn rules_to_keep(
    cloud: &Cloud,
    n: &ClusterNetwork<'_>,
    deadline: Instant,
) -> Result<(Vec<FirewallRule>, FoundRules, Option<Handover>)> {
    let want = firewall_rules(n);
    let found = found_rules(cloud, &want, deadline).await?;
    if !found_foreign_tags(&want, &found) {
        return Ok((want, found, None));
    }
    let labels = [(CLUSTER_LABEL.to_string(), n.name.to_string())].into();
    let masters: MasterTags = cloud
        .compute
        .list_instances_in_region(n.region, &labels, deadline)
        .await?
        .into_iter()
        .map(|vm| {
            let master = Master {
                zone: zone_of(&vm),
                tags: vm.tags.into_iter().collect(),
            };
            (vm.name, master)
        })
        .collect();
    let tag = DerivedNames::for_cluster(n.name).master_tag;
    let (rules, handover) = rules_during_handover(want, &found, &masters, &tag);
    Ok((rules, found, handover))
}

/// Creates (or finds, when resuming) the address and firewall rules, then writes `keys` to the keys' secret;
/// returns the static IP and the secret's path.
pub async fn create(
    cloud: &Cloud,
    n: &ClusterNetwork<'_>,
    keys: &ClusterKeys,
    deadline: Instant,
) -> Result<(String, String)> {
    let want = firewall_rules(n);
    let found = found_rules(cloud, &want, deadline).await?;
    let mut run = FoundationRun::new(cloud, n.name, n.region, deadline).with_keys(keys);
    run.execute(&create_steps(&want, &found)).await?;
    match (run.static_ip, run.keys_secret) {
        (Some(ip), Some(secret)) => Ok((ip, secret)),
        _ => Err(OpError::Other(format!(
            "cluster {}'s create reserved no address or wrote no keys; this is a bug",
            n.name
        ))),
    }
}

/// Makes the keys' secret hold `keys` when it does not (reads before it writes, so an update of another setting
/// writes nothing), then brings the firewall rules in line with the configuration (ranges and ports change in
/// place) and puts back a rule deleted or edited by hand; a rule already right is not touched.
/// `cluster_ca_certificates` are the cluster CA's (current, then the next while the CAs rotate): a brought CA's
/// key that `keys` lack is kept from the secret when it holds that CA's.
pub async fn update(
    cloud: &Cloud,
    n: &ClusterNetwork<'_>,
    keys: Option<&ClusterKeys>,
    cluster_ca_certificates: &[String],
    deadline: Instant,
) -> Result<()> {
    let keys = match keys {
        Some(k) => {
            let found = cluster_keys::found(cloud, n.name).await?;
            if found.as_ref().is_some_and(|f| k.held_by(f)) {
                None
            } else {
                // Written without the key of a CA the user brought, the secret could sign nothing again.
                let whole = k
                    .completed_from(found.as_ref(), cluster_ca_certificates)
                    .map_err(|which| OpError::BroughtCaKeyNeeded {
                        cluster: n.name.to_string(),
                        which,
                    })?;
                Some(whole)
            }
        }
        None => None,
    };
    let (want, found, _) = rules_to_keep(cloud, n, deadline).await?;
    let mut run = FoundationRun::new(cloud, n.name, n.region, deadline);
    if let Some(k) = &keys {
        run = run.with_keys(k);
    }
    run.execute(&update_steps(&want, &found, keys.is_some()))
        .await
}

/// What is wrong with the cluster's firewall rules, as `drift` sentences; while some masters lack the cluster's
/// tag, a last sentence says why the rules keep more than the cluster's own (only with a repair to make, so a
/// patched rule plans nothing).
pub async fn drift(
    cloud: &Cloud,
    n: &ClusterNetwork<'_>,
    deadline: Instant,
) -> Result<Vec<String>> {
    let (want, found, handover) = rules_to_keep(cloud, n, deadline).await?;
    let tag = DerivedNames::for_cluster(n.name).master_tag;
    Ok(firewall_handover::drift(
        &want,
        &found,
        handover.as_ref(),
        &tag,
    ))
}

/// Deletes everything the cluster owns, refusing while replicas exist: its foundation, and whatever dead joins
/// and an interrupted shrink left behind.
pub async fn delete(cloud: &Cloud, n: &ClusterNetwork<'_>, deadline: Instant) -> Result<()> {
    let c = &cloud.compute;
    let replicas = replicas(cloud, n.region, n.name, deadline).await?;
    if !replicas.is_empty() {
        return Err(OpError::Refused(
            format!("Cluster {} still has replicas: {}", n.name, replicas.join(", ")),
            "Remove their ha_master_replica resources first (or destroy them in the same apply, which Terraform orders before the cluster).".into(),
        ));
    }
    // With no replica left, every internal address and key secret of the cluster is a dead join's leftover.
    let left = Leftovers {
        internal_addresses: c
            .list_addresses_described(n.region, &internal_address_description(n.name), deadline)
            .await?
            .into_iter()
            .map(|a| a.name)
            .collect(),
        secrets: crate::build::cluster_secrets(&cloud.secrets().await?, n.name)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect(),
    };
    FoundationRun::new(cloud, n.name, n.region, deadline)
        .execute(&delete_steps(n.name, &firewall_rules(n), &left))
        .await
}

/// The cluster's replica VMs (those labelled with its name) in every zone of its region: what its delete, or a
/// replacement, would leave without a cluster.
pub async fn replicas(
    cloud: &Cloud,
    region: &str,
    name: &str,
    deadline: Instant,
) -> Result<Vec<String>> {
    let c = &cloud.compute;
    let region = c.get_region(region, deadline).await?;
    let labels = [(CLUSTER_LABEL.to_string(), name.to_string())].into();
    let mut replicas = Vec::new();
    for zone in &region.zones {
        let zone = zone.rsplit('/').next().unwrap_or(zone);
        replicas.extend(
            c.list_instances(zone, &labels, deadline)
                .await?
                .into_iter()
                .map(|i| i.name),
        );
    }
    replicas.sort();
    Ok(replicas)
}

/// Whether the cluster's static address exists: it is the cluster's identity, so without it the cluster is gone.
pub async fn exists(cloud: &Cloud, region: &str, name: &str, deadline: Instant) -> Result<bool> {
    let address = DerivedNames::for_cluster(name).address;
    Ok(cloud
        .compute
        .get_address(region, &address, deadline)
        .await?
        .is_some())
}
