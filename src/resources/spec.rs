//! The cluster spec: everything a replica inherits from its cluster, handed over through a Terraform reference
//! (`cluster = ha_master_cluster.prod.spec`), never through a side channel. It carries the CA keys replicas sign
//! their certificates with, so the attribute is sensitive: it lives only in state and on the masters.
//!
//! At plan time the settings are known (they come from configuration) and the generated parts (IP, CAs) are
//! unknown, so replicas can validate their placement before anything exists.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tfplugin_framework::{Val, typed_object};

use ha_domain::master_spec::{DEFAULT_DATA_DISK_TYPE, MasterSpec};
use ha_domain::rotation::{Rotation, Stage};
use ha_ops::OpError;
use ha_ops::spec::Spec;
use ha_pki::{CertKey, ClusterCas};

typed_object! {
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClusterSpec {
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
    pub api_port: Val<i64>,
    pub service_cluster_ip_range: Val<String>,
    pub dns_domain: Val<String>,
    pub external_ip: Val<String>,
    pub ca_certificate: Val<String>,
    pub ca_private_key: Val<String>,
    pub etcd_peer_ca_certificate: Val<String>,
    pub etcd_peer_ca_private_key: Val<String>,
    pub etcd_client_ca_certificate: Val<String>,
    pub etcd_client_ca_private_key: Val<String>,
    /// The cluster-wide service-account signing key: every API server must sign and verify tokens with it.
    pub service_account_key: Val<String>,
    /// The cluster's `deletion_protection`: a replica's delete refuses to remove the last voting member while on.
    pub deletion_protection: Val<bool>,
    /// The cluster's `etcd_version`: which etcd image the masters run.
    pub etcd_version: Val<String>,
    /// The cluster's `kubernetes_version`: which Kubernetes release the masters run.
    pub kubernetes_version: Val<String>,
    /// The cluster's `certificate_validity` and `certificate_renew_before` (durations): how long a replica's
    /// certificates live, and when a roll renews them.
    pub certificate_validity: Val<String>,
    pub certificate_renew_before: Val<String>,
    /// The cluster's `service_account` and `service_account_scopes`: who the master VMs run as.
    pub service_account: Val<String>,
    pub service_account_scopes: Val<Vec<String>>,
    /// The cluster's `restore.generation` (null without a `restore` block): a replica whose cluster raises it
    /// rejoins after the cluster's recovery instead of being replaced first.
    pub restore_generation: Val<i64>,
    /// The cluster's `restore.source` and `restore.snapshot` (null without them): with `snapshot`, the first
    /// replica to rejoin restores etcd from that snapshot, or from the newest backup (`domain::restore`).
    pub restore_source: Val<String>,
    pub restore_snapshot: Val<String>,
    /// The cluster's `backup` block (all null without one): replicas take the snapshots before their changes.
    pub backup_bucket: Val<String>,
    pub backup_prefix: Val<String>,
    pub backup_keep: Val<i64>,
    pub backup_stop_on_failure: Val<bool>,
    pub backup_kms_key_name: Val<String>,
    /// The Secret Manager secret (`projects/<project>/secrets/<cluster>-cluster-keys`) that holds the CA keys and
    /// the service-account key, which the provider reads when it signs (`ops::cluster_keys`): set, the key
    /// attributes above are null, so no replica's state holds a private key. Null for a cluster that keeps them
    /// in this spec (made before the secret, `ca_key_store = "terraform_state"`) or has none (imported).
    pub keys_secret: Val<String>,
    /// The cluster's `secrets_encryption_key`: the Secret Manager version whose key the API servers encrypt
    /// Secrets with (`domain::secrets_encryption`); the provider reads the key itself only when it renders a
    /// master, so it is never in state. Null: Secrets are stored plain.
    pub secrets_encryption_key: Val<String>,
    /// The cluster's `secrets_decryption_keys`: versions whose keys the API servers still read Secrets with, during
    /// a change of key. Null when there are none, as in every spec stored before the setting.
    pub secrets_decryption_keys: Val<Vec<String>>,
    /// The cluster's `service_account_key_rotation` (null when no rotation is under way, as in every spec stored
    /// before the setting): which key the masters sign service-account tokens with, and which they verify.
    pub service_account_key_rotation: Val<String>,
    /// The cluster's `ca_rotation` (null when no rotation is under way, as in every spec stored before the
    /// setting): which CAs issue the masters' certificates, and which they trust. While one is under way, each CA
    /// certificate above is a bundle: the current CA, then the next.
    pub ca_rotation: Val<String>,
    /// The group `ha_admin_credentials` names when its `groups` is unset (`domain::admin_access`):
    /// `ha-master:cluster-admins` for clusters made since their masters bind it and a founding replica waits for
    /// the binding (`ReplicaStep::AwaitAdminBinding`); null for clusters made before and imported ones, whose
    /// default stays `system:masters` so that an upgrade neither plans a change nor meets a refusal.
    pub admin_group: Val<String>,
}}

/// What a `cluster` input must spell: the cluster's identity. Every other attribute may be left out, so that a
/// stand-in for a cluster not made yet (a Terragrunt `mock_outputs`, examples/terragrunt/) is four lines,
/// not one per attribute. Terraform fills what is left out with null; `ClusterSpec::stand_in` tells such a value
/// from a cluster's spec.
const INPUT_REQUIRES: [&str; 4] = ["name", "project", "region", "zone"];

impl ClusterSpec {
    /// The type of a replica's `cluster` input: the spec's object type, every attribute but [`INPUT_REQUIRES`]
    /// optional. A cluster's `spec` is the same object, so state and every stored value keep their type.
    pub fn input_type() -> tfplugin::value::Type {
        let mut t = <ClusterSpec as tfplugin_framework::model::TfType>::tf_type();
        if let tfplugin::value::Type::Object { attrs, optional } = &mut t {
            *optional = attrs
                .keys()
                .filter(|k| !INPUT_REQUIRES.contains(&k.as_str()))
                .cloned()
                .collect();
        }
        t
    }

    /// Whether this names a cluster without being its spec: a spec always carries its `id` and the settings
    /// every master is made of (known, or unknown while the cluster is planned), never null. Such a stand-in
    /// plans (with a warning) and never applies.
    pub fn stand_in(&self) -> bool {
        [&self.id, &self.machine_type, &self.image, &self.network]
            .iter()
            .any(|v| v.is_null())
    }

    /// What a plan says of a stand-in, and the apply's refusal of one.
    pub fn stand_in_words(&self) -> (String, String) {
        let name = self.name.known().map_or("", String::as_str);
        (
            format!("The replica's cluster input names cluster {name} but is not its spec"),
            "It carries none of the settings a master is made of: a stand-in such as a Terragrunt \
             `mock_outputs`, or an object written by hand. This plan shows the replica such a cluster would \
             have and cannot be applied: apply the cluster first and pass its spec \
             (`cluster = ha_master_cluster.<name>.spec`, or the cluster unit's `spec` output)."
                .to_string(),
        )
    }

    /// A spec stored before `deletion_protection` existed has it null; such a cluster is protected (the
    /// default), and saying so in refreshed state keeps the upgrade's plan empty.
    pub fn fill_from_older_state(&mut self) {
        if self.deletion_protection.is_null() {
            self.deletion_protection = Val::Known(true);
        }
        if self.data_disk_type.is_null() {
            self.data_disk_type = Val::Known(DEFAULT_DATA_DISK_TYPE.into());
        }
        if self.etcd_version.is_null() {
            self.etcd_version = Val::Known(ha_domain::etcd_version::LEGACY.into());
        }
        if self.certificate_validity.is_null() {
            self.certificate_validity =
                Val::Known(ha_domain::certificates::DEFAULT_VALIDITY.into());
        }
        if self.certificate_renew_before.is_null() {
            self.certificate_renew_before =
                Val::Known(ha_domain::certificates::DEFAULT_RENEW_BEFORE.into());
        }
        // Masters made before the setting run 1.28.15.
        if self.kubernetes_version.is_null() {
            self.kubernetes_version = Val::Known(ha_domain::kubernetes_version::LEGACY.into());
        }
        // Masters made before the setting run without a service account; the default gives them one, which
        // shows in the replicas' plan as a roll (`service_account` in `master_settings`).
        if self.service_account.is_null() {
            self.service_account = Val::Known(ha_domain::service_account::DEFAULT_EMAIL.into());
        }
        if self.service_account_scopes.is_null() {
            self.service_account_scopes = Val::Known(
                ha_domain::service_account::DEFAULT_SCOPES
                    .map(String::from)
                    .to_vec(),
            );
        }
    }

    /// What these settings make of a master, when every one of them is known (they come from configuration, so
    /// they are at plan, even while the cluster's IP and CAs are not).
    pub fn build(&self) -> Option<ha_domain::roll::Build> {
        self.master().ok().as_ref().map(MasterSpec::build)
    }

    /// What every master VM is made of, with the defaults a spec stored before a setting implies; an error names
    /// the first setting not known yet, or not valid.
    pub fn master(&self) -> Result<MasterSpec, OpError> {
        let s = self;
        let range = need(&s.service_cluster_ip_range, "service range")?;
        Ok(MasterSpec {
            machine_type: need(&s.machine_type, "machine_type")?,
            image: need(&s.image, "image")?,
            boot_disk_size_gb: need(&s.boot_disk_size_gb, "boot_disk_size_gb")?,
            data_disk_size_gb: need(&s.data_disk_size_gb, "data_disk_size_gb")?,
            data_disk_type: s
                .data_disk_type
                .known()
                .cloned()
                .unwrap_or_else(|| DEFAULT_DATA_DISK_TYPE.to_string()),
            network: need(&s.network, "network")?,
            subnetwork: s.subnetwork.known().cloned(),
            tags: s.tags.known().cloned().unwrap_or_default(),
            labels: s.labels.known().cloned().unwrap_or_default(),
            multizone: need(&s.multizone, "multizone")?,
            etcd_quorum_read: need(&s.etcd_quorum_read, "etcd_quorum_read")?,
            api_port: u16::try_from(need(&s.api_port, "api_port")?)
                .map_err(|_| OpError::Other("api_port is not a TCP port".into()))?,
            service_range: range.parse().map_err(|_| {
                OpError::Other(format!("service range {range:?} is not an IPv4 range"))
            })?,
            dns_domain: need(&s.dns_domain, "dns_domain")?,
            // A spec stored before these settings: the masters run what every master ran then.
            etcd_version: need_or(
                &s.etcd_version,
                ha_domain::etcd_version::LEGACY,
                "etcd_version",
            )?,
            kubernetes_version: need_or(
                &s.kubernetes_version,
                ha_domain::kubernetes_version::LEGACY,
                "kubernetes_version",
            )?,
            service_account: need(&s.service_account, "service_account")?,
            service_account_scopes: ha_domain::service_account::scope_urls(&need(
                &s.service_account_scopes,
                "service_account_scopes",
            )?)
            .map_err(|(summary, detail)| OpError::Other(format!("{summary}: {detail}")))?,
            secrets_encryption_key: match &s.secrets_encryption_key {
                Val::Null => None,
                v => Some(need(v, "secrets_encryption_key")?),
            },
            secrets_decryption_keys: match &s.secrets_decryption_keys {
                Val::Null => Vec::new(),
                v => need(v, "secrets_decryption_keys")?,
            },
            service_account_key_rotation: stage(
                &ha_domain::service_account_rotation::ROTATION,
                &s.service_account_key_rotation,
            )?,
            ca_rotation: stage(&ha_domain::ca_rotation::ROTATION, &s.ca_rotation)?,
        })
    }

    /// Whether a change from `old` to `self` gives a replica a new identity: another cluster, or another VPC
    /// network (members on two networks cannot reach each other). Another cluster replaces the replica; another
    /// network is refused at plan (`domain::roll::network_move`); every other change to what a master is made
    /// of, another subnetwork of the same network included, rolls it in place (`domain::roll`).
    pub fn changes_identity(&self, old: &ClusterSpec) -> bool {
        self.id != old.id || self.network != old.network
    }

    /// Whether the masters move to another subnetwork of the same network (`domain::roll::Placement`): judged by
    /// the subnetworks' names, so a name and its URL are the same subnetwork, and none set is the network's own.
    /// Unknown values are no move.
    pub fn moves_subnetwork(&self, old: &ClusterSpec) -> bool {
        let name = |s: &ClusterSpec| {
            let network = s.network.known()?;
            let sub = match &s.subnetwork {
                Val::Unknown => return None,
                v => v.known().map(String::as_str),
            };
            Some(ha_domain::roll::subnetwork_name(sub, network))
        };
        self.network == old.network
            && matches!((name(self), name(old)), (Some(a), Some(b)) if a != b)
    }
}

/// A setting that a spec stored before it existed leaves null: `legacy` then, as the masters made then ran.
fn need_or(v: &Val<String>, legacy: &str, what: &str) -> Result<String, OpError> {
    match v {
        Val::Null => Ok(legacy.to_string()),
        v => need(v, what),
    }
}

/// The stage of a rotation a spec records (`domain::rotation`); null is none under way.
fn stage(rotation: &Rotation, v: &Val<String>) -> Result<Stage, OpError> {
    match v {
        Val::Null => Ok(Stage::Steady),
        v => rotation
            .parse(Some(need(v, rotation.attribute)?.as_str()))
            .map_err(|(summary, detail)| OpError::Other(format!("{summary}: {detail}"))),
    }
}

/// The current and, while the CAs rotate, the next CA of one kind, from a CA certificate attribute (one
/// certificate, or a bundle of two during a rotation) and the key of the current one.
fn ca_pair(
    v: &Val<String>,
    key: String,
    what: &str,
) -> Result<(CertKey, Option<CertKey>), OpError> {
    let bundle = need(v, what)?;
    // What is not a bundle of certificates is taken as it is: loading the CA says what is wrong with it, where
    // it is used, as before rotations.
    let Ok(certs) = ha_pki::certificates_in(&bundle) else {
        return Ok((
            CertKey {
                cert_pem: bundle,
                key_pem: key,
            },
            None,
        ));
    };
    let mut certs = certs.into_iter();
    match (certs.next(), certs.next(), certs.next()) {
        (Some(current), next, None) => Ok((
            CertKey {
                cert_pem: current,
                key_pem: key,
            },
            next.map(|cert_pem| CertKey {
                cert_pem,
                key_pem: String::new(),
            }),
        )),
        _ => Err(OpError::Other(format!(
            "the cluster's {what} certificate holds more than a current and a next CA"
        ))),
    }
}

fn need<T: Clone>(v: &Val<T>, what: &str) -> Result<T, OpError> {
    v.known().cloned().ok_or_else(|| {
        OpError::Other(format!(
            "the cluster's {what} is not known yet; apply the cluster first (Terraform does when the \
             replica references `ha_master_cluster.<name>.spec`)"
        ))
    })
}

impl ClusterSpec {
    /// The settings as `ops` takes them: every value known, as at apply time. With a keys secret the keys are
    /// empty here, and `ops::ClusterCtx::new` reads them.
    pub fn to_ops(&self) -> Result<Spec, OpError> {
        let s = self;
        let in_secret = s.keys_secret.known().is_some();
        let key = |v: &Val<String>, what: &str| {
            if in_secret {
                Ok(String::new())
            } else {
                need(v, what)
            }
        };
        let (cluster_ca, next_cluster_ca) =
            ca_pair(&s.ca_certificate, key(&s.ca_private_key, "CA key")?, "CA")?;
        let (etcd_peer_ca, next_etcd_peer_ca) = ca_pair(
            &s.etcd_peer_ca_certificate,
            key(&s.etcd_peer_ca_private_key, "etcd peer CA key")?,
            "etcd peer CA",
        )?;
        let (etcd_client_ca, next_etcd_client_ca) = ca_pair(
            &s.etcd_client_ca_certificate,
            key(&s.etcd_client_ca_private_key, "etcd client CA key")?,
            "etcd client CA",
        )?;
        Ok(Spec {
            id: need(&s.id, "id")?,
            name: need(&s.name, "name")?,
            project: need(&s.project, "project")?,
            region: need(&s.region, "region")?,
            zone: need(&s.zone, "zone")?,
            master: s.master()?,
            external_ip: need(&s.external_ip, "external IP")?,
            cas: ClusterCas {
                cluster_ca,
                etcd_peer_ca,
                etcd_client_ca,
            },
            // While the CAs rotate each attribute holds the next CA too; its keys are only ever in the cluster's
            // secret, which `ClusterCtx::new` or the cluster's own state fills them in from.
            next_cas: match (next_cluster_ca, next_etcd_peer_ca, next_etcd_client_ca) {
                (Some(cluster_ca), Some(etcd_peer_ca), Some(etcd_client_ca)) => Some(ClusterCas {
                    cluster_ca,
                    etcd_peer_ca,
                    etcd_client_ca,
                }),
                (None, None, None) => None,
                _ => {
                    return Err(OpError::Other(
                        "the cluster's CA certificates do not all hold a next CA; apply the cluster again".into(),
                    ));
                }
            },
            service_account_key: key(&s.service_account_key, "service account key")?,
            // Only a cluster whose keys are in its secret rotates; `ClusterCtx::new` or the cluster's own state
            // fills it in.
            next_service_account_key: None,
            keys_secret: s.keys_secret.known().cloned(),
            // Unknown or absent (a state from before the setting): protected, the safe side.
            deletion_protection: s.deletion_protection.known() != Some(&false),
            certificate_validity: duration_or(
                &s.certificate_validity,
                ha_domain::certificates::DEFAULT_VALIDITY,
                "certificate_validity",
            )?,
            certificate_renew_before: duration_or(
                &s.certificate_renew_before,
                ha_domain::certificates::DEFAULT_RENEW_BEFORE,
                "certificate_renew_before",
            )?,
            backup: self.backup_policy(),
            restore_snapshot: self.snapshot_choice(),
            restore_generation: self.restore_generation.known().copied().unwrap_or(0),
            start_empty: self.starts_empty(),
        })
    }

    /// The `restore` block says `source = "empty"` (`domain::start_empty`).
    pub fn starts_empty(&self) -> bool {
        self.restore_source.known().map(String::as_str) == Some(ha_domain::start_empty::EMPTY)
    }

    /// The snapshot a `restore { source = "snapshot" }` asks for; none for any other source.
    pub fn snapshot_choice(&self) -> Option<ha_domain::restore::SnapshotChoice> {
        use ha_domain::restore::{SNAPSHOT, SnapshotChoice};
        if self.restore_source.known().map(String::as_str) != Some(SNAPSHOT) {
            return None;
        }
        Some(match self.restore_snapshot.known() {
            Some(url) => SnapshotChoice::Url(url.clone()),
            None => SnapshotChoice::Newest,
        })
    }

    /// The `backup` block as `domain::backup` takes it, with its defaults; none without a bucket.
    pub fn backup_policy(&self) -> Option<ha_domain::backup::Policy> {
        use ha_domain::backup::{DEFAULT_KEEP, Policy};
        Some(Policy {
            bucket: self.backup_bucket.known()?.clone(),
            prefix: self.backup_prefix.known().cloned().unwrap_or_default(),
            keep: self
                .backup_keep
                .known()
                .and_then(|k| u32::try_from(*k).ok())
                .unwrap_or(DEFAULT_KEEP),
            stop_on_failure: self.backup_stop_on_failure.known() != Some(&false),
            kms_key_name: self.backup_kms_key_name.known().cloned(),
        })
    }
}

/// A duration attribute of the spec; a state from before the setting has the default.
fn duration_or(v: &Val<String>, default: &str, what: &str) -> Result<std::time::Duration, OpError> {
    let s = v.known().map_or(default, String::as_str);
    tfplugin_framework::validator::parse_duration_within(s, ha_domain::certificates::MAX_LIFETIME)
        .map_err(|e| OpError::Other(format!("{what} {s:?}: {e}")))
}

#[cfg(test)]
mod tests {

    /// The defaults are lifetimes of a year and a month: past the one-day bound of time limits, within the
    /// certificates' own (a state without the settings must still reach ops).
    #[test]
    fn certificate_lifetimes_default_to_a_year_and_a_month_and_parse() {
        let day = 24 * 3600;
        let v = duration_or(&Val::Null, ha_domain::certificates::DEFAULT_VALIDITY, "v").unwrap();
        assert_eq!(v.as_secs(), 365 * day);
        let r = duration_or(
            &Val::Null,
            ha_domain::certificates::DEFAULT_RENEW_BEFORE,
            "r",
        )
        .unwrap();
        assert_eq!(r.as_secs(), 30 * day);
        assert!(duration_or(&Val::Known("87601h".into()), "1h", "certificate_validity").is_err());
    }
    use super::*;
    use tfplugin::value::{Type, Value};
    use tfplugin_framework::model::TfType;

    /// A spec with every setting null (unknown to the comparison) but those a case sets.
    fn spec() -> ClusterSpec {
        let Type::Object { attrs, .. } = ClusterSpec::tf_type() else {
            panic!("the spec is an object")
        };
        let v = Value::Object(attrs.keys().map(|k| (k.clone(), Value::Null)).collect());
        let mut s: ClusterSpec = tfplugin_framework::model::from_value(&v).unwrap();
        s.multizone = Val::Known(false);
        s.dns_domain = Val::Known("cluster.local".into());
        s.machine_type = Val::Known("e2-standard-2".into());
        s.labels = Val::Known(BTreeMap::new());
        s
    }

    #[test]
    fn only_another_cluster_or_network_is_a_new_identity() {
        let old = spec();
        let same = |f: fn(&mut ClusterSpec)| {
            let mut new = old.clone();
            f(&mut new);
            new.changes_identity(&old)
        };
        assert!(!same(|_| {}));
        // What a master is made of rolls in place.
        assert!(!same(
            |s| s.machine_type = Val::Known("e2-standard-4".into())
        ));
        assert!(!same(|s| s.image = Val::Known("img-2".into())));
        assert!(!same(|s| s.dns_domain = Val::Known("corp.example".into())));
        // Another network cannot reach the members; another cluster is another etcd.
        assert!(same(|s| s.network = Val::Known("other".into())));
        assert!(same(|s| s.id = Val::Known("p/r/other".into())));
        // Another subnetwork of the network is a roll that moves the internal IP.
        assert!(!same(|s| s.subnetwork = Val::Known("sub".into())));
    }

    #[test]
    fn a_subnetwork_move_is_judged_by_name() {
        let mut old = spec();
        old.network = Val::Known("default".into());
        old.subnetwork = Val::Null;
        let to = |sub: Val<String>| {
            let mut new = old.clone();
            new.subnetwork = sub;
            new.moves_subnetwork(&old)
        };
        assert!(to(Val::Known("masters-b".into())));
        // The network's own subnetwork, by name or by URL, is where the masters are.
        assert!(!to(Val::Known("default".into())));
        assert!(!to(Val::Known(
            "regions/us-central1/subnetworks/default".into()
        )));
        assert!(!to(Val::Null));
        assert!(!to(Val::Unknown));
        // Another network is not a subnetwork move: it is refused.
        let mut other = old.clone();
        other.network = Val::Known("prod".into());
        other.subnetwork = Val::Known("masters-b".into());
        assert!(!other.moves_subnetwork(&old));
    }
}
