//! Test fixtures: a throwaway PKI and master startup configs written exactly as docs/master-config.md specifies.

use super::{VmHandle, VmOptions};
use crate::net::{PortMap, http};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct Pki {
    issuer: Issuer<'static, KeyPair>,
    pub ca_pem: String,
}

pub(crate) struct Issued {
    pub cert: String,
    pub key: String,
}

impl Pki {
    pub fn new(cn: &str) -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = params.self_signed(&key).unwrap().pem();
        Pki {
            issuer: Issuer::new(params, key),
            ca_pem,
        }
    }

    /// A leaf with the given SANs (IPs become IP SANs) and EKUs.
    pub fn issue(&self, cn: &str, sans: &[String], server: bool, client: bool) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans.to_vec()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        if server {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if client {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        Issued {
            cert: params.signed_by(&key, &self.issuer).unwrap().pem(),
            key: key.serialize_pem(),
        }
    }
}

/// The cluster's PKI: etcd CA (peer + client) and cluster CA (API serving certs).
pub(crate) struct ClusterPki {
    pub etcd: Pki,
    pub cluster: Pki,
}

impl ClusterPki {
    pub fn new() -> ClusterPki {
        ClusterPki {
            etcd: Pki::new("Kubernetes"),
            cluster: Pki::new("cluster-ca"),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Member {
    pub name: String,
    pub ip: Ipv4Addr,
}

pub(crate) fn member(name: &str, ip: Ipv4Addr) -> Member {
    Member {
        name: name.into(),
        ip,
    }
}

/// Instance metadata for master `me` of `cluster`, per docs/master-config.md, with etcd's data on the root disk
/// (no pod volumes, as the provider wrote it before data disks).
pub(crate) fn master_metadata(
    pki: &ClusterPki,
    me: &Member,
    cluster: &[Member],
    state: &str,
    static_ip: Ipv4Addr,
) -> BTreeMap<String, String> {
    master_metadata_with(pki, me, cluster, state, static_ip, false)
}

/// Instance metadata for a master whose etcd data lives on the attached disk `master-pd` (docs/master-config.md
/// §8): fs_setup + mounts in cloud-config, hostPath volumes in the etcd pod.
pub(crate) fn master_metadata_on_disk(
    pki: &ClusterPki,
    me: &Member,
    cluster: &[Member],
    state: &str,
    static_ip: Ipv4Addr,
) -> BTreeMap<String, String> {
    master_metadata_with(pki, me, cluster, state, static_ip, true)
}

fn master_metadata_with(
    pki: &ClusterPki,
    me: &Member,
    cluster: &[Member],
    state: &str,
    static_ip: Ipv4Addr,
    data_disk: bool,
) -> BTreeMap<String, String> {
    let etcd = etcd_pod(me, cluster, state, data_disk);
    let api = api_pod(static_ip);
    let files = master_files(pki, me, static_ip, &etcd, &api);
    let mut cloud = serde_json::json!({
        "write_files": files,
        "runcmd": [["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", "kubelet"]],
    });
    if data_disk {
        let dev = "/dev/disk/by-id/google-master-pd";
        cloud["fs_setup"] = serde_json::json!([{"label": "master-pd", "filesystem": "ext4", "device": dev, "overwrite": false}]);
        cloud["mounts"] = serde_json::json!([[
            dev,
            "/mnt/disks/master-pd",
            "ext4",
            "defaults,nofail,discard",
            "0",
            "2"
        ]]);
    }
    let user_data = format!(
        "#cloud-config\n{}",
        serde_norway::to_string(&cloud).unwrap()
    );
    BTreeMap::from([
        ("user-data".to_string(), user_data),
        ("cluster-name".to_string(), "test".to_string()),
    ])
}

/// etcd's static pod: a member of `cluster` joining in `state`, its keys and (with `data_disk`) its data through
/// hostPaths.
fn etcd_pod(me: &Member, cluster: &[Member], state: &str, data_disk: bool) -> serde_json::Value {
    let ip = me.ip.to_string();
    let initial_cluster = cluster
        .iter()
        .map(|m| format!("{}=https://{}:2380", m.name, m.ip))
        .collect::<Vec<_>>()
        .join(",");

    let etcd_cmd = vec![
        "/usr/local/bin/etcd".to_string(),
        format!("--name={}", me.name),
        "--data-dir=/var/lib/etcd".into(),
        format!("--listen-peer-urls=https://{ip}:2380"),
        format!("--listen-client-urls=https://{ip}:2379,https://127.0.0.1:2379"),
        format!("--advertise-client-urls=https://{ip}:2379"),
        format!("--initial-advertise-peer-urls=https://{ip}:2380"),
        format!("--initial-cluster={initial_cluster}"),
        format!("--initial-cluster-state={state}"),
        "--initial-cluster-token=test-cluster".into(),
        "--client-cert-auth=true".into(),
        "--trusted-ca-file=/etc/srv/kubernetes/pki/etcd-apiserver-ca.crt".into(),
        "--cert-file=/etc/srv/kubernetes/pki/etcd-apiserver-server.crt".into(),
        "--key-file=/etc/srv/kubernetes/pki/etcd-apiserver-server.key".into(),
        "--peer-client-cert-auth=true".into(),
        "--peer-trusted-ca-file=/etc/srv/kubernetes/etcd-ca.crt".into(),
        "--peer-cert-file=/etc/srv/kubernetes/etcd-peer.crt".into(),
        "--peer-key-file=/etc/srv/kubernetes/etcd-peer.key".into(),
    ];
    let mut etcd_pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "etcd-server", "namespace": "kube-system"},
        "spec": {"hostNetwork": true, "containers": [{
            "name": "etcd", "image": "registry.k8s.io/etcd:3.4.23-0", "command": etcd_cmd,
        }]},
    });
    // Its keys through a hostPath, as on a real master (the contract refuses a file no mount shows etcd).
    etcd_pod["spec"]["volumes"] =
        serde_json::json!([{"name": "pki", "hostPath": {"path": "/etc/srv/kubernetes"}}]);
    etcd_pod["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([
        {"name": "pki", "mountPath": "/etc/srv/kubernetes", "readOnly": true},
    ]);
    if data_disk {
        etcd_pod["spec"]["volumes"].as_array_mut().unwrap().push(serde_json::json!(
            {"name": "data", "hostPath": {"path": "/mnt/disks/master-pd/var/etcd", "type": "DirectoryOrCreate"}}
        ));
        etcd_pod["spec"]["containers"][0]["volumeMounts"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"name": "data", "mountPath": "/var/lib/etcd"}));
    }
    etcd_pod
}

/// The API server's static pod with its health-check sidecar, advertising `static_ip`.
fn api_pod(static_ip: Ipv4Addr) -> serde_json::Value {
    // As the provider renders them: /etc/srv/kubernetes mounted read-only, the sidecar as root (its image's user
    // cannot read root's 0600 keys); the contract checker refuses either missing.
    let srv_mount = serde_json::json!([{"name": "srvkube", "mountPath": "/etc/srv/kubernetes", "readOnly": true}]);
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kube-apiserver", "namespace": "kube-system"},
        "spec": {"hostNetwork": true,
          "volumes": [{"name": "srvkube", "hostPath": {"path": "/etc/srv/kubernetes"}}],
          "containers": [
            {"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.31.0", "command": [
                "/usr/local/bin/kube-apiserver", "--secure-port=443", format!("--advertise-address={static_ip}"),
                "--tls-cert-file=/etc/srv/kubernetes/pki/apiserver.crt",
                "--tls-private-key-file=/etc/srv/kubernetes/pki/apiserver.key",
                "--client-ca-file=/etc/srv/kubernetes/pki/ca.crt",
                "--etcd-servers=https://127.0.0.1:2379",
                "--etcd-cafile=/etc/srv/kubernetes/pki/etcd-apiserver-ca.crt",
                "--etcd-certfile=/etc/srv/kubernetes/pki/etcd-apiserver-client.crt",
                "--etcd-keyfile=/etc/srv/kubernetes/pki/etcd-apiserver-client.key",
            ], "volumeMounts": srv_mount},
            {"name": "healthcheck", "image": "registry.k8s.io/kops/kube-apiserver-healthcheck:1.28.0", "args": [
                "--ca-cert=/etc/srv/kubernetes/pki/ca.crt",
                "--client-cert=/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.crt",
                "--client-key=/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.key",
            ], "volumeMounts": srv_mount, "securityContext": {"runAsUser": 0}},
        ]},
    })
}

/// The files cloud-init writes: both pods' manifests, and the certificates and keys `me` is issued under `pki`.
fn master_files(
    pki: &ClusterPki,
    me: &Member,
    static_ip: Ipv4Addr,
    etcd_pod: &serde_json::Value,
    api_pod: &serde_json::Value,
) -> Vec<serde_json::Value> {
    let ip = me.ip.to_string();
    let own_sans = vec![ip.clone(), "127.0.0.1".to_string(), me.name.clone()];
    let peer = pki.etcd.issue(&me.name, &own_sans, true, true);
    let server = pki
        .etcd
        .issue(&format!("etcd-{}", me.name), &own_sans, true, false);
    let client = pki.etcd.issue("client", &[], false, true);
    let api_sans: Vec<String> = [
        static_ip.to_string(),
        ip.clone(),
        "10.0.0.1".into(),
        "kubernetes".into(),
    ]
    .into_iter()
    .chain(["kubernetes.default".into(), me.name.clone()])
    .collect();
    let api = pki.cluster.issue("kube-apiserver", &api_sans, true, false);
    let healthcheck = pki
        .cluster
        .issue("kube-apiserver-healthcheck", &[], false, true);
    let file = |path: &str, content: &str, perm: &str| serde_json::json!({"path": path, "content": content, "permissions": perm, "owner": "root:root"});
    let srv = "/etc/srv/kubernetes";
    let mut files = vec![
        file(
            "/etc/kubernetes/manifests/etcd.yaml",
            &serde_norway::to_string(etcd_pod).unwrap(),
            "0644",
        ),
        file(
            "/etc/kubernetes/manifests/kube-apiserver.yaml",
            &serde_norway::to_string(api_pod).unwrap(),
            "0644",
        ),
        file(&format!("{srv}/etcd-ca.crt"), &pki.etcd.ca_pem, "0644"),
        file(&format!("{srv}/etcd-peer.crt"), &peer.cert, "0644"),
        file(&format!("{srv}/etcd-peer.key"), &peer.key, "0600"),
        file(
            &format!("{srv}/pki/etcd-apiserver-ca.crt"),
            &pki.etcd.ca_pem,
            "0644",
        ),
        file(
            &format!("{srv}/pki/etcd-apiserver-server.crt"),
            &server.cert,
            "0644",
        ),
        file(
            &format!("{srv}/pki/etcd-apiserver-server.key"),
            &server.key,
            "0600",
        ),
        file(
            &format!("{srv}/pki/etcd-apiserver-client.crt"),
            &client.cert,
            "0644",
        ),
        file(
            &format!("{srv}/pki/etcd-apiserver-client.key"),
            &client.key,
            "0600",
        ),
        file(&format!("{srv}/pki/ca.crt"), &pki.cluster.ca_pem, "0644"),
        file(&format!("{srv}/pki/apiserver.crt"), &api.cert, "0644"),
        file(&format!("{srv}/pki/apiserver.key"), &api.key, "0600"),
        file(
            &format!("{srv}/pki/kube-apiserver-healthcheck.crt"),
            &healthcheck.cert,
            "0644",
        ),
        file(
            &format!("{srv}/pki/kube-apiserver-healthcheck.key"),
            &healthcheck.key,
            "0600",
        ),
    ];
    // One file base64-encoded, as the provider may do for binary-safe content.
    files.push(serde_json::json!({
        "path": "/var/lib/kubelet/config.yaml", "encoding": "b64",
        "content": base64::Engine::encode(&base64::engine::general_purpose::STANDARD,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n"),
    }));
    files
}

pub(crate) fn etcd_bin() -> PathBuf {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/etcd");
    if tools.exists() {
        tools
    } else {
        PathBuf::from("/usr/bin/etcd")
    }
}

/// Options for tests: fast restarts and health polling; the default port map (443 → 6443).
pub(crate) fn fast_opts() -> VmOptions {
    VmOptions {
        port_map: PortMap::default(),
        restart_backoff_initial: Duration::from_millis(50),
        restart_backoff_max: Duration::from_millis(500),
        health_interval: Duration::from_millis(100),
        ..VmOptions::default()
    }
}

/// Polls `f` every 100 ms until it is true; panics with `what` after `timeout`.
pub(crate) fn wait_until(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < until,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn wait_healthy(vms: &[&VmHandle]) {
    for vm in vms {
        wait_until(
            Duration::from_secs(60),
            &format!("{} etcd healthy", vm.name()),
            || vm.status().etcd_healthy,
        );
    }
}

/// Runs etcdctl inside the VM (via `ssh_env`), returning (success, stdout+stderr).
pub(crate) fn etcdctl(dir: &Path, args: &[&str]) -> (bool, String) {
    let env = super::ssh_env(dir).unwrap();
    let out = std::process::Command::new("etcdctl")
        .env_clear()
        .envs(env)
        .args(["--command-timeout=5s"])
        .args(args)
        .output()
        .expect("run etcdctl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `GET path` over TLS to ip:port, trusting `ca_pem` and checking the cert against `ip`; returns (status, X-Replica).
pub(crate) async fn https_get(
    ip: Ipv4Addr,
    port: u16,
    ca_pem: &str,
    path: &str,
) -> std::io::Result<(u16, String)> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect(SocketAddr::from((ip, port))).await?;
        let name = rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::V4(ip).into());
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await?;
        http::get(tls, &ip.to_string(), path).await
    };
    let resp = tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "https_get timed out"))??;
    Ok((
        resp.status,
        resp.header("X-Replica").unwrap_or_default().to_string(),
    ))
}
