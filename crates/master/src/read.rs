//! Reading a master's startup configuration back, for import: the files its `user-data` writes, and the few
//! settings they reveal. The inverse of [`super::render_user_data`] for what import needs; pure, like the rest of
//! this module. CA private keys are never among the files (see the module docs): they cannot be read back.

use std::collections::BTreeMap;

use super::k8s::{CloudConfig, KubeletConfiguration};
use super::keys::FETCH_SCRIPT;
use super::paths;

/// The files of one master's `#cloud-config`, by guest path; for a master whose keys are in Secret Manager,
/// with the secret they are in until [`MasterFiles::add_keys`] adds them.
#[derive(Clone, PartialEq, Eq)]
pub struct MasterFiles {
    files: BTreeMap<String, String>,
    keys_in: Option<KeysIn>,
}

/// The secret a master's keys are in, and the digest its bundle must have (the fetch script's arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeysIn {
    /// `projects/<project>/secrets/<id>`.
    pub secret: String,
    pub sha256: String,
}

impl KeysIn {
    /// The project and secret id of [`Self::secret`].
    pub fn project_and_id(&self) -> Option<(&str, &str)> {
        let rest = self.secret.strip_prefix("projects/")?;
        let (project, id) = rest.split_once("/secrets/")?;
        Some((project, id))
    }
}

// Holds private keys: print only the paths.
impl std::fmt::Debug for MasterFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.files.keys()).finish()
    }
}

/// Parses `user-data` as the provider renders it. An error says why it is not a master's configuration.
pub fn read_user_data(user_data: &str) -> Result<MasterFiles, String> {
    let body = user_data
        .strip_prefix("#cloud-config\n")
        .ok_or("the user-data is not a #cloud-config document")?;
    let cloud: CloudConfig = serde_norway::from_str(body)
        .map_err(|e| format!("the user-data does not parse as cloud-config: {e}"))?;
    let keys_in = cloud.runcmd.iter().find_map(|c| match c.as_slice() {
        [_, script, secret, sha256, _] if script == FETCH_SCRIPT => Some(KeysIn {
            secret: secret.clone(),
            sha256: sha256.clone(),
        }),
        _ => None,
    });
    Ok(MasterFiles {
        files: cloud
            .write_files
            .into_iter()
            .map(|f| (f.path, f.content))
            .collect(),
        keys_in,
    })
}

impl MasterFiles {
    pub fn get(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    /// Where the master's keys are, when they are not among its files.
    pub fn keys_in(&self) -> Option<&KeysIn> {
        self.keys_in.as_ref()
    }

    /// Adds the keys from the bundle read from [`Self::keys_in`]'s secret, checked against its digest.
    pub fn add_keys(&mut self, tar: &[u8]) -> Result<(), String> {
        let Some(keys_in) = &self.keys_in else {
            return Err("this master's keys are in its user-data, not in a secret".into());
        };
        let files = super::keys::unpack(tar, &keys_in.sha256)
            .map_err(|e| format!("{}: {e}", keys_in.secret))?;
        self.files.extend(files);
        self.keys_in = None;
        Ok(())
    }

    /// A file the contract requires, or a sentence naming it.
    pub fn require(&self, path: &str) -> Result<&str, String> {
        self.get(path)
            .ok_or_else(|| format!("the master configuration has no {path}"))
    }

    /// The value of `--<name>=` in a static pod manifest (argv elements are `--flag=value`, one per line).
    pub fn flag(&self, manifest: &str, name: &str) -> Option<String> {
        let needle = format!("--{name}=");
        let content = self.get(&format!("{}/{manifest}", paths::MANIFESTS))?;
        content.lines().find_map(|l| {
            let l = l
                .trim()
                .trim_start_matches("- ")
                .trim_matches(|c| c == '\'' || c == '"');
            l.strip_prefix(&needle).map(str::to_string)
        })
    }

    /// The etcd container's image (`registry.k8s.io/etcd:3.4.13-0`): the manifest's one `image:` line.
    pub fn etcd_image(&self) -> Option<String> {
        self.images("etcd.yaml").into_iter().next()
    }

    /// The kube-apiserver container's image (`registry.k8s.io/kube-apiserver:v1.35.0`), whose tag is the
    /// master's Kubernetes version; the manifest's other container is the health-check sidecar.
    pub fn apiserver_image(&self) -> Option<String> {
        self.images("kube-apiserver.yaml")
            .into_iter()
            .find(|i| i.contains("/kube-apiserver:"))
    }

    /// Every `image:` of a static pod manifest, in order.
    fn images(&self, manifest: &str) -> Vec<String> {
        let Some(content) = self.get(&format!("{}/{manifest}", paths::MANIFESTS)) else {
            return Vec::new();
        };
        content
            .lines()
            .filter_map(|l| {
                let l = l.trim().trim_start_matches("- ");
                l.strip_prefix("image:")
                    .map(|v| v.trim().trim_matches(|c| c == '\'' || c == '"').to_string())
            })
            .collect()
    }

    /// Whether `/etc/gce.conf` says `multizone = true`.
    pub fn multizone(&self) -> bool {
        self.get(paths::GCE_CONF).is_some_and(|c| {
            c.lines()
                .any(|l| l.split('=').map(str::trim).collect::<Vec<_>>() == ["multizone", "true"])
        })
    }

    /// The name of the key the API server encrypts Secrets with (`SecretsKey::name`, `ha-<16 hex>`): the first
    /// key of its `EncryptionConfiguration` when `secretbox` is its first provider. None for a master that writes
    /// them plain (with no configuration, or `identity` first while a key is being turned on or off).
    pub fn secrets_key_name(&self) -> Option<String> {
        let cfg = self.encryption()?;
        let first = cfg.resources.first()?.providers.first()?;
        first
            .secretbox
            .as_ref()?
            .keys
            .first()
            .map(|k| k.name.clone())
    }

    /// Every key's name the API server can read Secrets with, the written one first; empty for a master with
    /// no configuration.
    pub fn secrets_key_names(&self) -> Vec<String> {
        let Some(cfg) = self.encryption() else {
            return Vec::new();
        };
        cfg.resources
            .iter()
            .flat_map(|r| &r.providers)
            .filter_map(|p| p.secretbox.as_ref())
            .flat_map(|k| &k.keys)
            .map(|k| k.name.clone())
            .collect()
    }

    fn encryption(&self) -> Option<crate::encryption::EncryptionConfiguration> {
        serde_norway::from_str(self.get(crate::encryption::CONFIG_PATH)?).ok()
    }

    /// The kubelet's `clusterDomain` (the cluster's DNS domain).
    pub fn cluster_domain(&self) -> Option<String> {
        let cfg: KubeletConfiguration =
            serde_norway::from_str(self.get(paths::KUBELET_CONFIG)?).ok()?;
        Some(cfg.cluster_domain)
    }
}
