//! The `write_files` list: TLS material, kubeconfigs, kubelet configuration, the cloud config, the monit check
//! and the static pod manifests. Keys are 0600 and everything else 0644; every file is written in full (never
//! appended) so a re-run of cloud-init, or the sim's write-on-every-boot, converges to the same state.

use super::k8s::*;
use super::manifests::{self, component_kubeconfig_path};
use super::{CloudProvider, MasterConfig, dns_service_ip, paths};
use ha_pki::CertKey;

use super::keys::KEY_MODE;
const FILE_MODE: &str = "0644";
/// Run by root from `runcmd`; readable by all like the rest of the configuration, and holds no secret.
const SCRIPT_MODE: &str = "0755";

fn file(path: impl Into<String>, content: impl Into<String>, mode: &str) -> WriteFile {
    WriteFile {
        path: path.into(),
        content: content.into(),
        owner: "root:root".into(),
        permissions: mode.into(),
    }
}

fn yaml<T: serde::Serialize>(value: &T) -> String {
    serde_norway::to_string(value).expect("plain structs always serialize")
}

/// A certificate and its key, at `<base>.crt` (0644) and `<base>.key` (0600).
fn pair(out: &mut Vec<WriteFile>, base: &str, ck: &CertKey) {
    out.push(file(format!("{base}.crt"), &ck.cert_pem, FILE_MODE));
    out.push(file(format!("{base}.key"), &ck.key_pem, KEY_MODE));
}

fn default_named<T>(item: T) -> Named<T> {
    Named {
        name: "default".into(),
        item,
    }
}

fn kubeconfig(server: String, user: &str, cert_base: &str) -> Kubeconfig {
    Kubeconfig {
        api_version: "v1".into(),
        kind: "Config".into(),
        clusters: vec![default_named(KubeCluster {
            cluster: ClusterEntry {
                server,
                certificate_authority: paths::CA.into(),
            },
        })],
        users: vec![Named {
            name: user.into(),
            item: KubeUser {
                user: UserEntry {
                    client_certificate: format!("{cert_base}.crt"),
                    client_key: format!("{cert_base}.key"),
                },
            },
        }],
        contexts: vec![default_named(KubeContext {
            context: ContextEntry {
                cluster: "default".into(),
                user: user.into(),
            },
        })],
        current_context: "default".into(),
    }
}

/// `https://<static-ip>`, with the port only when it is not 443: where nodes and this kubelet reach the API.
pub(super) fn static_endpoint(cfg: &MasterConfig) -> String {
    match cfg.api_port {
        443 => format!("https://{}", cfg.static_ip),
        port => format!("https://{}:{port}", cfg.static_ip),
    }
}

fn kubelet_config(cfg: &MasterConfig) -> KubeletConfiguration {
    KubeletConfiguration {
        api_version: "kubelet.config.k8s.io/v1beta1".into(),
        kind: "KubeletConfiguration".into(),
        static_pod_path: paths::MANIFESTS.into(),
        authentication: KubeletAuthentication {
            anonymous: Enabled { enabled: false },
            webhook: Enabled { enabled: true },
            x509: X509 {
                client_ca_file: paths::CA.into(),
            },
        },
        authorization: KubeletAuthorization {
            mode: "Webhook".into(),
        },
        cluster_domain: cfg.dns_domain.clone(),
        cluster_dns: vec![dns_service_ip(&cfg.service_cluster_ip_range).to_string()],
        cgroup_driver: "systemd".into(),
        // monit probes this; loopback only.
        healthz_bind_address: "127.0.0.1".into(),
        healthz_port: 10248,
        read_only_port: 0,
        // Masters run control-plane pods only, as kube-up's --register-with-taints.
        register_with_taints: vec![Taint {
            key: "node-role.kubernetes.io/control-plane".into(),
            effect: "NoSchedule".into(),
        }],
    }
}

/// systemd drop-in: the image's kubelet unit with our configuration. Names the node after the instance, which
/// is also the name the kubelet's client certificate carries (`system:node:<name>`).
/// In tree it reads gce.conf; with an external cloud provider the cloud-controller-manager initialises the node.
fn kubelet_dropin(cfg: &MasterConfig) -> String {
    let k = &cfg.kubernetes;
    let mut cloud = format!("--cloud-provider={}", k.cloud_provider_flag());
    if !matches!(k.cloud, CloudProvider::External { .. }) {
        cloud.push_str(&format!(" --cloud-config={}", paths::GCE_CONF));
    }
    if let Some(gates) = k.feature_gates() {
        cloud.push_str(&format!(" --feature-gates={gates}"));
    }
    format!(
        "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --config={} --kubeconfig={} \
         --hostname-override={} {cloud}\nRestart=always\n",
        paths::KUBELET_CONFIG,
        paths::KUBELET_KUBECONFIG,
        cfg.replica_name,
    )
}

/// monit restarts a kubelet whose health endpoint stops answering (systemd only sees a dead process).
fn monit_kubelet() -> String {
    "check program kubelet-healthz with path \"/usr/bin/curl -fsS --max-time 10 http://127.0.0.1:10248/healthz\"\n  \
     every 2 cycles\n  \
     if status != 0 for 3 cycles then exec \"/bin/systemctl restart kubelet\"\n"
        .into()
}

/// gcfg, as the GCE cloud provider reads it. Values are quoted; project and zone names need no escaping.
fn gce_conf(cfg: &MasterConfig) -> String {
    let mut s = format!(
        "[global]\nproject-id = \"{}\"\nlocal-zone = \"{}\"\n",
        cfg.project, cfg.zone
    );
    if cfg.multizone {
        s.push_str("multizone = true\n");
    }
    s
}

pub(super) fn files(cfg: &MasterConfig) -> Vec<WriteFile> {
    let mut out = Vec::new();
    tls_files(cfg, &mut out);
    client_files(cfg, &mut out);
    node_files(cfg, &mut out);
    // Manifests last: by the time the kubelet sees a pod, the files it mounts exist.
    manifest_files(cfg, &mut out);
    out
}

/// etcd's and the API server's certificates and keys, the CAs, and the service-account key pair.
fn tls_files(cfg: &MasterConfig, out: &mut Vec<WriteFile>) {
    let srv_pki = format!("{}/pki", paths::SRV);
    let c = &cfg.certs;
    // etcd (§4).
    out.push(file(paths::ETCD_CA, &cfg.cas.etcd_peer_ca, FILE_MODE));
    pair(out, &format!("{}/etcd-peer", paths::SRV), &c.etcd_peer);
    out.push(file(
        paths::ETCD_CLIENT_CA,
        &cfg.cas.etcd_client_ca,
        FILE_MODE,
    ));
    pair(
        out,
        &format!("{srv_pki}/etcd-apiserver-server"),
        &c.etcd_server,
    );
    pair(
        out,
        &format!("{srv_pki}/etcd-apiserver-client"),
        &c.etcd_apiserver_client,
    );
    // API server.
    out.push(file(paths::CA, &cfg.cas.cluster_ca, FILE_MODE));
    pair(out, &format!("{srv_pki}/apiserver"), &c.api_server);
    pair(
        out,
        &format!("{srv_pki}/apiserver-kubelet-client"),
        &c.apiserver_kubelet_client,
    );
    pair(
        out,
        &format!("{srv_pki}/kube-apiserver-healthcheck"),
        &c.healthcheck_client,
    );
    out.push(file(
        paths::SERVICE_ACCOUNT_KEY,
        &cfg.service_account_key_pem,
        KEY_MODE,
    ));
    if let Some(keys) = &cfg.secrets_encryption {
        out.push(file(
            super::encryption::CONFIG_PATH,
            keys.config_yaml(),
            KEY_MODE,
        ));
    }
    // `super::check` refuses a key whose public half cannot be derived, so this is never empty when rendered. The
    // signing key's public half comes first, then those a rotation verifies too: one file, which
    // `--service-account-key-file` reads every key of.
    let mut verifies =
        ha_pki::service_account_public_key(&cfg.service_account_key_pem).unwrap_or_default();
    for public in &cfg.service_account_also_verifies {
        verifies.push_str(public);
    }
    out.push(file(paths::SERVICE_ACCOUNT_PUB, verifies, FILE_MODE));
}

/// Each control-plane client's certificate, key and kubeconfig, and the kubelet's.
fn client_files(cfg: &MasterConfig, out: &mut Vec<WriteFile>) {
    let srv_pki = format!("{}/pki", paths::SRV);
    let c = &cfg.certs;
    // Control-plane clients talk to their own replica's apiserver: they run only while it does.
    let local = format!("https://127.0.0.1:{}", cfg.api_port);
    let external = matches!(cfg.kubernetes.cloud, CloudProvider::External { .. });
    let ccm = external.then_some((
        "cloud-controller-manager",
        "system:cloud-controller-manager",
        &c.cloud_controller_manager,
    ));
    for (component, user, ck) in [
        (
            "kube-controller-manager",
            "system:kube-controller-manager",
            &c.controller_manager,
        ),
        ("kube-scheduler", "system:kube-scheduler", &c.scheduler),
        (
            "cluster-autoscaler",
            "cluster-autoscaler",
            &c.cluster_autoscaler,
        ),
        (
            "kube-addon-manager",
            "system:kube-addon-manager",
            &c.addon_manager,
        ),
    ]
    .into_iter()
    .chain(ccm)
    {
        let base = manifests::component_client_cert_base(component);
        pair(out, &base, ck);
        out.push(file(
            component_kubeconfig_path(component),
            yaml(&kubeconfig(local.clone(), user, &base)),
            KEY_MODE,
        ));
    }

    // kubelet: the static IP, never a replica, so the node keeps working when its own apiserver is down.
    let kubelet_base = format!("{srv_pki}/kubelet");
    pair(out, &kubelet_base, &c.kubelet);
    out.push(file(
        paths::KUBELET_KUBECONFIG,
        yaml(&kubeconfig(
            static_endpoint(cfg),
            &format!("system:node:{}", cfg.replica_name),
            &kubelet_base,
        )),
        KEY_MODE,
    ));
}

/// What runs on the VM itself: the kubelet's configuration and drop-in, the runtime installer, monit, the health
/// check's port on a master off 443, gce.conf, and the addons' RBAC.
fn node_files(cfg: &MasterConfig, out: &mut Vec<WriteFile>) {
    out.push(file(
        paths::KUBELET_CONFIG,
        yaml(&kubelet_config(cfg)),
        FILE_MODE,
    ));
    out.push(file(paths::KUBELET_DROPIN, kubelet_dropin(cfg), FILE_MODE));
    out.push(file(
        super::runtime::SCRIPT,
        super::runtime::install_script(&cfg.kubernetes),
        SCRIPT_MODE,
    ));
    out.push(file(paths::MONIT_KUBELET, monit_kubelet(), FILE_MODE));
    if let Some(unit) = super::healthcheck_port::unit(cfg.api_port) {
        out.push(file(super::healthcheck_port::UNIT, unit, FILE_MODE));
    }
    out.push(file(paths::GCE_CONF, gce_conf(cfg), FILE_MODE));

    for (name, rbac) in super::addons::rbac(&cfg.kubernetes) {
        out.push(file(format!("{}/{name}", paths::ADDONS), rbac, FILE_MODE));
    }
}

/// The static pods.
fn manifest_files(cfg: &MasterConfig, out: &mut Vec<WriteFile>) {
    let ccm = manifests::cloud_controller_manager(cfg).map(|p| ("cloud-controller-manager", p));
    for (name, pod) in [
        ("etcd", manifests::etcd(cfg)),
        ("kube-apiserver", manifests::kube_apiserver(cfg)),
        (
            "kube-controller-manager",
            manifests::kube_controller_manager(cfg),
        ),
        ("kube-scheduler", manifests::kube_scheduler(cfg)),
        ("cluster-autoscaler", manifests::cluster_autoscaler(cfg)),
        ("kube-addon-manager", manifests::kube_addon_manager(cfg)),
    ]
    .into_iter()
    .chain(ccm)
    {
        out.push(file(
            format!("{}/{name}.yaml", paths::MANIFESTS),
            yaml(&pod),
            FILE_MODE,
        ));
    }
}
