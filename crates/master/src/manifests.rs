//! The static pods of a master (docs/master-config.md §5–6), built as [`Pod`] values. Every flag is one
//! `--flag=value` argv element: the contract rejects positional arguments and shell wrappers.

use super::k8s::*;
use super::{CloudProvider, InitialState, MasterConfig, paths};
use std::collections::BTreeMap;

/// kops' apiserver health proxy (kubernetes/kops `cmd/kube-apiserver-healthcheck`), built by `ko` on
/// `gcr.io/distroless/static:nonroot`: its entrypoint is the program, so the manifest passes `args` only.
const HEALTHCHECK_IMAGE: &str = "registry.k8s.io/kops/kube-apiserver-healthcheck:1.28.0";
const ADDON_MANAGER_IMAGE: &str = "registry.k8s.io/addon-manager/kube-addon-manager:v9.1.6";
/// Plain HTTP port of the healthcheck sidecar, fixed in the program (kops `wellknownports.KubeAPIServerHealthCheck`;
/// it has no flag to change it). Legacy GCE HttpHealthChecks speak only HTTP, and kops points its GCE health check
/// here too, at `/healthz`, which the sidecar proxies to `https://127.0.0.1/healthz` (port 443: no flag either).
pub const HEALTHCHECK_PORT: u16 = 3990;

pub(super) fn flag(name: &str, value: impl std::fmt::Display) -> String {
    format!("--{name}={value}")
}

/// Kubeconfig of a control-plane component on this master, see `host::component_kubeconfig`.
pub(super) fn component_kubeconfig_path(component: &str) -> String {
    format!("{}/{component}/kubeconfig", paths::SRV)
}

fn k8s_image(cfg: &MasterConfig, component: &str) -> String {
    format!("registry.k8s.io/{component}:{}", cfg.kubernetes.image_tag)
}

fn pod(name: &str, cpu: &str, containers: Vec<Container>, volumes: Vec<Volume>) -> Pod {
    let mut containers = containers;
    for c in &mut containers {
        c.resources.get_or_insert_with(|| Resources {
            requests: BTreeMap::from([("cpu".into(), cpu.into())]),
        });
    }
    Pod {
        api_version: "v1".into(),
        kind: "Pod".into(),
        metadata: ObjectMeta {
            name: name.into(),
            namespace: "kube-system".into(),
            labels: BTreeMap::from([
                ("component".into(), name.into()),
                ("tier".into(), "control-plane".into()),
            ]),
            annotations: BTreeMap::new(),
        },
        spec: PodSpec {
            host_network: true,
            priority_class_name: "system-node-critical".into(),
            init_containers: Vec::new(),
            containers,
            volumes,
        },
    }
}

fn host_volume(name: &str, path: &str, kind: Option<&str>) -> Volume {
    Volume {
        name: name.into(),
        host_path: HostPath {
            path: path.into(),
            kind: kind.map(str::to_string),
        },
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only,
    }
}

/// The volume a file of /etc/srv/kubernetes is mounted by: its path below that directory as a DNS label
/// (`pki/apiserver.key` → `pki-apiserver-key`), so one pod never names one file twice.
fn file_volume_name(path: &str) -> String {
    let rel = path
        .strip_prefix(paths::SRV)
        .unwrap_or(path)
        .trim_start_matches('/');
    rel.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Only the files a container opens, each on its own, read-only (`type: File`, as kubeadm mounts a component's
/// kubeconfig): never the whole of /etc/srv/kubernetes, so a container that is broken into holds its own keys
/// and no other component's (ha-sim's `contract::exposures` checks it; docs/master-config.md §5). The keys are
/// written before the kubelet starts and never rewritten in place (new keys come with a new VM), so a bind
/// mount of the file itself never goes stale.
fn own_files(files: &[&str]) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut unique: Vec<&str> = Vec::new();
    for f in files {
        if !unique.contains(f) {
            unique.push(f);
        }
    }
    unique
        .into_iter()
        .map(|f| {
            let name = file_volume_name(f);
            (host_volume(&name, f, Some("File")), mount(&name, f, true))
        })
        .unzip()
}

/// A control-plane client's files: its kubeconfig, the certificate and key it names, and the CA it trusts
/// (`host::write_files` writes them).
pub(super) fn client_files(component: &str) -> [String; 4] {
    let base = component_client_cert_base(component);
    [
        component_kubeconfig_path(component),
        format!("{base}.crt"),
        format!("{base}.key"),
        paths::CA.to_string(),
    ]
}

/// Where a control-plane client's certificate and key are, without `.crt`/`.key`.
pub(super) fn component_client_cert_base(component: &str) -> String {
    format!("{}/pki/{component}", paths::SRV)
}

/// A control-plane client's own files ([`client_files`]) and the further `files` it opens.
fn client_volumes(component: &str, files: &[&str]) -> (Vec<Volume>, Vec<VolumeMount>) {
    let client = client_files(component);
    let all: Vec<&str> = client
        .iter()
        .map(String::as_str)
        .chain(files.iter().copied())
        .collect();
    own_files(&all)
}

/// The pod's volumes: each once, in the order first mounted (two containers of a pod may share one).
fn pod_volumes(sets: impl IntoIterator<Item = Vec<Volume>>) -> Vec<Volume> {
    let mut out: Vec<Volume> = Vec::new();
    for v in sets.into_iter().flatten() {
        if !out.iter().any(|o| o.name == v.name) {
            out.push(v);
        }
    }
    out
}

fn probe(port: u16, path: &str, scheme: &str) -> Probe {
    Probe {
        http_get: HttpGet {
            host: "127.0.0.1".into(),
            port,
            path: path.into(),
            scheme: scheme.into(),
        },
        initial_delay_seconds: 15,
        timeout_seconds: 15,
        failure_threshold: 8,
    }
}

/// `--name=a=https://ip:2380,...` in the order given (etcd does not care, people reading it do).
fn initial_cluster(cfg: &MasterConfig) -> String {
    cfg.initial_cluster
        .iter()
        .map(|(name, ip)| format!("{name}=https://{ip}:2380"))
        .collect::<Vec<_>>()
        .join(",")
}

/// etcd's argv, exactly the contract's flags (§5). Public to the module so the boot test can run it for real.
pub(super) fn etcd_command(cfg: &MasterConfig) -> Vec<String> {
    let ip = cfg.internal_ip;
    let mut argv = vec![
        "/usr/local/bin/etcd".into(),
        flag("name", &cfg.replica_name),
        flag("data-dir", paths::ETCD_DATA),
        flag("listen-peer-urls", format!("https://{ip}:2380")),
        flag(
            "listen-client-urls",
            format!("https://{ip}:2379,https://127.0.0.1:2379"),
        ),
        flag("advertise-client-urls", format!("https://{ip}:2379")),
        flag("initial-advertise-peer-urls", format!("https://{ip}:2380")),
        flag("initial-cluster", initial_cluster(cfg)),
        flag("initial-cluster-state", cfg.initial_state.as_flag()),
        flag("initial-cluster-token", &cfg.cluster_name),
        flag("client-cert-auth", true),
        flag("trusted-ca-file", paths::ETCD_CLIENT_CA),
        flag("cert-file", paths::ETCD_SERVER_CRT),
        flag("key-file", paths::ETCD_SERVER_KEY),
        flag("peer-client-cert-auth", true),
        flag("peer-trusted-ca-file", paths::ETCD_CA),
        flag("peer-cert-file", paths::ETCD_PEER_CRT),
        flag("peer-key-file", paths::ETCD_PEER_KEY),
    ];
    if cfg.initial_state == InitialState::ForceNewCluster {
        argv.push(flag("force-new-cluster", true));
    }
    argv
}

/// Where etcd's data directory is on the VM: on the data disk when there is one, so it outlives the VM.
pub(super) fn etcd_host_dir(cfg: &MasterConfig) -> String {
    if cfg.data_disk {
        format!("{}/var/etcd", super::DATA_MOUNT)
    } else {
        paths::ETCD_DATA.to_string()
    }
}

pub(super) fn etcd(cfg: &MasterConfig) -> Pod {
    let (tls, tls_mounts) = own_files(&[
        paths::ETCD_CLIENT_CA,
        paths::ETCD_SERVER_CRT,
        paths::ETCD_SERVER_KEY,
        paths::ETCD_CA,
        paths::ETCD_PEER_CRT,
        paths::ETCD_PEER_KEY,
    ]);
    let etcd = Container {
        name: "etcd".into(),
        image: cfg.etcd_image.clone(),
        command: etcd_command(cfg),
        volume_mounts: [mount("data", paths::ETCD_DATA, false)]
            .into_iter()
            .chain(tls_mounts)
            .collect(),
        ..Container::default()
    };
    let restoring = cfg.restore.as_ref().filter(|_| cfg.data_disk);
    // A restore makes the data directory itself (etcd's restore refuses one that exists, 3.4 even an empty
    // one), so the data volume must not be created before the init containers run: with no type, the container
    // runtime creates a missing hostPath only when it starts etcd's container.
    let data_kind = if restoring.is_some() {
        None
    } else {
        Some("DirectoryOrCreate")
    };
    let mut p = pod(
        "etcd-server",
        "200m",
        vec![etcd],
        [host_volume("data", &etcd_host_dir(cfg), data_kind)]
            .into_iter()
            .chain(tls)
            .collect(),
    );
    if let Some(r) = restoring {
        restore_containers(cfg, r, &mut p);
    }
    // The manifest's metadata name is fixed by the contract.
    p.metadata.labels.insert("component".into(), "etcd".into());
    p
}

/// gcloud's image, for `gcloud storage cp` with the VM's service account. Pinned, as every image a master runs.
pub const CLOUD_CLI_IMAGE: &str = "gcr.io/google.com/cloudsdktool/google-cloud-cli:528.0.0-slim";
/// Where a restoring master keeps the snapshot: on the boot disk, which the rebuild after the restore replaces.
const SNAPSHOT_DIR: &str = "/var/lib/etcd-restore";
const SNAPSHOT_FILE: &str = "/var/lib/etcd-restore/snapshot.db";
/// The fetch: `gcloud storage cp`, then the snapshot's bytes checked against its recorded SHA-256 before etcd's
/// restore may read them. Run as `sh -c TEXT fetch-snapshot URL FILE [SHA256]`: fixed text, so the arguments are
/// all that differs between restores.
pub const FETCH_SNAPSHOT_TEXT: &str = include_str!("fetch-snapshot.sh");
/// `$0` of the fetch: how ha-sim, which plays the script, recognises it.
pub const FETCH_SNAPSHOT_NAME: &str = "fetch-snapshot";

/// etcd's data directory on the data disk, and the directory above it, which the restore writes into.
fn data_parent(cfg: &MasterConfig) -> String {
    let dir = etcd_host_dir(cfg);
    match dir.rsplit_once('/') {
        Some((parent, _)) if !parent.is_empty() => parent.to_string(),
        _ => "/".into(),
    }
}

/// The init containers of a restoring etcd (docs/master-config.md §9): fetch the snapshot with gcloud and check it
/// against its recorded SHA-256 (`fetch-snapshot.sh`), then restore it with etcd's own tool (`etcdctl snapshot restore`, the one the etcd images carry) into the data directory, as a
/// one-member cluster of this replica. etcd then starts on the restored data.
fn restore_containers(cfg: &MasterConfig, r: &super::SnapshotRestore, p: &mut Pod) {
    let parent = data_parent(cfg);
    p.spec.volumes.push(host_volume(
        "restore",
        SNAPSHOT_DIR,
        Some("DirectoryOrCreate"),
    ));
    p.spec
        .volumes
        .push(host_volume("datadisk", &parent, Some("DirectoryOrCreate")));
    let env = r
        .storage_endpoint
        .iter()
        .map(|e| EnvVar {
            name: "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE".into(),
            value: e.clone(),
        })
        .collect();
    let fetch = Container {
        name: "fetch-snapshot".into(),
        image: CLOUD_CLI_IMAGE.into(),
        command: [
            "sh",
            "-c",
            FETCH_SNAPSHOT_TEXT,
            FETCH_SNAPSHOT_NAME,
            &r.url,
            SNAPSHOT_FILE,
        ]
        .into_iter()
        .chain(r.sha256.as_deref())
        .map(String::from)
        .collect(),
        env,
        volume_mounts: vec![mount("restore", SNAPSHOT_DIR, false)],
        ..Container::default()
    };
    let ip = cfg.internal_ip;
    // etcdctl, with API 3, for every pin: etcd 3.5 moved the restore to etcdutl and deprecated etcdctl's, but
    // registry.k8s.io/etcd images carry only etcd and etcdctl (kubernetes/kubernetes cluster/images/etcd/Makefile
    // installs those two; etcd-io/etcd#13764 for 3.5.1-0), so `/usr/local/bin/etcdutl` does not exist in them.
    // etcdctl 3.4 and 3.5 both restore.
    let (tool, env) = (
        "etcdctl",
        vec![EnvVar {
            name: "ETCDCTL_API".into(),
            value: "3".into(),
        }],
    );
    let restore = Container {
        name: "restore-snapshot".into(),
        image: cfg.etcd_image.clone(),
        command: vec![
            format!("/usr/local/bin/{tool}"),
            "snapshot".into(),
            "restore".into(),
            SNAPSHOT_FILE.into(),
            flag("data-dir", etcd_host_dir(cfg)),
            flag("name", &cfg.replica_name),
            flag(
                "initial-cluster",
                format!("{}=https://{ip}:2380", cfg.replica_name),
            ),
            flag("initial-cluster-token", &cfg.cluster_name),
            flag("initial-advertise-peer-urls", format!("https://{ip}:2380")),
        ]
        .into_iter()
        .chain(r.bump_revision.into_iter().flat_map(|n| {
            // Watchers that held a revision from before the loss get a compaction error and relist.
            [flag("bump-revision", n), "--mark-compacted".to_string()]
        }))
        .collect(),
        env,
        volume_mounts: vec![
            mount("restore", SNAPSHOT_DIR, true),
            mount("datadisk", &parent, false),
        ],
        ..Container::default()
    };
    p.spec.init_containers = vec![fetch, restore];
}

pub(super) fn kube_apiserver(cfg: &MasterConfig) -> Pod {
    let encryption = cfg
        .secrets_encryption
        .as_ref()
        .map(|_| super::encryption::CONFIG_PATH);
    let files: Vec<&str> = [
        paths::APISERVER_CRT,
        paths::APISERVER_KEY,
        paths::CA,
        paths::ETCD_CLIENT_CA,
        paths::ETCD_APISERVER_CLIENT_CRT,
        paths::ETCD_APISERVER_CLIENT_KEY,
        paths::SERVICE_ACCOUNT_PUB,
        paths::SERVICE_ACCOUNT_KEY,
        paths::APISERVER_KUBELET_CLIENT_CRT,
        paths::APISERVER_KUBELET_CLIENT_KEY,
    ]
    .into_iter()
    .chain(encryption)
    .collect();
    let (own, own_mounts) = own_files(&files);
    let port = cfg.api_port;
    let apiserver = Container {
        name: "kube-apiserver".into(),
        image: k8s_image(cfg, "kube-apiserver"),
        command: vec![
            "kube-apiserver".into(),
            flag("secure-port", port),
            flag("bind-address", "0.0.0.0"),
            // Every replica advertises the static IP, as kube-up: it is what nodes and the kubernetes service use.
            flag("advertise-address", cfg.static_ip),
            flag("tls-cert-file", paths::APISERVER_CRT),
            flag("tls-private-key-file", paths::APISERVER_KEY),
            flag("client-ca-file", paths::CA),
            // This member only, as kube-up: an apiserver lives and dies with its local etcd, and the load
            // balancer's health check (via the sidecar) takes it out when etcd is unhealthy.
            flag("etcd-servers", "https://127.0.0.1:2379"),
            flag("etcd-cafile", paths::ETCD_CLIENT_CA),
            flag("etcd-certfile", paths::ETCD_APISERVER_CLIENT_CRT),
            flag("etcd-keyfile", paths::ETCD_APISERVER_CLIENT_KEY),
            flag("service-cluster-ip-range", cfg.service_cluster_ip_range),
            flag(
                "service-account-issuer",
                format!("https://kubernetes.default.svc.{}", cfg.dns_domain),
            ),
            // The public half: this flag's reader takes no PKCS#8 private key (`pki::service_account_public_key`).
            flag("service-account-key-file", paths::SERVICE_ACCOUNT_PUB),
            flag(
                "service-account-signing-key-file",
                paths::SERVICE_ACCOUNT_KEY,
            ),
            flag("authorization-mode", "Node,RBAC"),
            flag("enable-admission-plugins", "NodeRestriction"),
            flag("allow-privileged", true),
            flag("endpoint-reconciler-type", "lease"),
            flag("kubelet-preferred-address-types", "InternalIP,Hostname"),
            flag(
                "kubelet-client-certificate",
                paths::APISERVER_KUBELET_CLIENT_CRT,
            ),
            flag("kubelet-client-key", paths::APISERVER_KUBELET_CLIENT_KEY),
        ]
        .into_iter()
        .chain(encryption.map(|path| flag("encryption-provider-config", path)))
        .collect(),
        liveness_probe: Some(probe(port, "/livez", "HTTPS")),
        volume_mounts: own_mounts,
        ..Container::default()
    };
    // The program defines exactly these three flags (plus klog's), listens on :3990 and proxies GET /healthz,
    // /livez and /readyz to https://127.0.0.1 with the client certificate, verifying the apiserver under the CA;
    // it answers its own liveness on /.kube-apiserver-healthcheck/healthz.
    // Its own client key and the CA only: the image is a third party's and runs as uid 0 here.
    let (sidecar, sidecar_mounts) = own_files(&[
        paths::CA,
        paths::HEALTHCHECK_CLIENT_CRT,
        paths::HEALTHCHECK_CLIENT_KEY,
    ]);
    let healthcheck = Container {
        name: "healthcheck".into(),
        image: HEALTHCHECK_IMAGE.into(),
        args: vec![
            flag("ca-cert", paths::CA),
            flag("client-cert", paths::HEALTHCHECK_CLIENT_CRT),
            flag("client-key", paths::HEALTHCHECK_CLIENT_KEY),
        ],
        resources: Some(Resources {
            requests: BTreeMap::from([("cpu".into(), "10m".into())]),
        }),
        liveness_probe: Some(probe(
            HEALTHCHECK_PORT,
            "/.kube-apiserver-healthcheck/healthz",
            "HTTP",
        )),
        volume_mounts: sidecar_mounts,
        // The image runs as distroless' nonroot user; the contract's keys are root's 0600 files, as for the
        // apiserver beside it.
        security_context: Some(SecurityContext { run_as_user: 0 }),
        ..Container::default()
    };
    pod(
        "kube-apiserver",
        "250m",
        vec![apiserver, healthcheck],
        pod_volumes([own, sidecar]),
    )
}

/// Flags every control-plane client shares: its kubeconfig for API calls and for delegated authn/authz.
fn client_flags(component: &str) -> Vec<String> {
    let kc = component_kubeconfig_path(component);
    vec![
        flag("kubeconfig", &kc),
        flag("authentication-kubeconfig", &kc),
        flag("authorization-kubeconfig", &kc),
    ]
}

fn gce_conf_volume() -> (Volume, VolumeMount) {
    (
        host_volume("cloudconfig", paths::GCE_CONF, Some("FileOrCreate")),
        mount("cloudconfig", paths::GCE_CONF, true),
    )
}

pub(super) fn kube_controller_manager(cfg: &MasterConfig) -> Pod {
    let (own, own_mounts) = client_volumes(
        "kube-controller-manager",
        &[paths::CA, paths::SERVICE_ACCOUNT_KEY],
    );
    let (gce, gce_mount) = gce_conf_volume();
    let mut command = vec!["kube-controller-manager".into()];
    command.extend(client_flags("kube-controller-manager"));
    command.extend([
        // Replicas elect one active controller manager; the others stand by.
        flag("leader-elect", true),
        flag("cluster-name", &cfg.cluster_name),
        flag("cloud-provider", cfg.kubernetes.cloud_provider_flag()),
        flag("service-cluster-ip-range", cfg.service_cluster_ip_range),
        flag("root-ca-file", paths::CA),
        flag(
            "service-account-private-key-file",
            paths::SERVICE_ACCOUNT_KEY,
        ),
        flag("use-service-account-credentials", true),
    ]);
    // In-tree, the cloud controllers read gce.conf here; external, the cloud-controller-manager does.
    if !matches!(cfg.kubernetes.cloud, CloudProvider::External { .. }) {
        command.push(flag("cloud-config", paths::GCE_CONF));
    }
    command.extend(
        cfg.kubernetes
            .feature_gates()
            .map(|g| flag("feature-gates", g)),
    );
    // Kubernetes' leader migration: with no configuration file, the cloud controllers take the migration lease
    // (`cloud-provider-extraction-migration`), which kube-controller-manager and cloud-controller-manager share,
    // so during the roll that moves them out of tree they run on exactly one master. Only the controller manager
    // that still runs them in tree takes part: on the release that moved them out, the cloud-controller-manager
    // holds the migration lease and the new controller manager must not compete for it (kubernetes.io, "Migrate
    // Replicated Control Plane To Use Cloud Controller Manager").
    if cfg.kubernetes.leader_migration
        && !matches!(cfg.kubernetes.cloud, CloudProvider::External { .. })
    {
        command.push(flag("enable-leader-migration", true));
    }
    let c = Container {
        name: "kube-controller-manager".into(),
        image: k8s_image(cfg, "kube-controller-manager"),
        command,
        liveness_probe: Some(probe(10257, "/healthz", "HTTPS")),
        volume_mounts: own_mounts.into_iter().chain([gce_mount]).collect(),
        ..Container::default()
    };
    pod(
        "kube-controller-manager",
        "200m",
        vec![c],
        own.into_iter().chain([gce]).collect(),
    )
}

pub(super) fn kube_scheduler(cfg: &MasterConfig) -> Pod {
    let (own, own_mounts) = client_volumes("kube-scheduler", &[]);
    let mut command = vec!["kube-scheduler".into()];
    command.extend(client_flags("kube-scheduler"));
    command.push(flag("leader-elect", true));
    let c = Container {
        name: "kube-scheduler".into(),
        image: k8s_image(cfg, "kube-scheduler"),
        command,
        liveness_probe: Some(probe(10259, "/healthz", "HTTPS")),
        volume_mounts: own_mounts,
        ..Container::default()
    };
    pod("kube-scheduler", "75m", vec![c], own)
}

pub(super) fn cluster_autoscaler(cfg: &MasterConfig) -> Pod {
    let (own, own_mounts) = client_volumes("cluster-autoscaler", &[]);
    let (gce, gce_mount) = gce_conf_volume();
    let c = Container {
        name: "cluster-autoscaler".into(),
        image: cfg.kubernetes.autoscaler_image.clone(),
        command: vec![
            "./cluster-autoscaler".into(),
            flag(
                "kubeconfig",
                component_kubeconfig_path("cluster-autoscaler"),
            ),
            // kube-up relied on the default; we say it, since two active autoscalers would fight.
            flag("leader-elect", true),
            flag("cloud-provider", "gce"),
            flag("cloud-config", paths::GCE_CONF),
            flag("cluster-name", &cfg.cluster_name),
            flag("balance-similar-node-groups", true),
        ],
        volume_mounts: own_mounts.into_iter().chain([gce_mount]).collect(),
        // The image is distroless' `static:nonroot` (uid 65532, kubernetes/autoscaler's Dockerfile), and its key
        // and kubeconfig are root's 0600 files, as every component's here.
        security_context: Some(SecurityContext { run_as_user: 0 }),
        ..Container::default()
    };
    pod(
        "cluster-autoscaler",
        "10m",
        vec![c],
        own.into_iter().chain([gce]).collect(),
    )
}

/// Google's cloud-controller-manager (cloud-provider-gcp), for releases whose cloud controllers run out of tree:
/// the node, node-lifecycle, route and service controllers, elected among the replicas like the controller
/// manager. It reads the same gce.conf the in-tree provider read, and calls the API as its own user
/// (`system:cloud-controller-manager`, bound by `host::cloud_controller_manager_rbac`) with one service account per
/// controller. `command` names the program where the image keeps it (v30 images were built by ko).
pub(super) fn cloud_controller_manager(cfg: &MasterConfig) -> Option<Pod> {
    let CloudProvider::External {
        ccm_image,
        ccm_program,
    } = &cfg.kubernetes.cloud
    else {
        return None;
    };
    let (own, own_mounts) = client_volumes("cloud-controller-manager", &[]);
    let (gce, gce_mount) = gce_conf_volume();
    let mut command = vec![ccm_program.clone()];
    command.extend(client_flags("cloud-controller-manager"));
    command.extend([
        flag("leader-elect", true),
        flag("cloud-provider", "gce"),
        flag("cloud-config", paths::GCE_CONF),
        flag("cluster-name", &cfg.cluster_name),
        flag("use-service-account-credentials", true),
    ]);
    if cfg.kubernetes.leader_migration {
        command.push(flag("enable-leader-migration", true));
    }
    let c = Container {
        name: "cloud-controller-manager".into(),
        image: ccm_image.clone(),
        command,
        liveness_probe: Some(probe(10258, "/healthz", "HTTPS")),
        volume_mounts: own_mounts.into_iter().chain([gce_mount]).collect(),
        // ko's default base (v30) runs as uid 65532; its key and kubeconfig are root's 0600 files.
        security_context: Some(SecurityContext { run_as_user: 0 }),
        ..Container::default()
    };
    Some(pod(
        "cloud-controller-manager",
        "50m",
        vec![c],
        own.into_iter().chain([gce]).collect(),
    ))
}

pub(super) fn kube_addon_manager(_cfg: &MasterConfig) -> Pod {
    let (own, own_mounts) = client_volumes("kube-addon-manager", &[]);
    let env = |name: &str, value: String| EnvVar {
        name: name.into(),
        value,
    };
    let c = Container {
        name: "kube-addon-manager".into(),
        image: ADDON_MANAGER_IMAGE.into(),
        // The image's entrypoint runs kube-addons-main.sh; these are the knobs it reads.
        env: vec![
            env(
                "KUBECTL_OPTS",
                flag(
                    "kubeconfig",
                    component_kubeconfig_path("kube-addon-manager"),
                ),
            ),
            // Only the replica holding the controller-manager lease applies addons.
            env("ADDON_MANAGER_LEADER_ELECTION", "true".into()),
        ],
        volume_mounts: own_mounts
            .into_iter()
            .chain([mount("addons", paths::ADDONS, true)])
            .collect(),
        ..Container::default()
    };
    pod(
        "kube-addon-manager",
        "5m",
        vec![c],
        own.into_iter()
            .chain([host_volume("addons", paths::ADDONS, None)])
            .collect(),
    )
}
