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
    pub certificate_sha256: Val<BTreeMap<String, String>>,
    pub startup_metadata: Val<BTreeMap<String, String>>,
    pub keys_in_metadata: Val<bool>,
    pub drift: Val<Vec<String>>,
    pub master_settings: Val<BTreeMap<String, String>>,
    pub certificates_expire_at: Val<String>,
    pub timeouts: Val<Timeouts>,
}

/// The keys of `certificate_sha256`, in the order `record_certificates` takes the certificates.
pub const CERTIFICATE_NAMES: [&str; 3] = ["api_server", "etcd_peer", "etcd_server"];

/// What state keeps of a replica's three leaf certificates (the API server's, etcd's peer and client-port ones,
/// PEM, in `CERTIFICATE_NAMES` order): each one's fingerprint, and when the first expires. Plans show these
/// rather than the PEMs, which are derived from the cluster's CAs and are on the VM. A certificate that cannot
/// be read (none yet) has an empty fingerprint and leaves the expiry null.
pub fn certificate_facts(pems: [&str; 3]) -> (BTreeMap<String, String>, Option<String>) {
    let fingerprints = CERTIFICATE_NAMES
        .iter()
        .zip(pems)
        .map(|(name, pem)| {
            let sha = ha_pki::sha256_fingerprint(pem).unwrap_or_default();
            (name.to_string(), sha)
        })
        .collect();
    let first_expiry = pems
        .iter()
        .map(|pem| ha_pki::not_after_unix(pem).ok())
        .collect::<Option<Vec<i64>>>()
        .and_then(|t| t.into_iter().min())
        .map(ha_domain::certificates::rfc3339);
    (fingerprints, first_expiry)
}

/// Sets `certificate_sha256` and `certificates_expire_at` from the replica's certificates (`certificate_facts`).
pub fn record_certificates(m: &mut ReplicaModel, pems: [&str; 3]) {
    let (fingerprints, expiry) = certificate_facts(pems);
    m.certificate_sha256 = Val::Known(fingerprints);
    m.certificates_expire_at = expiry.map_or(Val::Null, Val::Known);
}

/// Sets `startup_metadata` (a digest of each item, `domain::metadata`) and `keys_in_metadata` from the metadata
/// the provider wrote on the VM, or found on it as the baseline it owns from then on.
pub fn record_metadata<'a>(
    m: &mut ReplicaModel,
    items: impl IntoIterator<Item = &'a (String, String)>,
) {
    let items: BTreeMap<String, String> = items.into_iter().cloned().collect();
    m.startup_metadata = Val::Known(ha_domain::metadata::digests(&items));
    m.keys_in_metadata = Val::Known(ha_domain::key_placement::in_metadata(&items));
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

/// The cluster's name when it was imported without its CA private keys (its `spec` carries them empty), so it
/// cannot sign a new or rebuilt master's certificates.
pub(super) fn imported_without_ca_keys(r: &ReplicaModel) -> Option<String> {
    let cluster = r.cluster.known()?;
    cluster
        .ca_private_key
        .known()
        .is_some_and(|k| k.is_empty())
        .then(|| cluster.name.known().cloned().unwrap_or_default())
}
