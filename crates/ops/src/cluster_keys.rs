//! The cluster's private keys (its three CA keys and the service-account signing key) in a Secret Manager secret of
//! their own, so that no replica's `cluster` input in Terraform state carries them (docs/guides/secrets.md). The
//! provider reads them when it signs a replica's certificates or mints its own etcd client certificate; no master
//! reads them (its own keys are in its replica's secret), so the secret has no reader binding: only principals
//! that may read every secret of the project (the provider's own, owners) can.
//!
//! The secret's path is in every replica's `cluster` input; the keys read from it are checked against the CA
//! certificates that input carries before anything is signed with them, so a secret that was overwritten fails
//! closed rather than signing with a key no master trusts.

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};

use serde::{Deserialize, Serialize};

use ha_pki::{CertKey, ClusterCas};
use ha_settings::Settings;

use super::cloud::Cloud;
pub use super::error::BroughtKey;
use super::error::{OpError, Result};
use super::shared::replica_labels;
use super::spec::Spec;

/// The four private keys, as the secret holds them (JSON); during a rotation, the next ones beside them.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterKeys {
    pub ca_key: String,
    pub etcd_peer_ca_key: String,
    pub etcd_client_ca_key: String,
    pub service_account_key: String,
    /// The key a rotation of the service-account key made (`domain::service_account_rotation`), until it becomes
    /// the key; empty otherwise, and absent from the secret then, so secrets written before rotations read the same.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_service_account_key: String,
    /// The keys of the CAs a rotation of the CAs made (`domain::ca_rotation`), until they become the CAs; empty
    /// otherwise, and absent from the secret then. Their certificates are the second of each CA certificate
    /// attribute of the cluster while the rotation is under way.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_ca_key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_etcd_peer_ca_key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_etcd_client_ca_key: String,
}

impl std::fmt::Debug for ClusterKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKeys(<redacted>)")
    }
}

impl ClusterKeys {
    pub fn of(cas: &ClusterCas, service_account_key: &str) -> ClusterKeys {
        ClusterKeys {
            ca_key: cas.cluster_ca.key_pem.clone(),
            etcd_peer_ca_key: cas.etcd_peer_ca.key_pem.clone(),
            etcd_client_ca_key: cas.etcd_client_ca.key_pem.clone(),
            service_account_key: service_account_key.to_string(),
            ..Default::default()
        }
    }

    /// The CAs whose certificates are `certs`, with these keys; an error when a key is not its certificate's.
    /// An imported cluster's secret holds no CA key at all (masters never hold them): its CAs keep empty keys, and
    /// only its service-account key is checked.
    pub fn with_certs(&self, certs: &ClusterCas) -> Result<ClusterCas> {
        let pair = |cert: &CertKey, key: &str| CertKey {
            cert_pem: cert.cert_pem.clone(),
            key_pem: key.to_string(),
        };
        let cas = ClusterCas {
            cluster_ca: pair(&certs.cluster_ca, &self.ca_key),
            etcd_peer_ca: pair(&certs.etcd_peer_ca, &self.etcd_peer_ca_key),
            etcd_client_ca: pair(&certs.etcd_client_ca, &self.etcd_client_ca_key),
        };
        if !self.imported() {
            // Loading each CA checks that its key is the certificate's.
            cas.issuers()?;
        }
        ha_pki::service_account_public_key(&self.service_account_key)?;
        if !self.next_service_account_key.is_empty() {
            ha_pki::service_account_public_key(&self.next_service_account_key)?;
        }
        Ok(cas)
    }

    /// The next CAs whose certificates are `next_certs` (none without a rotation of the CAs), with the next keys;
    /// an error when a key is not its certificate's, or the secret holds none for a rotation under way.
    pub fn next_with_certs(&self, next_certs: Option<&ClusterCas>) -> Result<Option<ClusterCas>> {
        let Some(certs) = next_certs else {
            return Ok(None);
        };
        let pair = |cert: &CertKey, key: &str| CertKey {
            cert_pem: cert.cert_pem.clone(),
            key_pem: key.to_string(),
        };
        let cas = ClusterCas {
            cluster_ca: pair(&certs.cluster_ca, &self.next_ca_key),
            etcd_peer_ca: pair(&certs.etcd_peer_ca, &self.next_etcd_peer_ca_key),
            etcd_client_ca: pair(&certs.etcd_client_ca, &self.next_etcd_client_ca_key),
        };
        cas.issuers()?;
        Ok(Some(cas))
    }

    /// The cluster CA's key alone missing: a cluster CA the user brought, whose key the cluster's state does not
    /// keep (it is in the secret, and in the user's configuration).
    pub fn brings_own_ca(&self) -> bool {
        self.ca_key.is_empty() && !self.imported()
    }

    /// While the CAs rotate, the next cluster CA's key alone missing: a next CA the user brought
    /// (`next_ca_certificate`), whose key the state does not keep either.
    pub fn brings_own_next_ca(&self) -> bool {
        self.next_ca_key.is_empty() && !self.next_etcd_peer_ca_key.is_empty()
    }

    /// Whether `found` (what the secret holds) is these keys; for a cluster CA the user brought (current or next)
    /// and whose key is not at hand, whether it holds the others and a key for that CA (`with_certs` and
    /// `next_with_certs` check it pairs at use).
    pub fn held_by(&self, found: &ClusterKeys) -> bool {
        let (current, next) = (self.brings_own_ca(), self.brings_own_next_ca());
        let blanked = ClusterKeys {
            ca_key: if current {
                String::new()
            } else {
                found.ca_key.clone()
            },
            next_ca_key: if next {
                String::new()
            } else {
                found.next_ca_key.clone()
            },
            ..found.clone()
        };
        (!current || !found.ca_key.is_empty())
            && (!next || !found.next_ca_key.is_empty())
            && blanked == *self
    }

    /// These keys, with the key of each brought cluster CA they lack taken from `found` (what the secret holds
    /// now) when it holds one that is that CA's, under either name: the end of a rotation makes the next CA's key
    /// the CA's. `certificates` are the cluster CA's, the current then, while the CAs rotate, the next. So a
    /// secret written again for another reason (a stage of a rotation) keeps a brought key the user did not give
    /// again; `Err` says which one is nowhere.
    pub fn completed_from(
        &self,
        found: Option<&ClusterKeys>,
        certificates: &[String],
    ) -> std::result::Result<ClusterKeys, BroughtKey> {
        let mut keys = self.clone();
        let slots = [
            (self.brings_own_ca(), BroughtKey::Current, 0),
            (self.brings_own_next_ca(), BroughtKey::Next, 1),
        ];
        for (missing, which, i) in slots {
            if !missing {
                continue;
            }
            let cert = certificates.get(i).ok_or(which)?;
            let key = found
                .into_iter()
                .flat_map(|f| [&f.ca_key, &f.next_ca_key])
                .find(|k| !k.is_empty() && ha_pki::is_key_of(cert, k))
                .ok_or(which)?;
            match which {
                BroughtKey::Current => keys.ca_key = key.clone(),
                BroughtKey::Next => keys.next_ca_key = key.clone(),
            }
        }
        Ok(keys)
    }

    /// No CA key at all: an imported cluster's, whose secret keeps its service-account key alone.
    fn imported(&self) -> bool {
        [
            &self.ca_key,
            &self.etcd_peer_ca_key,
            &self.etcd_client_ca_key,
        ]
        .iter()
        .all(|k| k.is_empty())
    }

    fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("four strings always serialize")
    }
}

/// `projects/<project>/secrets/<cluster>-cluster-keys`: what a replica's `cluster` input names.
pub fn secret_path(project: &str, cluster: &str) -> String {
    format!(
        "projects/{project}/secrets/{}",
        ha_domain::names::cluster_keys_secret(cluster)
    )
}

/// Keys read or written by this process, by secret path: every replica of a plan reads the same secret, and a
/// second Google client per replica costs ~20 ms of CPU (`make bench`). A process is one Terraform command, and
/// the keys are checked against the certificates at every use, so a secret rewritten meanwhile cannot be signed
/// with unnoticed.
static READ: LazyLock<Mutex<HashMap<String, ClusterKeys>>> = LazyLock::new(Default::default);

fn remember(path: &str, keys: &ClusterKeys) {
    READ.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_string(), keys.clone());
}

/// Writes the keys to the cluster's secret (made with the cluster's label, so its delete finds it), with no reader
/// binding. Writing the same keys again adds nothing. Returns the secret's path.
pub async fn write(cloud: &Cloud, cluster: &str, keys: &ClusterKeys) -> Result<String> {
    let id = ha_domain::names::cluster_keys_secret(cluster);
    let secrets = cloud.secrets().await?;
    let version = secrets
        .put(
            &id,
            &replica_labels(cluster, &BTreeMap::new()),
            &keys.to_json(),
            None,
        )
        .await?;
    let path = secrets.path(&id);
    tracing::info!("{cluster}: CA keys in secret {path} (version {version})");
    remember(&path, keys);
    Ok(path)
}

/// One read from Secret Manager at a time: the replicas of a plan are refreshed ten at a time, and all but the first
/// then find the keys in memory instead of each building a client and reading the same secret.
static READING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn remembered(path: &str) -> Option<ClusterKeys> {
    READ.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(path)
        .cloned()
}

/// The keys in the secret at `path`; `None` when the secret or its every version is gone.
pub async fn read(settings: &Settings, path: &str) -> Result<Option<ClusterKeys>> {
    if let Some(keys) = remembered(path) {
        return Ok(Some(keys));
    }
    let _one_at_a_time = READING.lock().await;
    if let Some(keys) = remembered(path) {
        return Ok(Some(keys));
    }
    let (project, id) = parse(path)?;
    let secrets = ha_secrets::Secrets::connect(settings, project).await?;
    let Some(payload) = secrets.read(id, None).await? else {
        return Ok(None);
    };
    let keys: ClusterKeys = serde_json::from_slice(&payload).map_err(|e| {
        OpError::Other(format!(
            "secret {path} does not hold a cluster's keys as this provider writes them ({e}); apply the \
             cluster to write them again from its state"
        ))
    })?;
    remember(path, &keys);
    Ok(Some(keys))
}

/// Fills `spec`'s CA keys and service-account key from its keys secret, when it names one and carries no keys
/// itself (a cluster made before the secret carries them in its spec; an imported one has none anywhere). The
/// cluster's own settings carry its keys from its state (`ClusterModel::ops_spec`), all but the key of a cluster
/// CA the user brought, which it is given only in an apply: its refresh does not depend on the secret either.
pub async fn fill(settings: &Settings, spec: &mut Spec) -> Result<()> {
    let Some(path) = spec.keys_secret.clone() else {
        return Ok(());
    };
    if !spec.cas.cluster_ca.key_pem.is_empty() || !spec.cas.etcd_client_ca.key_pem.is_empty() {
        return Ok(());
    }
    let (cas, keys) = resolve(settings, &path, &spec.name, &spec.cas).await?;
    spec.cas = cas;
    spec.next_cas = keys.next_with_certs(spec.next_cas.as_ref()).map_err(|e| {
        OpError::Refused(
            format!("Cluster {}'s next CA keys in secret {path} are not the keys of its next CA certificates", spec.name),
            format!(
                "The secret was overwritten ({e}). Run `terraform apply`: the cluster's refresh finds the secret \
                 out of line and its apply writes the keys in its state back, before any replica's change."
            ),
        )
    })?;
    spec.service_account_key = keys.service_account_key;
    spec.next_service_account_key = Some(keys.next_service_account_key).filter(|k| !k.is_empty());
    Ok(())
}

/// The CAs whose certificates are `certs`, with their keys from the secret at `path`, and the service-account
/// key; refused, naming the secret and the way out, when the secret is gone or holds other keys.
async fn resolve(
    settings: &Settings,
    path: &str,
    cluster: &str,
    certs: &ClusterCas,
) -> Result<(ClusterCas, ClusterKeys)> {
    let keys = read(settings, path).await?.ok_or_else(|| {
        OpError::Refused(
            format!(
                "Cluster {cluster}'s CA keys are missing: secret {path} does not exist or has no enabled version"
            ),
            "Nothing can be signed for its replicas until they are back. Run `terraform apply`: the cluster's \
             refresh finds the secret missing and its apply writes it again from the cluster's state, before any \
             replica's change."
                .into(),
        )
    })?;
    let cas = keys.with_certs(certs).map_err(|e| {
        OpError::Refused(
            format!("Cluster {cluster}'s CA keys in secret {path} are not the keys of its CA certificates"),
            format!(
                "The secret was overwritten ({e}). Run `terraform apply`: the cluster's refresh finds the secret \
                 out of line and its apply writes the keys in its state back, before any replica's change."
            ),
        )
    })?;
    Ok((cas, keys))
}

/// Whether the cluster's secret holds exactly `keys`; read fresh, never from this process's memory (refresh).
pub async fn holds(cloud: &Cloud, cluster: &str, keys: &ClusterKeys) -> Result<bool> {
    Ok(found(cloud, cluster)
        .await?
        .is_some_and(|found| keys.held_by(&found)))
}

/// What the cluster's secret holds now, read fresh; `None` when it is gone or holds no keys as this provider
/// writes them.
pub async fn found(cloud: &Cloud, cluster: &str) -> Result<Option<ClusterKeys>> {
    let secrets = cloud.secrets().await?;
    let id = ha_domain::names::cluster_keys_secret(cluster);
    Ok(secrets
        .read(&id, None)
        .await?
        .and_then(|payload| serde_json::from_slice::<ClusterKeys>(&payload).ok()))
}

/// `projects/<project>/secrets/<id>` into the project and the id.
fn parse(path: &str) -> Result<(&str, &str)> {
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", project, "secrets", id] if !project.is_empty() && !id.is_empty() => {
            Ok((project, id))
        }
        _ => Err(OpError::Other(format!(
            "{path:?} is not a secret's path (projects/<project>/secrets/<id>)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_project_and_secret_and_nothing_else_is_one() {
        assert_eq!(
            parse(&secret_path("proj", "prod")).unwrap(),
            ("proj", "prod-cluster-keys")
        );
        for bad in [
            "",
            "projects/proj/secrets/",
            "projects//secrets/x",
            "projects/proj/secrets/x/versions/1",
            "proj/x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_pair_only_with_their_own_certificates() {
        let cas = ClusterCas::generate("prod").unwrap();
        let sa = ha_pki::service_account_key().unwrap();
        let keys = ClusterKeys::of(&cas, &sa);
        assert_eq!(keys.with_certs(&cas).unwrap(), cas);
        let other = ClusterCas::generate("other").unwrap();
        let err = keys.with_certs(&other).unwrap_err().to_string();
        assert!(err.contains("does not match"), "{err}");
        let swapped = ClusterKeys {
            etcd_peer_ca_key: keys.etcd_client_ca_key.clone(),
            ..keys.clone()
        };
        assert!(swapped.with_certs(&cas).is_err());
        assert!(
            format!("{keys:?}").contains("redacted") && !format!("{keys:?}").contains("PRIVATE")
        );
    }

    /// A cluster whose CA the user brought keeps that CA's key in the secret, not in state: the secret holds the
    /// keys when it holds the other three and some key for that CA; one missing, or another key changed, is not.
    #[test]
    fn a_brought_cas_key_is_looked_for_in_the_secret_alone() {
        let cas = ClusterCas::generate("prod").unwrap();
        let sa = ha_pki::service_account_key().unwrap();
        let full = ClusterKeys::of(&cas, &sa);
        let state = ClusterKeys {
            ca_key: String::new(),
            ..full.clone()
        };
        assert!(state.brings_own_ca() && !full.brings_own_ca());
        assert!(state.held_by(&full) && full.held_by(&full));
        assert!(!state.held_by(&state), "a secret without the CA's key");
        assert!(!full.held_by(&state));
        let other_sa = ClusterKeys {
            service_account_key: ha_pki::service_account_key().unwrap(),
            ..full.clone()
        };
        assert!(!state.held_by(&other_sa));
    }

    /// While a brought CA rotates, the state lacks the next CA's key too: the secret holds the keys when it holds
    /// some key for each. Written again (a stage of the rotation), each missing key is taken from what the secret
    /// holds under either name, only when it is that CA's: the end of the rotation finds the CA's key under
    /// `next_ca_key`; a secret with neither, or another CA's key, leaves the write refused, naming which.
    #[test]
    fn a_brought_next_cas_key_is_kept_from_the_secret_under_either_name() {
        let cas = ClusterCas::generate("prod").unwrap();
        let next = ClusterCas::generate_next("prod", "1").unwrap();
        let sa = ha_pki::service_account_key().unwrap();
        let full = ClusterKeys {
            next_ca_key: next.cluster_ca.key_pem.clone(),
            next_etcd_peer_ca_key: next.etcd_peer_ca.key_pem.clone(),
            next_etcd_client_ca_key: next.etcd_client_ca.key_pem.clone(),
            ..ClusterKeys::of(&cas, &sa)
        };
        let state = ClusterKeys {
            ca_key: String::new(),
            next_ca_key: String::new(),
            ..full.clone()
        };
        assert!(state.brings_own_ca() && state.brings_own_next_ca());
        assert!(!full.brings_own_next_ca() && !ClusterKeys::of(&cas, &sa).brings_own_next_ca());
        assert!(state.held_by(&full));
        let without_next = ClusterKeys {
            next_ca_key: String::new(),
            ..full.clone()
        };
        assert!(
            !state.held_by(&without_next),
            "a secret without the next CA's key"
        );
        let certs = [
            cas.cluster_ca.cert_pem.clone(),
            next.cluster_ca.cert_pem.clone(),
        ];
        assert_eq!(state.completed_from(Some(&full), &certs), Ok(full.clone()));
        assert_eq!(
            state.completed_from(Some(&without_next), &certs),
            Err(BroughtKey::Next)
        );
        assert_eq!(state.completed_from(None, &certs), Err(BroughtKey::Current));
        // The end: the next CA is the CA, its key found where the rotation kept it.
        let promoted = ClusterKeys {
            ca_key: String::new(),
            next_ca_key: String::new(),
            next_etcd_peer_ca_key: String::new(),
            next_etcd_client_ca_key: String::new(),
            ..state.clone()
        };
        let whole = promoted.completed_from(Some(&full), &certs[1..]).unwrap();
        assert_eq!(whole.ca_key, next.cluster_ca.key_pem);
        // Another CA's key under the right name is no key of this CA.
        let swapped = ClusterKeys {
            ca_key: next.cluster_ca.key_pem.clone(),
            next_ca_key: String::new(),
            ..full.clone()
        };
        assert_eq!(
            promoted.completed_from(Some(&swapped), &certs[..1]),
            Err(BroughtKey::Current)
        );
        // Keys the state holds whole are written as they are.
        assert_eq!(full.completed_from(None, &[]), Ok(full.clone()));
    }

    /// An imported cluster's secret holds its service-account key alone: its CAs pair with no key, and only the
    /// service-account key is checked. One CA key missing among others is no import: refused.
    #[test]
    fn an_imported_clusters_keys_are_its_service_account_key_alone() {
        let cas = ClusterCas::generate("prod").unwrap();
        let sa = ha_pki::service_account_key().unwrap();
        let imported = ClusterKeys {
            ca_key: String::new(),
            etcd_peer_ca_key: String::new(),
            etcd_client_ca_key: String::new(),
            service_account_key: sa.clone(),
            ..Default::default()
        };
        let paired = imported.with_certs(&cas).unwrap();
        for ca in [
            &paired.cluster_ca,
            &paired.etcd_peer_ca,
            &paired.etcd_client_ca,
        ] {
            assert!(ca.key_pem.is_empty());
        }
        assert_eq!(paired.cluster_ca.cert_pem, cas.cluster_ca.cert_pem);
        let one_missing = ClusterKeys {
            etcd_peer_ca_key: String::new(),
            ..ClusterKeys::of(&cas, &sa)
        };
        assert!(one_missing.with_certs(&cas).is_err());
        let no_key = ClusterKeys {
            service_account_key: "not a key".into(),
            ..imported
        };
        assert!(no_key.with_certs(&cas).is_err());
    }

    /// Against ha-sim's Secret Manager. Each case has its own cluster name, so this process's memory of what it
    /// read or wrote never answers for another.
    #[tokio::test]
    async fn keys_are_refused_when_their_secret_is_gone_or_holds_another_clusters() {
        let sim = ha_gce::tests::Sim::start().await;
        let settings = Settings {
            secret_manager_endpoint: Some(format!("http://127.0.0.1:{}/", sim.port)),
            ..sim.settings()
        };
        let cloud = Cloud {
            compute: sim.compute().await,
            settings: settings.clone(),
            project: "proj".into(),
        };
        let cas = ClusterCas::generate("prod").unwrap();
        let keys = ClusterKeys::of(&cas, &ha_pki::service_account_key().unwrap());
        let refusal = |r: Result<(ClusterCas, ClusterKeys)>| match r {
            Err(OpError::Refused(summary, detail)) => format!("{summary}. {detail}"),
            other => panic!("not refused: {:?}", other.map(|_| ())),
        };

        let gone = secret_path("proj", "gone");
        let said = refusal(resolve(&settings, &gone, "gone", &cas).await);
        assert!(said.contains(&gone) && said.contains("missing"), "{said}");

        // Another cluster's keys under this one's name, written past this process's memory.
        let other = ClusterCas::generate("other").unwrap();
        let foreign = ClusterKeys::of(&other, &keys.service_account_key);
        cloud
            .secrets()
            .await
            .unwrap()
            .put(
                &ha_domain::names::cluster_keys_secret("swapped"),
                &BTreeMap::new(),
                &foreign.to_json(),
                None,
            )
            .await
            .unwrap();
        let swapped = secret_path("proj", "swapped");
        let said = refusal(resolve(&settings, &swapped, "swapped", &cas).await);
        assert!(
            said.contains("not the keys of its CA certificates"),
            "{said}"
        );

        let path = write(&cloud, "prod", &keys).await.unwrap();
        assert_eq!(path, secret_path("proj", "prod"));
        let (read_back, read_keys) = resolve(&settings, &path, "prod", &cas).await.unwrap();
        assert_eq!((read_back, &read_keys), (cas.clone(), &keys));
        // A rotation's next key goes with the others, and is absent from the payload when there is none (secrets
        // written before rotations read the same).
        assert!(
            !String::from_utf8(keys.to_json())
                .unwrap()
                .contains("next_service_account_key")
        );
        let rotating = ClusterKeys {
            next_service_account_key: ha_pki::service_account_key().unwrap(),
            ..keys.clone()
        };
        write(&cloud, "prod", &rotating).await.unwrap();
        let (_, read_keys) = resolve(&settings, &path, "prod", &cas).await.unwrap();
        assert_eq!(read_keys, rotating);
        assert!(!holds(&cloud, "prod", &keys).await.unwrap());
        write(&cloud, "prod", &keys).await.unwrap();
        assert!(holds(&cloud, "prod", &keys).await.unwrap());
        assert!(!holds(&cloud, "prod", &foreign).await.unwrap());
        assert!(!holds(&cloud, "gone", &keys).await.unwrap());
    }
}
