//! What a master is made of: the one list of the cluster's settings that a master VM is built from, and the one
//! derivation of the [`Build`] a roll compares.
//!
//! The Terraform side fills a `MasterSpec` from the cluster's attributes (`src/resources/spec.rs`, at plan and at
//! apply alike) and ops builds VMs from it (`ha_ops::build`). A roll is decided by comparing builds, and a build
//! is derived here by naming *every* field: a new field does not compile until it is either part of the build (a
//! change rolls the masters) or listed among the exclusions with the reason, as Cluster API's
//! KubeadmControlPlane compares a machine's whole spec less a listed few.

use std::collections::BTreeMap;

use ipnet::Ipv4Net;

use super::roll::{Build, ETCD_IMAGE, KUBERNETES_VERSION};
use super::rotation::Stage;
use super::{ca_rotation, service_account_rotation};
use super::{etcd_version, kubernetes_version};

/// A master VM's settings, as plain values with every default applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterSpec {
    pub machine_type: String,
    pub image: String,
    pub boot_disk_size_gb: i64,
    pub data_disk_size_gb: i64,
    /// `pd-ssd` unless the cluster says otherwise ([`DEFAULT_DATA_DISK_TYPE`]).
    pub data_disk_type: String,
    pub network: String,
    pub subnetwork: Option<String>,
    pub tags: Vec<String>,
    /// The cluster's labels (its own and the provider's defaults); each VM adds its replica's own.
    pub labels: BTreeMap<String, String>,
    pub multizone: bool,
    pub etcd_quorum_read: bool,
    pub api_port: u16,
    pub service_range: Ipv4Net,
    pub dns_domain: String,
    /// The etcd version masters run (`3.4`, `3.5` or a pinned patch): `domain::etcd_version` maps it to an image.
    pub etcd_version: String,
    /// The Kubernetes release masters run (`1.35.0`, or `1.35` for the pinned patch): `domain::kubernetes_version`.
    pub kubernetes_version: String,
    /// Who the VMs run as, and their OAuth scopes as URLs, sorted (`domain::service_account::scope_urls`).
    pub service_account: String,
    pub service_account_scopes: Vec<String>,
    /// The Secret Manager version holding the key Secrets are encrypted with (`domain::secrets_encryption`), if
    /// any.
    pub secrets_encryption_key: Option<String>,
    /// The versions whose keys the API servers still read Secrets with but no longer write with, during a change
    /// of key (`domain::secrets_encryption::change`).
    pub secrets_decryption_keys: Vec<String>,
    /// Where a rotation of the service-account key stands (`domain::service_account_rotation`): each stage is
    /// another build, so every replica rolls onto it.
    pub service_account_key_rotation: Stage,
    /// Where a rotation of the cluster's CAs stands (`domain::ca_rotation`): each stage is another build, so every
    /// replica rolls onto it.
    pub ca_rotation: Stage,
}

/// The build setting naming the encryption key's version.
pub const SECRETS_ENCRYPTION_KEY: &str = "secrets_encryption_key";

/// The build setting naming the versions only read, comma-separated.
pub const SECRETS_DECRYPTION_KEYS: &str = "secrets_decryption_keys";

/// As kops does for etcd volumes on GCE: etcd is sensitive to disk latency.
pub const DEFAULT_DATA_DISK_TYPE: &str = "pd-ssd";

impl MasterSpec {
    /// What these settings make of a master: everything a roll compares, as the plan shows it. The one mapping
    /// from settings to a build, so plan and apply compare the same strings.
    ///
    /// A key added to the map changes the digest of every VM made before it, so upgrading the provider would
    /// roll every master: a new setting is left out at the value masters ran before it existed, as the etcd
    /// image and the Kubernetes release are (`acceptance-tests/tests/provider_upgrade.rs` fails otherwise).
    pub fn build(&self) -> Build {
        let MasterSpec {
            machine_type,
            image,
            boot_disk_size_gb,
            data_disk_size_gb,
            tags,
            multizone,
            etcd_quorum_read,
            api_port,
            service_range,
            dns_domain,
            etcd_version,
            kubernetes_version,
            service_account,
            service_account_scopes,
            secrets_encryption_key,
            secrets_decryption_keys,
            service_account_key_rotation,
            ca_rotation,
            // Not part of a build, and why:
            // - a disk keeps the type it was made with; the setting applies to replicas created later;
            data_disk_type: _,
            // - another network is another identity, refused at plan (`roll::network_move`); another subnetwork
            //   is a move that keeps the VM's data and member (`roll::Placement`), judged from the VM itself;
            network: _,
            subnetwork: _,
            // - labels change in place (`setLabels`), with no restart.
            labels: _,
        } = self;
        let mut tags = tags.clone();
        tags.sort();
        let mut settings: BTreeMap<String, String> = [
            ("image", image.clone()),
            ("boot_disk_size_gb", boot_disk_size_gb.to_string()),
            ("tags", tags.join(",")),
            ("multizone", multizone.to_string()),
            ("etcd_quorum_read", etcd_quorum_read.to_string()),
            ("api_port", api_port.to_string()),
            ("service_cluster_ip_range", service_range.to_string()),
            ("dns_domain", dns_domain.clone()),
            ("service_account", service_account.clone()),
            ("service_account_scopes", service_account_scopes.join(",")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        // The etcd image is part of a master. The default's image is left out, so a build made before the version
        // was a setting (every master ran that image) keeps its digest and `master_settings`: upgrading the
        // provider rolls no replica, and going back to the default restores the original build.
        let etcd_image = etcd_version::image(etcd_version);
        if etcd_image != etcd_version::image(etcd_version::LEGACY) {
            settings.insert(ETCD_IMAGE.into(), etcd_image);
        }
        // The Kubernetes release likewise: builds from before the setting ran 1.28.15 and keep their digest. A
        // version is shown as the patch it runs, so `1.33` and `1.33.5` are the same master.
        let release = kubernetes_version::parse(kubernetes_version);
        if release != kubernetes_version::parse(kubernetes_version::LEGACY)
            && let Some(v) = release
        {
            settings.insert(KUBERNETES_VERSION.into(), v.to_string());
        }
        // The encryption key only when there is one: masters made before it existed had none.
        if let Some(key) = secrets_encryption_key {
            settings.insert(SECRETS_ENCRYPTION_KEY.into(), key.clone());
        }
        // The keys only read likewise: each stage of a change of key rolls every master.
        if !secrets_decryption_keys.is_empty() {
            settings.insert(
                SECRETS_DECRYPTION_KEYS.into(),
                secrets_decryption_keys.join(","),
            );
        }
        if let Some(stage) = service_account_key_rotation.setting() {
            settings.insert(service_account_rotation::ATTRIBUTE.into(), stage.into());
        }
        if let Some(stage) = ca_rotation.setting() {
            settings.insert(ca_rotation::ATTRIBUTE.into(), stage.into());
        }
        Build {
            machine_type: machine_type.clone(),
            data_disk_gb: Some(*data_disk_size_gb),
            settings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MasterSpec {
        MasterSpec {
            machine_type: "e2-standard-2".into(),
            image: "cos".into(),
            boot_disk_size_gb: 20,
            data_disk_size_gb: 20,
            data_disk_type: DEFAULT_DATA_DISK_TYPE.into(),
            network: "default".into(),
            subnetwork: None,
            tags: vec!["b".into(), "a".into()],
            labels: BTreeMap::new(),
            multizone: false,
            etcd_quorum_read: true,
            api_port: 443,
            service_range: "10.0.0.0/16".parse().unwrap(),
            dns_domain: "cluster.local".into(),
            etcd_version: etcd_version::LEGACY.into(),
            kubernetes_version: kubernetes_version::LEGACY.into(),
            service_account: "default".into(),
            service_account_scopes: vec!["https://www.googleapis.com/auth/compute".into()],
            secrets_encryption_key: None,
            secrets_decryption_keys: Vec::new(),
            service_account_key_rotation: Stage::Steady,
            ca_rotation: Stage::Steady,
        }
    }

    /// The exclusions are no roll: a change to any of them leaves the build, and so every VM's digest, alone.
    #[test]
    fn the_excluded_settings_change_no_build() {
        let base = spec().build();
        let changes: [fn(&mut MasterSpec); 4] = [
            |s| s.data_disk_type = "pd-balanced".into(),
            |s| s.network = "other".into(),
            |s| s.subnetwork = Some("masters".into()),
            |s| {
                s.labels.insert("team".into(), "infra".into());
            },
        ];
        for change in changes {
            let mut s = spec();
            change(&mut s);
            assert_eq!(s.build(), base);
        }
    }

    /// Every other setting is a roll: a change to it changes the build.
    #[test]
    fn every_other_setting_changes_the_build() {
        let base = spec().build();
        let changes: [fn(&mut MasterSpec); 20] = [
            |s| s.machine_type = "e2-standard-4".into(),
            |s| s.image = "cos-2".into(),
            |s| s.boot_disk_size_gb = 30,
            |s| s.data_disk_size_gb = 30,
            |s| s.tags.push("c".into()),
            |s| s.multizone = true,
            |s| s.etcd_quorum_read = false,
            |s| s.api_port = 6443,
            |s| s.service_range = "10.1.0.0/16".parse().unwrap(),
            |s| s.dns_domain = "example.local".into(),
            |s| s.etcd_version = "3.5".into(),
            |s| s.kubernetes_version = "1.35".into(),
            |s| s.service_account = "masters@p.iam.gserviceaccount.com".into(),
            |s| {
                s.service_account_scopes =
                    vec!["https://www.googleapis.com/auth/cloud-platform".into()]
            },
            |s| s.secrets_encryption_key = Some("projects/p/secrets/k/versions/1".into()),
            |s| s.secrets_decryption_keys = vec!["projects/p/secrets/k/versions/2".into()],
            |s| s.service_account_key_rotation = Stage::Started,
            |s| s.service_account_key_rotation = Stage::Switched,
            |s| s.ca_rotation = Stage::Started,
            |s| s.ca_rotation = Stage::Switched,
        ];
        for (i, change) in changes.into_iter().enumerate() {
            let mut s = spec();
            change(&mut s);
            assert_ne!(s.build(), base, "change {i} should roll");
        }
    }

    /// The order tags are given in is no change.
    #[test]
    fn tags_are_compared_as_a_set() {
        let mut s = spec();
        s.tags.reverse();
        assert_eq!(s.build().digest(), spec().build().digest());
    }

    /// The digest of a master built at the legacy defaults is pinned: a change here would roll every existing
    /// master on upgrade.
    #[test]
    fn the_legacy_build_keeps_its_digest() {
        let b = spec().build();
        assert!(!b.settings.contains_key(ETCD_IMAGE));
        assert!(!b.settings.contains_key(KUBERNETES_VERSION));
        assert_eq!(b.digest(), PINNED_LEGACY_DIGEST);
    }

    const PINNED_LEGACY_DIGEST: &str = "5bcfa21a1ee65f4c";
}
