//! A master VM's startup configuration (docs/master-config.md): the instance metadata whose `user-data` is a
//! `#cloud-config` that writes every static pod manifest, kubelet file and TLS file the master runs from. Pure:
//! a [`MasterConfig`] in, strings out. Nothing about Terraform or GCE calls.
//!
//! Kubernetes version: [`MasterConfig::kubernetes`] says which release the manifests run and how it reaches
//! Google Cloud (the in-tree provider reading `gce.conf`, or Google's cloud-controller-manager reading the same
//! file); `domain::kubernetes_version` decides it from the cluster's `kubernetes_version`. Quorum reads: kube-apiserver removed `--etcd-quorum-read` in 1.13
//! (kubernetes/kubernetes#69527) and has read from etcd with linearizable reads ever since, so `true` is
//! satisfied without a flag (passing the flag would stop the apiserver: unknown flag) and `false` cannot be
//! honoured; [`check`] refuses it so the user hears it rather than getting quorum reads anyway.

mod addons;
pub use addons::CLUSTER_ADMINS_GROUP;
#[cfg(test)]
mod boot_tests;
pub mod encryption;
pub mod healthcheck_port;
mod host;
pub mod k8s;
pub mod keys;
#[cfg(test)]
mod keys_tests;
mod manifests;
pub mod read;
#[cfg(test)]
mod read_tests;
pub mod runtime;
#[cfg(test)]
mod runtime_tests;
/// Rendered-master fixtures; ha-ops's contract tests use them too (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod tests;

pub use encryption::{SecretsEncryption, SecretsKey};
pub use k8s::{CloudConfig, Kubeconfig, KubeletConfiguration, Pod, WriteFile};
pub use keys::KeyBundle;

use ha_pki::{ClusterCas, ReplicaCerts};
use ipnet::Ipv4Net;
use std::net::Ipv4Addr;

/// What every master of a cluster built before `kubernetes_version` ran: image tag of kube-apiserver,
/// controller-manager and scheduler (and the kubelet the image should carry).
pub const LEGACY_KUBERNETES_VERSION: &str = "v1.28.15";

/// How a release's controllers reach Google Cloud (see `domain::kubernetes_version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloudProvider {
    /// kube-controller-manager and the kubelet run `--cloud-provider=gce`.
    InTree,
    /// The same on a release where it is off by default: the `DisableCloudProviders` gates turn it back on.
    InTreeByGate,
    /// `--cloud-provider=external`; this cloud-controller-manager image runs the cloud controllers, its program
    /// at `ccm_program` (`domain::kubernetes_version::KO_CCM` or `DOCKERFILE_CCM`).
    External {
        ccm_image: String,
        ccm_program: String,
    },
}

/// The Kubernetes release a master runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesRelease {
    /// Tag of kube-apiserver, kube-controller-manager and kube-scheduler (`v1.35.0`).
    pub image_tag: String,
    pub cloud: CloudProvider,
    /// Controller managers take part in leader migration (the in-tree → external hand-over of the cloud
    /// controllers during a roll).
    pub leader_migration: bool,
    pub autoscaler_image: String,
}

impl KubernetesRelease {
    /// What masters ran before the version was a setting.
    pub fn legacy() -> KubernetesRelease {
        KubernetesRelease {
            image_tag: LEGACY_KUBERNETES_VERSION.into(),
            cloud: CloudProvider::InTree,
            leader_migration: false,
            autoscaler_image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.28.0".into(),
        }
    }

    /// The kubelet's and kube-controller-manager's `--cloud-provider`.
    pub fn cloud_provider_flag(&self) -> &'static str {
        match self.cloud {
            CloudProvider::External { .. } => "external",
            _ => "gce",
        }
    }

    /// `--feature-gates` the kubelet and kube-controller-manager need, if any.
    pub fn feature_gates(&self) -> Option<&'static str> {
        matches!(self.cloud, CloudProvider::InTreeByGate)
            .then_some("DisableCloudProviders=false,DisableKubeletCloudCredentialProviders=false")
    }
}

/// Guest paths of the contract (docs/master-config.md §4), shared by the renderer and its tests.
pub mod paths {
    pub const MANIFESTS: &str = "/etc/kubernetes/manifests";
    /// What the addon manager applies (kube-up's addon directory).
    pub const ADDONS: &str = "/etc/kubernetes/addons";
    pub const SRV: &str = "/etc/srv/kubernetes";
    pub const ETCD_CA: &str = "/etc/srv/kubernetes/etcd-ca.crt";
    pub const ETCD_PEER_CRT: &str = "/etc/srv/kubernetes/etcd-peer.crt";
    pub const ETCD_PEER_KEY: &str = "/etc/srv/kubernetes/etcd-peer.key";
    pub const ETCD_CLIENT_CA: &str = "/etc/srv/kubernetes/pki/etcd-apiserver-ca.crt";
    pub const ETCD_SERVER_CRT: &str = "/etc/srv/kubernetes/pki/etcd-apiserver-server.crt";
    pub const ETCD_SERVER_KEY: &str = "/etc/srv/kubernetes/pki/etcd-apiserver-server.key";
    pub const ETCD_APISERVER_CLIENT_CRT: &str = "/etc/srv/kubernetes/pki/etcd-apiserver-client.crt";
    pub const ETCD_APISERVER_CLIENT_KEY: &str = "/etc/srv/kubernetes/pki/etcd-apiserver-client.key";
    pub const CA: &str = "/etc/srv/kubernetes/pki/ca.crt";
    pub const APISERVER_CRT: &str = "/etc/srv/kubernetes/pki/apiserver.crt";
    pub const APISERVER_KEY: &str = "/etc/srv/kubernetes/pki/apiserver.key";
    pub const APISERVER_KUBELET_CLIENT_CRT: &str =
        "/etc/srv/kubernetes/pki/apiserver-kubelet-client.crt";
    pub const APISERVER_KUBELET_CLIENT_KEY: &str =
        "/etc/srv/kubernetes/pki/apiserver-kubelet-client.key";
    /// The health-check sidecar's client certificate towards its own apiserver (kops' `kube-apiserver-healthcheck`).
    pub const HEALTHCHECK_CLIENT_CRT: &str =
        "/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.crt";
    pub const HEALTHCHECK_CLIENT_KEY: &str =
        "/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.key";
    pub const SERVICE_ACCOUNT_KEY: &str = "/etc/srv/kubernetes/pki/service-account.key";
    /// Its public half (PKIX), for kube-apiserver's `--service-account-key-file`
    /// ([`ha_pki::service_account_public_key`] says why not the key itself).
    pub const SERVICE_ACCOUNT_PUB: &str = "/etc/srv/kubernetes/pki/service-account.pub";
    pub const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";
    pub const KUBELET_KUBECONFIG: &str = "/var/lib/kubelet/kubeconfig";
    pub const KUBELET_DROPIN: &str = "/etc/systemd/system/kubelet.service.d/10-ha-master.conf";
    pub const MONIT_KUBELET: &str = "/etc/monit/conf.d/kubelet";
    pub const GCE_CONF: &str = "/etc/gce.conf";
    pub const ETCD_DATA: &str = "/var/lib/etcd";
}

/// Whether this member founds the etcd cluster, joins one (after `etcdctl member add`), or is forced to be the
/// whole cluster (disaster recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialState {
    New,
    Existing,
    /// An existing member restarted as a one-member cluster from its own data (etcd's `--force-new-cluster`),
    /// for disaster recovery only (`domain::recovery`).
    ForceNewCluster,
    /// A new one-member cluster restored from a Cloud Storage snapshot ([`MasterConfig::restore`]) before etcd
    /// first starts (`domain::restore`): etcd then finds its data directory made and ignores the initial flags.
    RestoreFromSnapshot,
}

impl InitialState {
    pub fn as_flag(self) -> &'static str {
        match self {
            InitialState::New | InitialState::RestoreFromSnapshot => "new",
            InitialState::Existing | InitialState::ForceNewCluster => "existing",
        }
    }
}

/// The CA certificates a master trusts. Only certificates: CA keys never go to a master. Each is one PEM
/// certificate, or a bundle of the current and next CA while the cluster's CAs rotate (`domain::ca_rotation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaCerts {
    pub cluster_ca: String,
    pub etcd_peer_ca: String,
    pub etcd_client_ca: String,
}

impl From<&ClusterCas> for CaCerts {
    fn from(cas: &ClusterCas) -> CaCerts {
        CaCerts {
            cluster_ca: cas.cluster_ca.cert_pem.clone(),
            etcd_peer_ca: cas.etcd_peer_ca.cert_pem.clone(),
            etcd_client_ca: cas.etcd_client_ca.cert_pem.clone(),
        }
    }
}

/// How a master gets its private keys (docs/master-config.md §11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyDelivery {
    /// Written by cloud-init from `user-data`, as every master made before Secret Manager: whoever may read the
    /// instance (`roles/compute.viewer`) or reach its metadata server reads them. Only for a VM made that way that
    /// is not being rebuilt.
    InMetadata,
    /// Fetched at first boot from `secret` (`projects/<project>/secrets/<id>`) at the Secret Manager `origin`
    /// (`https://secretmanager.googleapis.com`), by the VM's service account; see [`keys`].
    SecretManager { secret: String, origin: String },
}

/// Everything one master's startup configuration depends on.
#[derive(Clone, PartialEq, Eq)]
pub struct MasterConfig {
    pub cluster_name: String,
    /// The instance name, which is also the etcd member name.
    pub replica_name: String,
    pub internal_ip: Ipv4Addr,
    pub static_ip: Ipv4Addr,
    /// The API server's port inside the guest (443 in the contract).
    pub api_port: u16,
    pub service_cluster_ip_range: Ipv4Net,
    pub dns_domain: String,
    /// Must be true; see the module docs.
    pub etcd_quorum_read: bool,
    pub multizone: bool,
    pub project: String,
    pub zone: String,
    /// Every member of `--initial-cluster`, including this one: (member name, internal IP).
    pub initial_cluster: Vec<(String, Ipv4Addr)>,
    pub initial_state: InitialState,
    pub cas: CaCerts,
    pub certs: ReplicaCerts,
    /// The cluster-wide service account signing key (PEM, from [`ha_pki::service_account_key`]): every
    /// replica must sign and verify tokens with the same key.
    pub service_account_key_pem: String,
    /// Public keys (PKIX PEM) the API servers verify tokens with besides the signing key's: the other key while
    /// the service-account key is rotated (`domain::service_account_rotation`), empty otherwise. Only public
    /// halves reach a master: it signs with one key alone.
    pub service_account_also_verifies: Vec<String>,
    /// Whether etcd's data disk is attached (device [`DATA_DEVICE`]): etcd's data directory then lives on it,
    /// so the VM can be deleted and created again on the same data. Replicas made before data disks keep etcd on
    /// the boot disk.
    pub data_disk: bool,
    /// The etcd container's image (`registry.k8s.io/etcd:3.5.1-0`): the cluster's `etcd_version`, pinned to a patch.
    pub etcd_image: String,
    /// The cluster's `kubernetes_version`: images and cloud integration.
    pub kubernetes: KubernetesRelease,
    /// The snapshot etcd's data is restored from before etcd first starts; only with
    /// [`InitialState::RestoreFromSnapshot`].
    pub restore: Option<SnapshotRestore>,
    /// Where the private keys travel: in `user-data`, or in the replica's secret.
    pub keys: KeyDelivery,
    /// The keys the API server encrypts Secrets in etcd with and still reads (the cluster's
    /// `secrets_encryption_key` and `secrets_decryption_keys`), when it has any; see [`encryption`].
    pub secrets_encryption: Option<SecretsEncryption>,
}

/// Where a restoring master fetches its snapshot, with the VM's own service account (`gcloud storage cp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRestore {
    /// `gs://bucket/object`.
    pub url: String,
    /// The Cloud Storage JSON API's endpoint when it is not Google's (the provider's `storage_custom_endpoint`),
    /// as gcloud's `CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE` wants it (`https://host/storage/v1/`).
    pub storage_endpoint: Option<String>,
    /// `--bump-revision` for the restore, with `--mark-compacted`: set only for an etcd that has the flags
    /// (3.5.10+, `domain::restore::revision_bump`), so watchers that held a pre-loss revision relist.
    pub bump_revision: Option<u64>,
    /// The snapshot's SHA-256 as recorded when it was taken (lower-case hex, the object's `ha-sha256`): the fetch
    /// refuses other bytes before etcd sees them. None for a snapshot taken by hand, which records none.
    pub sha256: Option<String>,
}

/// The device name etcd's data disk is attached under (`/dev/disk/by-id/google-master-pd`), as kube-up names it.
pub const DATA_DEVICE: &str = "master-pd";
/// Where the data disk is mounted in the guest.
pub const DATA_MOUNT: &str = "/mnt/disks/master-pd";

impl std::fmt::Debug for MasterConfig {
    // Holds private keys; print only what identifies the master.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterConfig")
            .field("cluster_name", &self.cluster_name)
            .field("replica_name", &self.replica_name)
            .field("internal_ip", &self.internal_ip)
            .field("static_ip", &self.static_ip)
            .field("initial_cluster", &self.initial_cluster)
            .field("initial_state", &self.initial_state)
            .finish_non_exhaustive()
    }
}

/// A configuration no master could run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterError {
    #[error(
        "etcd_quorum_read = false cannot be honoured: kube-apiserver has always used quorum reads since 1.13"
    )]
    QuorumReadOff,
    #[error("initial cluster does not list this replica {name:?} at {ip}")]
    NotInInitialCluster { name: String, ip: Ipv4Addr },
    #[error("initial cluster lists member {0:?} twice")]
    DuplicateMember(String),
    #[error("service range {0} is too small for the kubernetes and DNS service IPs")]
    ServiceRangeTooSmall(Ipv4Net),
    #[error(
        "a restore from a snapshot needs its snapshot and etcd's data disk, and is the only start that takes a snapshot"
    )]
    RestoreMisconfigured,
    #[error("the cluster's service-account key cannot be used: {0}")]
    ServiceAccountKey(String),
    #[error(
        "a master that encrypts Secrets must fetch its keys from Secret Manager: the encryption key never goes in instance metadata"
    )]
    EncryptionKeyInMetadata,
    #[error("the {0} a master trusts must be one CA certificate, or two while the CAs rotate")]
    CaBundle(&'static str),
}

/// The checks [`render_user_data`] relies on; call it before rendering (at plan time where possible).
pub fn check(cfg: &MasterConfig) -> Result<(), MasterError> {
    if !cfg.etcd_quorum_read {
        return Err(MasterError::QuorumReadOff);
    }
    if !cfg
        .initial_cluster
        .iter()
        .any(|(n, ip)| *n == cfg.replica_name && *ip == cfg.internal_ip)
    {
        return Err(MasterError::NotInInitialCluster {
            name: cfg.replica_name.clone(),
            ip: cfg.internal_ip,
        });
    }
    for (i, (name, _)) in cfg.initial_cluster.iter().enumerate() {
        if cfg.initial_cluster[..i].iter().any(|(n, _)| n == name) {
            return Err(MasterError::DuplicateMember(name.clone()));
        }
    }
    ha_pki::service_account_public_key(&cfg.service_account_key_pem)
        .map_err(|e| MasterError::ServiceAccountKey(e.to_string()))?;
    for public in &cfg.service_account_also_verifies {
        ha_pki::public_key_fingerprints(public)
            .ok()
            .filter(|f| f.len() == 1)
            .ok_or_else(|| {
                MasterError::ServiceAccountKey(
                    "a key the API servers also verify with is not one PKIX public key".into(),
                )
            })?;
    }
    // Two while the CAs rotate (`domain::ca_rotation`); a bundle of anything else is a mistake the components
    // would each report differently, or not at all.
    for (what, bundle) in [
        ("cluster CA", &cfg.cas.cluster_ca),
        ("etcd peer CA", &cfg.cas.etcd_peer_ca),
        ("etcd client CA", &cfg.cas.etcd_client_ca),
    ] {
        if !ha_pki::certificates_in(bundle).is_ok_and(|c| c.len() <= 2) {
            return Err(MasterError::CaBundle(what));
        }
    }
    let restoring = cfg.initial_state == InitialState::RestoreFromSnapshot;
    if restoring != cfg.restore.is_some() || (restoring && !cfg.data_disk) {
        return Err(MasterError::RestoreMisconfigured);
    }
    if cfg.secrets_encryption.is_some() && cfg.keys == KeyDelivery::InMetadata {
        return Err(MasterError::EncryptionKeyInMetadata);
    }
    // The DNS service IP is the 10th address, as kube-up's 10.0.0.10.
    if cfg.service_cluster_ip_range.prefix_len() > 28 {
        return Err(MasterError::ServiceRangeTooSmall(
            cfg.service_cluster_ip_range,
        ));
    }
    Ok(())
}

/// The `kubernetes` service's ClusterIP: the first address of the service range (also in the API certificate).
pub fn first_service_ip(range: &Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range.network()).wrapping_add(1))
}

/// The cluster DNS service IP: the tenth address of the service range.
pub fn dns_service_ip(range: &Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range.network()).wrapping_add(10))
}

/// The `#cloud-config` user-data: every file of the contract, plus what a real VM needs to start the kubelet.
pub fn render_user_data(cfg: &MasterConfig) -> String {
    let (write_files, fetch) = match &cfg.keys {
        KeyDelivery::InMetadata => (host::files(cfg), None),
        KeyDelivery::SecretManager { secret, origin } => {
            let (keys, mut public): (Vec<WriteFile>, Vec<WriteFile>) =
                host::files(cfg).into_iter().partition(keys::is_key_file);
            let bundle = keys::bundle(&keys.iter().collect::<Vec<_>>());
            public.insert(
                0,
                WriteFile {
                    path: keys::FETCH_SCRIPT.into(),
                    content: keys::FETCH_SCRIPT_TEXT.into(),
                    owner: "root:root".into(),
                    permissions: "0755".into(),
                },
            );
            let fetch = argv(&[
                "sh",
                keys::FETCH_SCRIPT,
                secret,
                &bundle.sha256,
                origin.trim_end_matches('/'),
            ]);
            (public, Some(fetch))
        }
    };
    let cloud = CloudConfig {
        // monit restarts a wedged kubelet; the image may not ship it.
        packages: vec!["monit".into()],
        write_files,
        fs_setup: if cfg.data_disk {
            vec![k8s::FsSetup {
                label: DATA_DEVICE.into(),
                filesystem: "ext4".into(),
                device: format!("/dev/disk/by-id/google-{DATA_DEVICE}"),
                overwrite: false,
            }]
        } else {
            vec![]
        },
        mounts: if cfg.data_disk {
            vec![argv(&[
                &format!("/dev/disk/by-id/google-{DATA_DEVICE}"),
                DATA_MOUNT,
                "ext4",
                "defaults,nofail,discard",
                "0",
                "2",
            ])]
        } else {
            vec![]
        },
        runcmd: {
            // The keys first: nothing after it may start without them (the script retries until it has them).
            let mut cmds: Vec<Vec<String>> = fetch.into_iter().collect();
            // A data disk grown by a roll is attached to a new VM: its first boot grows the filesystem to the
            // disk (online, ext4), after cloud-init's `mounts`. On a disk already filled, resize2fs does nothing.
            if cfg.data_disk {
                cmds.push(argv(&[
                    "resize2fs",
                    &format!("/dev/disk/by-id/google-{DATA_DEVICE}"),
                ]));
            }
            // containerd and the release's kubelet, where the image lacks them (`runtime`): before the kubelet
            // unit is started, after the files its drop-in names are written.
            cmds.push(argv(&["sh", runtime::SCRIPT]));
            cmds.push(argv(&["systemctl", "daemon-reload"]));
            // Before the kubelet starts the sidecar: the load balancer's checks reach an API off port 443.
            cmds.extend(healthcheck_port::start(cfg.api_port));
            cmds.extend([
                argv(&["systemctl", "enable", "--now", "kubelet"]),
                argv(&["systemctl", "enable", "monit"]),
                argv(&["systemctl", "restart", "monit"]),
            ]);
            cmds
        },
    };
    let body = serde_norway::to_string(&cloud).expect("plain structs always serialize");
    format!("#cloud-config\n{body}")
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The bundle the replica's secret must hold for [`KeyDelivery::SecretManager`] (`None` when the keys are in
/// `user-data`): the same bytes, and so the same digest, that [`render_user_data`] names.
pub fn key_bundle(cfg: &MasterConfig) -> Option<KeyBundle> {
    match cfg.keys {
        KeyDelivery::InMetadata => None,
        KeyDelivery::SecretManager { .. } => {
            let files = host::files(cfg);
            let keys: Vec<&WriteFile> = files.iter().filter(|f| keys::is_key_file(f)).collect();
            Some(keys::bundle(&keys))
        }
    }
}

/// Instance metadata items: `user-data` (the contract) and `cluster-name` (informational).
pub fn metadata_items(cfg: &MasterConfig) -> Vec<(String, String)> {
    vec![
        ("user-data".into(), render_user_data(cfg)),
        ("cluster-name".into(), cfg.cluster_name.clone()),
    ]
}
