//! `ha_master_replica`'s Terraform model (one field per attribute of `replica::schema`) and the facts about a
//! planned change that both the plan and the apply read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tfplugin_framework::Val;

use super::Timeouts;
use super::spec::ClusterSpec;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplicaModel {
    pub id: Val<String>,
    pub cluster: Val<ClusterSpec>,
    pub cluster_id: Val<String>,
    pub zone: Val<String>,
    pub name: Val<String>,
    pub labels: Val<BTreeMap<String, String>>,
    pub instance_id: Val<String>,
    pub self_link: Val<String>,
    pub internal_ip: Val<String>,
    pub external_ip: Val<String>,
    pub holds_static_ip: Val<bool>,
    pub etcd_member_id: Val<String>,
    pub status: Val<String>,
    pub api_server_certificate: Val<String>,
    pub etcd_peer_certificate: Val<String>,
    pub etcd_server_certificate: Val<String>,
    pub startup_metadata: Val<BTreeMap<String, String>>,
    pub drift: Val<Vec<String>>,
    pub master_settings: Val<BTreeMap<String, String>>,
    pub certificates_expire_at: Val<String>,
    pub timeouts: Val<Timeouts>,
}

/// The `status` refresh records for a replica whose VM is gone while its etcd data disk and member remain: not
/// one of GCE's statuses, since there is no VM to have one. The plan rebuilds the VM on the disk.
pub const VM_DELETED: &str = "DELETED";

/// Whether the replica's cluster raises `restore.generation` in this plan: its apply recovers etcd from a
/// surviving member (`domain::recovery`) before any replica's update.
pub(super) fn cluster_recovers(prior: &ReplicaModel, p: &ReplicaModel) -> bool {
    let generation = |m: &ReplicaModel| {
        m.cluster
            .known()
            .map(|c| c.restore_generation.known().copied().unwrap_or(0))
    };
    matches!((generation(prior), generation(p)), (Some(old), Some(new)) if new > old)
}

/// Whether the replica's cluster moves its masters to another subnetwork of its network.
pub fn moves_subnetwork(prior: &ReplicaModel, p: &ReplicaModel) -> bool {
    matches!((prior.cluster.known(), p.cluster.known()), (Some(old), Some(new)) if new.moves_subnetwork(old))
}
