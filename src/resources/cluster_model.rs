//! `ha_master_cluster`'s Terraform model (one field per attribute of `cluster::schema`) and the plain
//! `ClusterSpec` a replica carries, derived from it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tfplugin_framework::{Val, typed_object};

use ha_ops::OpError;
use ha_ops::spec::Spec;

use super::spec::ClusterSpec;
use super::{Timeouts, known_or_default};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterModel {
    pub id: Val<String>,
    pub name: Val<String>,
    pub project: Val<String>,
    pub region: Val<String>,
    pub zone: Val<String>,
    pub multizone: Val<bool>,
    pub etcd_quorum_read: Val<bool>,
    pub machine_type: Val<String>,
    pub image: Val<String>,
    pub boot_disk_size_gb: Val<i64>,
    pub data_disk_size_gb: Val<i64>,
    pub data_disk_type: Val<String>,
    pub network: Val<String>,
    pub subnetwork: Val<String>,
    pub tags: Val<Vec<String>>,
    pub labels: Val<BTreeMap<String, String>>,
    pub effective_labels: Val<BTreeMap<String, String>>,
    pub api_source_ranges: Val<Vec<String>>,
    pub etcd_client_source_ranges: Val<Vec<String>>,
    pub api_port: Val<i64>,
    pub service_cluster_ip_range: Val<String>,
    pub dns_domain: Val<String>,
    pub external_ip: Val<String>,
    pub endpoint: Val<String>,
    pub ca_certificate: Val<String>,
    pub ca_private_key_wo: Val<String>,
    pub etcd_peer_ca_certificate: Val<String>,
    pub etcd_client_ca_certificate: Val<String>,
    pub spec: Val<ClusterSpec>,
    pub drift: Val<Vec<String>>,
    pub deletion_protection: Val<bool>,
    pub etcd_version: Val<String>,
    pub kubernetes_version: Val<String>,
    pub certificate_validity: Val<String>,
    pub certificate_renew_before: Val<String>,
    pub service_account: Val<String>,
    pub service_account_scopes: Val<Vec<String>>,
    pub restore: Val<Restore>,
    pub backup: Val<Backup>,
    pub last_backup: Val<String>,
    pub ca_key_store: Val<String>,
    pub secrets_encryption_key: Val<String>,
    pub secrets_decryption_keys: Val<Vec<String>>,
    pub service_account_key_rotation: Val<String>,
    pub ca_rotation: Val<String>,
    pub next_ca_certificate: Val<String>,
    pub next_ca_private_key_wo: Val<String>,
    pub private_keys: Val<PrivateKeys>,
    pub timeouts: Val<Timeouts>,
}

/// Where the cluster keeps the private keys its replicas are signed with (`ca_key_store`).
pub mod key_store {
    /// In the cluster's own Secret Manager secret (`ops::cluster_keys`), and once in the cluster's state.
    pub const SECRET_MANAGER: &str = "secret_manager";
    /// In the cluster's `spec`, and so in every replica's `cluster` input: clusters made before the secret.
    pub const TERRAFORM_STATE: &str = "terraform_state";

    pub fn check(v: &str) -> Result<(), (String, String)> {
        if v == SECRET_MANAGER || v == TERRAFORM_STATE {
            return Ok(());
        }
        Err((
            "Unknown key store".into(),
            format!(
                "{v:?} is not a key store: use \"{SECRET_MANAGER}\" (the cluster's own Secret Manager secret; \
                 the default) or \"{TERRAFORM_STATE}\" (every replica's state, as clusters made before the \
                 secret keep them until they move)."
            ),
        ))
    }
}

typed_object! {
/// The cluster's private keys, kept once in its state (`private_keys`, sensitive) when `ca_key_store` is
/// `secret_manager`: the copy the cluster's refresh compares its keys' secret with, and its apply writes back.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PrivateKeys {
    pub ca: Val<String>,
    pub etcd_peer_ca: Val<String>,
    pub etcd_client_ca: Val<String>,
    pub service_account: Val<String>,
    /// The key a rotation of the service-account key made, until it becomes `service_account`; null otherwise.
    pub next_service_account: Val<String>,
    /// The keys of the CAs a rotation of the CAs made, until they become the CAs; null otherwise.
    pub next_ca: Val<String>,
    pub next_etcd_peer_ca: Val<String>,
    pub next_etcd_client_ca: Val<String>,
}}

impl std::fmt::Debug for PrivateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateKeys(<redacted>)")
    }
}

/// A key that may be absent, as state keeps it: null when there is none.
fn or_null(key: &str) -> Val<String> {
    if key.is_empty() {
        Val::Null
    } else {
        Val::Known(key.to_string())
    }
}

/// A key that may be absent, as the secret keeps it: empty when there is none; `None` while unknown.
fn or_empty(key: &Val<String>) -> Option<String> {
    match key {
        Val::Known(k) => Some(k.clone()),
        Val::Null => Some(String::new()),
        Val::Unknown => None,
    }
}

impl PrivateKeys {
    pub fn of(keys: &ha_ops::cluster_keys::ClusterKeys) -> PrivateKeys {
        PrivateKeys {
            ca: Val::Known(keys.ca_key.clone()),
            etcd_peer_ca: Val::Known(keys.etcd_peer_ca_key.clone()),
            etcd_client_ca: Val::Known(keys.etcd_client_ca_key.clone()),
            service_account: Val::Known(keys.service_account_key.clone()),
            next_service_account: or_null(&keys.next_service_account_key),
            next_ca: or_null(&keys.next_ca_key),
            next_etcd_peer_ca: or_null(&keys.next_etcd_peer_ca_key),
            next_etcd_client_ca: or_null(&keys.next_etcd_client_ca_key),
        }
    }

    /// The keys an imported cluster's spec carries: its service-account key, read from a master, and no CA key
    /// (masters never hold them); `None` when it has no service-account key either.
    pub fn from_imported_spec(s: &ClusterSpec) -> Option<PrivateKeys> {
        let service_account_key = s.service_account_key.known().filter(|k| !k.is_empty())?;
        Some(PrivateKeys::of(&ha_ops::cluster_keys::ClusterKeys {
            ca_key: String::new(),
            etcd_peer_ca_key: String::new(),
            etcd_client_ca_key: String::new(),
            service_account_key: service_account_key.clone(),
            ..Default::default()
        }))
    }

    /// The keys a spec that keeps them itself carries (`terraform_state`); `None` when any is missing.
    pub fn from_spec(s: &ClusterSpec) -> Option<PrivateKeys> {
        let key = |v: &Val<String>| v.known().filter(|k| !k.is_empty()).cloned();
        Some(PrivateKeys::of(&ha_ops::cluster_keys::ClusterKeys {
            ca_key: key(&s.ca_private_key)?,
            etcd_peer_ca_key: key(&s.etcd_peer_ca_private_key)?,
            etcd_client_ca_key: key(&s.etcd_client_ca_private_key)?,
            service_account_key: key(&s.service_account_key)?,
            ..Default::default()
        }))
    }

    pub fn keys(&self) -> Option<ha_ops::cluster_keys::ClusterKeys> {
        Some(ha_ops::cluster_keys::ClusterKeys {
            ca_key: self.ca.known()?.clone(),
            etcd_peer_ca_key: self.etcd_peer_ca.known()?.clone(),
            etcd_client_ca_key: self.etcd_client_ca.known()?.clone(),
            service_account_key: self.service_account.known()?.clone(),
            next_service_account_key: or_empty(&self.next_service_account)?,
            next_ca_key: or_empty(&self.next_ca)?,
            next_etcd_peer_ca_key: or_empty(&self.next_etcd_peer_ca)?,
            next_etcd_client_ca_key: or_empty(&self.next_etcd_client_ca)?,
        })
    }
}

impl ClusterModel {
    /// The cluster's settings as `ops` takes them, with the private keys from the cluster's own state: its
    /// refresh, plan checks and apply never depend on its keys' secret, which the refresh checks and the apply
    /// writes back. A cluster CA the user brought has its key in the secret and in the configuration
    /// (`ca_private_key_wo`) alone: an apply that is given it has it, and nothing else signs with that CA.
    /// `None` before the cluster exists.
    pub fn ops_spec(&self) -> Option<Result<Spec, OpError>> {
        let spec = self.spec.known()?;
        Some(spec.to_ops().map(|mut s| {
            if let Some(keys) = self.keys_held() {
                s.cas.cluster_ca.key_pem = keys.ca_key;
                s.cas.etcd_peer_ca.key_pem = keys.etcd_peer_ca_key;
                s.cas.etcd_client_ca.key_pem = keys.etcd_client_ca_key;
                s.service_account_key = keys.service_account_key;
                s.next_service_account_key =
                    Some(keys.next_service_account_key.clone()).filter(|k| !k.is_empty());
                // The next CAs' certificates are in the spec while the CAs rotate; their keys only here.
                if let Some(next) = &mut s.next_cas {
                    next.cluster_ca.key_pem = keys.next_ca_key;
                    next.etcd_peer_ca.key_pem = keys.next_etcd_peer_ca_key;
                    next.etcd_client_ca.key_pem = keys.next_etcd_client_ca_key;
                }
            }
            s
        }))
    }

    /// The keys the cluster holds: those in its state, with the key of a cluster CA the user brought from this
    /// apply's configuration when it was given (`ca_private_key_wo`, and `next_ca_private_key_wo` for the next
    /// one while the CAs rotate; empty otherwise).
    pub fn keys_held(&self) -> Option<ha_ops::cluster_keys::ClusterKeys> {
        let mut keys = self.private_keys.known().and_then(PrivateKeys::keys)?;
        if keys.brings_own_ca()
            && let Some(key) = self.ca_private_key_wo.known()
        {
            keys.ca_key = key.clone();
        }
        if keys.brings_own_next_ca()
            && let Some(key) = self.next_ca_private_key_wo.known()
        {
            keys.next_ca_key = key.clone();
        }
        Some(keys)
    }

    /// Whether the cluster runs on a cluster CA its user brought (`ca_certificate` with `ca_private_key_wo`): its
    /// state keeps the other CA keys and that one's as an empty string.
    pub fn brings_own_ca(&self) -> bool {
        self.private_keys
            .known()
            .and_then(PrivateKeys::keys)
            .is_some_and(|k| k.brings_own_ca())
    }

    /// Whether the cluster keeps its keys in its own secret (`ca_key_store = "secret_manager"`).
    pub fn keys_in_secret(&self) -> bool {
        self.ca_key_store.known().map(String::as_str) == Some(key_store::SECRET_MANAGER)
    }
}

/// The `backup` block: where etcd snapshots go before every change that touches etcd.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Backup {
    pub bucket: Val<String>,
    pub prefix: Val<String>,
    pub keep: Val<i64>,
    pub stop_on_failure: Val<bool>,
    pub kms_key_name: Val<String>,
}

/// The `restore` block: how, and how many times, etcd was recovered on purpose.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    pub generation: Val<i64>,
    pub source: Val<String>,
    pub snapshot: Val<String>,
}

/// One attribute of the `restore` block as the spec carries it (null without the block).
fn restore_part<T: Clone>(r: &Val<Restore>, f: impl Fn(&Restore) -> &Val<T>) -> Val<T> {
    match r {
        Val::Known(r) => f(r).clone(),
        Val::Null => Val::Null,
        Val::Unknown => Val::Unknown,
    }
}

/// The recovery generation a model asks for (0 without a `restore` block).
pub(super) fn restore_generation(m: &ClusterModel) -> Option<i64> {
    match &m.restore {
        Val::Known(r) => r.generation.known().copied(),
        Val::Null => Some(0),
        Val::Unknown => None,
    }
}

/// Whether this change raises `restore.generation`: the plan then recovers etcd (`domain::recovery`).
pub fn recovery_planned(prior: Option<&ClusterModel>, p: &ClusterModel) -> bool {
    match (prior.and_then(restore_generation), restore_generation(p)) {
        (Some(old), Some(new)) => new > old,
        _ => false,
    }
}

pub fn spec_of(p: &ClusterModel, prior: Option<&ClusterSpec>) -> ClusterSpec {
    let carried =
        |f: fn(&ClusterSpec) -> &Val<String>| prior.map(f).cloned().unwrap_or(Val::Unknown);
    ClusterSpec {
        id: p.id.clone(),
        name: p.name.clone(),
        project: p.project.clone(),
        region: p.region.clone(),
        zone: p.zone.clone(),
        multizone: p.multizone.clone(),
        etcd_quorum_read: p.etcd_quorum_read.clone(),
        machine_type: p.machine_type.clone(),
        image: p.image.clone(),
        boot_disk_size_gb: p.boot_disk_size_gb.clone(),
        data_disk_size_gb: p.data_disk_size_gb.clone(),
        data_disk_type: p.data_disk_type.clone(),
        network: p.network.clone(),
        subnetwork: p.subnetwork.clone(),
        tags: known_or_default(&p.tags),
        labels: known_or_default(&p.effective_labels),
        api_port: p.api_port.clone(),
        service_cluster_ip_range: p.service_cluster_ip_range.clone(),
        dns_domain: p.dns_domain.clone(),
        external_ip: carried(|s| &s.external_ip),
        ca_certificate: carried(|s| &s.ca_certificate),
        ca_private_key: carried(|s| &s.ca_private_key),
        etcd_peer_ca_certificate: carried(|s| &s.etcd_peer_ca_certificate),
        etcd_peer_ca_private_key: carried(|s| &s.etcd_peer_ca_private_key),
        etcd_client_ca_certificate: carried(|s| &s.etcd_client_ca_certificate),
        etcd_client_ca_private_key: carried(|s| &s.etcd_client_ca_private_key),
        service_account_key: carried(|s| &s.service_account_key),
        deletion_protection: p.deletion_protection.clone(),
        etcd_version: p.etcd_version.clone(),
        kubernetes_version: p.kubernetes_version.clone(),
        certificate_validity: p.certificate_validity.clone(),
        certificate_renew_before: p.certificate_renew_before.clone(),
        service_account: p.service_account.clone(),
        service_account_scopes: p.service_account_scopes.clone(),
        restore_generation: restore_part(&p.restore, |r| &r.generation),
        restore_source: restore_part(&p.restore, |r| &r.source),
        restore_snapshot: restore_part(&p.restore, |r| &r.snapshot),
        backup_bucket: backup_part(&p.backup, |b| &b.bucket),
        backup_prefix: backup_part(&p.backup, |b| &b.prefix),
        backup_keep: backup_part(&p.backup, |b| &b.keep),
        backup_stop_on_failure: backup_part(&p.backup, |b| &b.stop_on_failure),
        backup_kms_key_name: backup_part(&p.backup, |b| &b.kms_key_name),
        keys_secret: carried(|s| &s.keys_secret),
        secrets_encryption_key: p.secrets_encryption_key.clone(),
        // An empty list is no list: the spec stays as specs stored before the setting, so nothing plans a change.
        secrets_decryption_keys: match &p.secrets_decryption_keys {
            Val::Known(keys) if keys.is_empty() => Val::Null,
            v => v.clone(),
        },
        service_account_key_rotation: p.service_account_key_rotation.clone(),
        ca_rotation: p.ca_rotation.clone(),
        // Set when the cluster is made, kept after: a cluster made before has none (`ClusterSpec::admin_group`).
        admin_group: prior.map_or_else(
            || Val::Known(ha_domain::admin_access::BOUND_GROUP.into()),
            |s| s.admin_group.clone(),
        ),
    }
}

/// The spec with its keys moved to the cluster's secret: the key attributes null, and the secret's path, known
/// from the project and name, so a replica's plan sees a known `cluster` that rolls nothing.
pub fn keys_to_secret(p: &mut ClusterModel) {
    let path = match (p.project.known(), p.name.known()) {
        (Some(project), Some(name)) => Val::Known(ha_ops::cluster_keys::secret_path(project, name)),
        _ => Val::Unknown,
    };
    let Val::Known(spec) = &mut p.spec else {
        return;
    };
    // An imported cluster has no CA keys anywhere: they stay empty, as a replica's plan reads "cannot sign" from
    // them (`replica::check_can_sign`); only its service-account key moves.
    let imported = spec.ca_private_key.known().is_some_and(|k| k.is_empty());
    if !imported {
        spec.ca_private_key = Val::Null;
        spec.etcd_peer_ca_private_key = Val::Null;
        spec.etcd_client_ca_private_key = Val::Null;
    }
    spec.service_account_key = Val::Null;
    spec.keys_secret = path;
}

/// One setting of the `backup` block: null without the block, unknown while the block is.
fn backup_part<T: Clone>(b: &Val<Backup>, f: fn(&Backup) -> &Val<T>) -> Val<T> {
    match b {
        Val::Known(b) => f(b).clone(),
        Val::Null => Val::Null,
        Val::Unknown => Val::Unknown,
    }
}
