//! What a cluster and its replicas agree on: object names and labels derived from the cluster's name.

use std::collections::BTreeMap;

pub use ha_domain::labels::{CLUSTER_LABEL, JOINING_LABEL, REPLICA_LABEL};

pub fn replica_labels(cluster: &str, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut labels = extra.clone();
    labels.insert(CLUSTER_LABEL.into(), cluster.into());
    labels
}

/// The description of a replica's internal address: which cluster's replicas it belongs to, so the leftovers of a
/// join that died before its VM existed can be found (`ops::orphans`).
pub fn internal_address_description(cluster: &str) -> String {
    format!("Internal IP of a replica of ha_master_cluster {cluster}")
}

/// The reserved internal address of a replica: its IP is known before the VM exists, as etcd's initial cluster
/// must name the new member's peer URL before the member starts.
pub fn internal_address_name(replica: &str) -> String {
    format!("{replica}{}", ha_domain::names::INTERNAL_ADDRESS_SUFFIX)
}

pub fn peer_url(ip: &str) -> String {
    format!("https://{ip}:{ETCD_PEER_PORT}")
}

/// The ports the cluster's firewall rules open (`ha_domain::foundation`).
pub use ha_domain::foundation::{ETCD_CLIENT_PORT, ETCD_PEER_PORT, HEALTH_PORT};

/// An instance's zone name (the API returns the zone's URL).
pub fn zone_of(i: &ha_gce::InstanceInfo) -> String {
    i.zone.rsplit('/').next().unwrap_or(&i.zone).to_string()
}
