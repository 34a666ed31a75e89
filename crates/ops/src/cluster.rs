//! The cluster's own GCE objects: the static regional address, and firewall rules that let etcd peers talk only
//! between masters (by tag), the API port in from the allowed ranges, etcd's client port in only from the admin
//! ranges, and GCE's health checkers in to the plain-HTTP health port.

use tokio::time::Instant;

use super::cloud::Cloud;
use super::error::{OpError, Result};
use super::shared::{CLUSTER_LABEL, ETCD_CLIENT_PORT, HEALTH_PORT, internal_address_description};
use ha_domain::names::DerivedNames;
use ha_gce::FirewallSpec;

/// Where legacy HTTP health checks come from (GCE's documented prober ranges).
const HEALTH_CHECK_RANGES: [&str; 3] = ["35.191.0.0/16", "209.85.152.0/22", "209.85.204.0/22"];

pub struct ClusterNetwork<'a> {
    pub name: &'a str,
    pub region: &'a str,
    pub network: &'a str,
    pub api_port: u16,
    pub api_source_ranges: &'a [String],
    pub etcd_client_source_ranges: &'a [String],
}

fn firewalls(n: &ClusterNetwork<'_>) -> Vec<FirewallSpec> {
    let names = DerivedNames::for_cluster(n.name);
    let rule =
        |name: String, ports: Vec<String>, ranges: Vec<String>, tags: Vec<String>, why: &str| {
            FirewallSpec {
                name,
                network: n.network.to_string(),
                tcp_ports: ports,
                source_ranges: ranges,
                source_tags: tags,
                target_tags: vec![names.master_tag.clone()],
                description: Some(format!("{why} ({})", n.name)),
            }
        };
    vec![
        rule(
            names.firewall_etcd_peer.clone(),
            vec!["2380".into()],
            vec![],
            vec![names.master_tag.clone()],
            "etcd peers, master to master",
        ),
        rule(
            names.firewall_api.clone(),
            vec![n.api_port.to_string()],
            n.api_source_ranges.to_vec(),
            vec![],
            "Kubernetes API",
        ),
        rule(
            names.firewall_etcd_client.clone(),
            vec![ETCD_CLIENT_PORT.to_string()],
            n.etcd_client_source_ranges.to_vec(),
            vec![],
            "etcd clients (mutual TLS) from admin ranges",
        ),
        rule(
            format!("{}-healthz", n.name),
            vec![HEALTH_PORT.to_string()],
            HEALTH_CHECK_RANGES.iter().map(|s| s.to_string()).collect(),
            vec![],
            "load balancer health checks",
        ),
    ]
}

/// Creates (or finds, when resuming) the address and firewall rules; returns the static IP.
pub async fn create(cloud: &Cloud, n: &ClusterNetwork<'_>, deadline: Instant) -> Result<String> {
    let c = &cloud.compute;
    let names = DerivedNames::for_cluster(n.name);
    let address = c
        .reserve_external_address(n.region, &names.address, deadline)
        .await?;
    for fw in firewalls(n) {
        c.ensure_firewall(&fw, deadline).await?;
    }
    Ok(address.ip)
}

/// Brings firewall rules in line with the configuration (ranges and ports change in place).
pub async fn update(cloud: &Cloud, n: &ClusterNetwork<'_>, deadline: Instant) -> Result<()> {
    let c = &cloud.compute;
    for fw in firewalls(n) {
        c.update_firewall(&fw, deadline).await?;
    }
    Ok(())
}

/// Deletes everything the cluster owns, refusing while replicas exist: its network objects, and whatever dead
/// joins left behind.
pub async fn delete(cloud: &Cloud, n: &ClusterNetwork<'_>, deadline: Instant) -> Result<()> {
    let c = &cloud.compute;
    let names = DerivedNames::for_cluster(n.name);
    let region = c.get_region(n.region, deadline).await?;
    let labels = [(CLUSTER_LABEL.to_string(), n.name.to_string())].into();
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
    if !replicas.is_empty() {
        return Err(OpError::Refused(
            format!("Cluster {} still has replicas: {}", n.name, replicas.join(", ")),
            "Remove their ha_master_replica resources first (or destroy them in the same apply, which Terraform orders before the cluster).".into(),
        ));
    }
    // What joins that died before their VM existed left (their internal address, their keys): with no replica
    // left, every one is a leftover. Each delete treats "not found" as done.
    for address in c
        .list_addresses_described(n.region, &internal_address_description(n.name), deadline)
        .await?
    {
        c.delete_address(n.region, &address.name, deadline).await?;
    }
    let keys = ha_domain::names::cluster_keys_secret(n.name);
    let secret_manager = cloud.secrets().await?;
    for (id, _) in crate::build::cluster_secrets(&secret_manager, n.name).await? {
        if id != keys {
            secret_manager.delete(&id).await?;
        }
    }
    // Leftovers of an interrupted shrink, then the cluster's own objects.
    c.delete_forwarding_rule(n.region, &names.forwarding_rule, deadline)
        .await?;
    c.delete_target_pool(n.region, &names.target_pool, deadline)
        .await?;
    c.delete_http_health_check(&names.health_check, deadline)
        .await?;
    for fw in firewalls(n) {
        c.delete_firewall(&fw.name, deadline).await?;
    }
    // The cluster's own keys before its address, which is its identity (`exists`): once the address is gone the
    // next refresh finds no cluster, so nothing deleted after it would ever be retried, and a delete killed there
    // would leak the CA keys. A delete that fails between the two leaves the cluster in state with its keys in
    // `private_keys`: its refresh reports the secret missing and an apply writes it back (`keys_drift`).
    match secret_manager.delete(&keys).await {
        // A cluster made before the keys' secret, in a project that never enabled the API: nothing to delete.
        Err(e) if e.is_disabled() => {}
        other => {
            other?;
        }
    }
    c.delete_address(n.region, &names.address, deadline).await?;
    Ok(())
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
