//! The rendered user-data read back the way a guest (and the sim) reads it: YAML parse, `write_files`, manifests
//! as Pods, flags as argv. The real-etcd boot test is in `boot_tests.rs`.
// Built without cfg(test) for ha-ops (feature `testing`), where the helpers only these tests call are unused.
#![cfg_attr(not(test), allow(dead_code, unused_imports))]

use super::k8s::*;
use super::*;
use ha_pki::{self as pki, ReplicaCertRequest};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// A config with real certificates for `name` at `ip` in a cluster of `members`.
pub(super) fn config_for(
    cas: &ClusterCas,
    name: &str,
    ip: Ipv4Addr,
    members: &[(&str, Ipv4Addr)],
    state: InitialState,
) -> MasterConfig {
    let range: Ipv4Net = "10.0.0.0/16".parse().unwrap();
    let static_ip: Ipv4Addr = "34.1.2.3".parse().unwrap();
    let req = ReplicaCertRequest {
        name: name.into(),
        internal_ip: ip,
        static_ip,
        first_service_ip: first_service_ip(&range),
        dns_domain: "cluster.local".into(),
        validity: time::Duration::days(365),
    };
    MasterConfig {
        cluster_name: "prod".into(),
        replica_name: name.into(),
        internal_ip: ip,
        static_ip,
        api_port: 443,
        service_cluster_ip_range: range,
        dns_domain: "cluster.local".into(),
        etcd_quorum_read: true,
        multizone: false,
        project: "my-project".into(),
        zone: "europe-west1-b".into(),
        initial_cluster: members.iter().map(|(n, ip)| (n.to_string(), *ip)).collect(),
        initial_state: state,
        cas: CaCerts::from(cas),
        certs: pki::issue_replica_certs(cas, &req).unwrap(),
        service_account_key_pem: pki::service_account_key().unwrap(),
        service_account_also_verifies: Vec::new(),
        data_disk: true,
        etcd_image: "registry.k8s.io/etcd:3.4.13-0".into(),
        kubernetes: crate::KubernetesRelease::legacy(),
        restore: None,
        keys: KeyDelivery::InMetadata,
        secrets_encryption: None,
    }
}

pub(super) fn cas() -> &'static ClusterCas {
    static CAS: OnceLock<ClusterCas> = OnceLock::new();
    CAS.get_or_init(|| ClusterCas::generate("prod").unwrap())
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

pub fn base() -> &'static MasterConfig {
    static CFG: OnceLock<MasterConfig> = OnceLock::new();
    CFG.get_or_init(|| {
        config_for(
            cas(),
            "prod-b",
            ip("10.128.0.7"),
            &[("prod-a", ip("10.128.0.6")), ("prod-b", ip("10.128.0.7"))],
            InitialState::New,
        )
    })
}

/// Rendered files by path.
pub fn files(cfg: &MasterConfig) -> BTreeMap<String, WriteFile> {
    let ud = render_user_data(cfg);
    let body = ud
        .strip_prefix("#cloud-config\n")
        .expect("first line is #cloud-config");
    let cloud: CloudConfig = serde_norway::from_str(body).expect("user-data is YAML cloud-config");
    let mut out = BTreeMap::new();
    for f in cloud.write_files {
        assert!(
            f.path.starts_with('/') && !f.path.contains(".."),
            "{}",
            f.path
        );
        assert!(out.insert(f.path.clone(), f).is_none(), "written once");
    }
    out
}

pub(crate) fn pod(files: &BTreeMap<String, WriteFile>, name: &str) -> Pod {
    let f = &files[&format!("{}/{name}.yaml", paths::MANIFESTS)];
    serde_norway::from_str(&f.content).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub(crate) fn container<'a>(pod: &'a Pod, name: &str) -> &'a Container {
    pod.spec.containers.iter().find(|c| c.name == name).unwrap()
}

#[test]
fn user_data_is_cloud_config_yaml_with_runcmd_for_a_real_vm() {
    let ud = render_user_data(base());
    assert!(ud.starts_with("#cloud-config\n"));
    let cloud: CloudConfig = serde_norway::from_str(&ud).unwrap();
    let systemd: Vec<_> = cloud
        .runcmd
        .iter()
        .filter(|c| c[0] == "systemctl")
        .collect();
    assert_eq!(systemd[0], &["systemctl", "daemon-reload"]);
    assert_eq!(systemd[1], &["systemctl", "enable", "--now", "kubelet"]);
    let items = metadata_items(base());
    assert_eq!(items[0], ("user-data".into(), ud));
    assert_eq!(items[1], ("cluster-name".into(), "prod".into()));
}

#[test]
fn etcd_data_lives_on_the_data_disk_when_there_is_one() {
    let data_dir = |cfg: &MasterConfig| {
        let etcd = pod(&files(cfg), "etcd");
        let mount = container(&etcd, "etcd")
            .volume_mounts
            .iter()
            .find(|m| m.mount_path == paths::ETCD_DATA)
            .map(|m| m.name.clone())
            .expect("etcd's data dir is a volume");
        etcd.spec
            .volumes
            .iter()
            .find(|v| v.name == mount)
            .map(|v| v.host_path.path.clone())
            .unwrap()
    };
    let cloud = |cfg: &MasterConfig| -> CloudConfig {
        serde_norway::from_str(&render_user_data(cfg)).unwrap()
    };
    // With the disk: formatted once (never over existing data), mounted, and etcd's hostPath on it.
    let with = base();
    assert_eq!(data_dir(with), "/mnt/disks/master-pd/var/etcd");
    let c = cloud(with);
    assert_eq!(c.fs_setup.len(), 1);
    assert_eq!(c.fs_setup[0].device, "/dev/disk/by-id/google-master-pd");
    assert!(!c.fs_setup[0].overwrite, "an existing file system is kept");
    assert_eq!(
        c.mounts,
        vec![vec![
            "/dev/disk/by-id/google-master-pd".to_string(),
            "/mnt/disks/master-pd".into(),
            "ext4".into(),
            "defaults,nofail,discard".into(),
            "0".into(),
            "2".into(),
        ]]
    );
    // A disk grown by a roll: the new VM's first boot grows the file system to it (runcmd runs after mounts).
    assert_eq!(
        c.runcmd[0],
        ["resize2fs", "/dev/disk/by-id/google-master-pd"],
        "the file system is grown before the kubelet starts etcd"
    );
    // A replica made before data disks keeps etcd on its boot disk, and nothing mounts.
    let mut without = base().clone();
    without.data_disk = false;
    assert_eq!(data_dir(&without), paths::ETCD_DATA);
    assert!(cloud(&without).fs_setup.is_empty() && cloud(&without).mounts.is_empty());
    assert!(cloud(&without).runcmd.iter().all(|c| c[0] != "resize2fs"));
}

#[test]
fn every_contract_file_is_written_and_every_manifest_is_a_pod() {
    let files = files(base());
    for p in [
        paths::ETCD_CA,
        paths::ETCD_PEER_CRT,
        paths::ETCD_PEER_KEY,
        paths::ETCD_CLIENT_CA,
        paths::ETCD_SERVER_CRT,
        paths::ETCD_SERVER_KEY,
        paths::ETCD_APISERVER_CLIENT_CRT,
        paths::ETCD_APISERVER_CLIENT_KEY,
        paths::CA,
        paths::APISERVER_CRT,
        paths::APISERVER_KEY,
        paths::KUBELET_CONFIG,
        paths::KUBELET_KUBECONFIG,
        paths::MONIT_KUBELET,
        paths::GCE_CONF,
    ] {
        assert!(files.contains_key(p), "missing {p}");
    }
    let manifests: Vec<_> = files
        .keys()
        .filter(|p| p.starts_with(paths::MANIFESTS))
        .cloned()
        .collect();
    assert_eq!(manifests.len(), 6, "{manifests:?}");
    for m in manifests {
        let p: Pod = serde_norway::from_str(&files[&m].content).unwrap();
        assert_eq!(
            (p.api_version.as_str(), p.kind.as_str()),
            ("v1", "Pod"),
            "{m}"
        );
        assert!(p.spec.host_network);
        // Every flag is --flag=value after the program (the contract rejects positional arguments).
        for c in &p.spec.containers {
            for arg in c.command.iter().skip(1) {
                assert!(arg.starts_with("--") && arg.contains('='), "{m}: {arg}");
            }
        }
    }
    // The TLS files hold exactly the issued material.
    let c = &base().certs;
    assert_eq!(files[paths::APISERVER_CRT].content, c.api_server.cert_pem);
    assert_eq!(files[paths::ETCD_SERVER_KEY].content, c.etcd_server.key_pem);
    assert_eq!(files[paths::ETCD_CA].content, cas().etcd_peer_ca.cert_pem);
    assert_eq!(
        files[paths::ETCD_CLIENT_CA].content,
        cas().etcd_client_ca.cert_pem
    );
    assert_eq!(files[paths::CA].content, cas().cluster_ca.cert_pem);
}

#[test]
fn private_keys_are_0600_and_no_ca_key_reaches_a_master() {
    let files = files(base());
    let mut keys = Vec::new();
    for f in files.values() {
        if f.content.contains("PRIVATE KEY") {
            keys.push(f.path.as_str());
            assert_eq!(f.permissions, "0600", "{}", f.path);
        } else if f.path.ends_with(".key") {
            panic!("{} has no key", f.path);
        }
        for ca in [
            &cas().cluster_ca,
            &cas().etcd_peer_ca,
            &cas().etcd_client_ca,
        ] {
            assert!(
                !f.content.contains(ca.key_pem.trim()),
                "{} holds a CA key",
                f.path
            );
        }
        // The one executable is the node-runtime script, which `runcmd` runs; it holds no secret.
        assert!(
            f.permissions == "0600"
                || f.permissions == "0644"
                || (f.path == super::runtime::SCRIPT && f.permissions == "0755"),
            "{}",
            f.path
        );
    }
    // One key per leaf certificate (11, since the kube-apiserver-healthcheck sidecar got its client cert) and the
    // service account key; named, so a key that appears or disappears says which.
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "/etc/srv/kubernetes/etcd-peer.key",
            "/etc/srv/kubernetes/pki/apiserver-kubelet-client.key",
            "/etc/srv/kubernetes/pki/apiserver.key",
            "/etc/srv/kubernetes/pki/cluster-autoscaler.key",
            "/etc/srv/kubernetes/pki/etcd-apiserver-client.key",
            "/etc/srv/kubernetes/pki/etcd-apiserver-server.key",
            "/etc/srv/kubernetes/pki/kube-addon-manager.key",
            "/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.key",
            "/etc/srv/kubernetes/pki/kube-controller-manager.key",
            "/etc/srv/kubernetes/pki/kube-scheduler.key",
            "/etc/srv/kubernetes/pki/kubelet.key",
            "/etc/srv/kubernetes/pki/service-account.key",
        ]
    );
}

fn contract_etcd(state: &str) -> Vec<String> {
    [
        "/usr/local/bin/etcd",
        "--name=prod-b",
        "--data-dir=/var/lib/etcd",
        "--listen-peer-urls=https://10.128.0.7:2380",
        "--listen-client-urls=https://10.128.0.7:2379,https://127.0.0.1:2379",
        "--advertise-client-urls=https://10.128.0.7:2379",
        "--initial-advertise-peer-urls=https://10.128.0.7:2380",
        "--initial-cluster=prod-a=https://10.128.0.6:2380,prod-b=https://10.128.0.7:2380",
        &format!("--initial-cluster-state={state}"),
        "--initial-cluster-token=prod",
        "--client-cert-auth=true",
        "--trusted-ca-file=/etc/srv/kubernetes/pki/etcd-apiserver-ca.crt",
        "--cert-file=/etc/srv/kubernetes/pki/etcd-apiserver-server.crt",
        "--key-file=/etc/srv/kubernetes/pki/etcd-apiserver-server.key",
        "--peer-client-cert-auth=true",
        "--peer-trusted-ca-file=/etc/srv/kubernetes/etcd-ca.crt",
        "--peer-cert-file=/etc/srv/kubernetes/etcd-peer.crt",
        "--peer-key-file=/etc/srv/kubernetes/etcd-peer.key",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn etcd_command_is_exactly_the_contract_for_new_and_existing_members() {
    let p = pod(&files(base()), "etcd");
    assert_eq!(p.metadata.name, "etcd-server");
    assert_eq!(p.metadata.namespace, "kube-system");
    assert_eq!(p.spec.priority_class_name, "system-node-critical");
    let etcd = container(&p, "etcd");
    assert!(etcd.image.starts_with("registry.k8s.io/etcd:3.4."));
    assert_eq!(etcd.command, contract_etcd("new"));

    let mut joining = base().clone();
    joining.initial_state = InitialState::Existing;
    let p = pod(&files(&joining), "etcd");
    assert_eq!(container(&p, "etcd").command, contract_etcd("existing"));
}

pub(crate) fn flags(c: &Container) -> BTreeMap<String, String> {
    c.command
        .iter()
        .skip(1)
        .map(|a| {
            let (k, v) = a.trim_start_matches("--").split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn apiserver_has_the_contract_flags_and_the_healthcheck_sidecar() {
    let p = pod(&files(base()), "kube-apiserver");
    let f = flags(container(&p, "kube-apiserver"));
    for (k, v) in [
        ("secure-port", "443"),
        ("tls-cert-file", "/etc/srv/kubernetes/pki/apiserver.crt"),
        (
            "tls-private-key-file",
            "/etc/srv/kubernetes/pki/apiserver.key",
        ),
        ("etcd-servers", "https://127.0.0.1:2379"),
        (
            "etcd-cafile",
            "/etc/srv/kubernetes/pki/etcd-apiserver-ca.crt",
        ),
        (
            "etcd-certfile",
            "/etc/srv/kubernetes/pki/etcd-apiserver-client.crt",
        ),
        (
            "etcd-keyfile",
            "/etc/srv/kubernetes/pki/etcd-apiserver-client.key",
        ),
        ("advertise-address", "34.1.2.3"),
        ("client-ca-file", "/etc/srv/kubernetes/pki/ca.crt"),
        ("service-cluster-ip-range", "10.0.0.0/16"),
    ] {
        assert_eq!(f.get(k).map(String::as_str), Some(v), "--{k}");
    }
    // Removed in 1.13; quorum reads are unconditional (see the module docs).
    assert!(!f.contains_key("etcd-quorum-read"));
    // Exactly the flags kops' program defines (cmd/kube-apiserver-healthcheck/main.go), to its own entrypoint.
    let hc = container(&p, "healthcheck");
    assert!(
        hc.command.is_empty(),
        "the image's entrypoint is the program"
    );
    assert_eq!(
        hc.args,
        [
            "--ca-cert=/etc/srv/kubernetes/pki/ca.crt",
            "--client-cert=/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.crt",
            "--client-key=/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.key",
        ]
    );
    let probe = hc.liveness_probe.as_ref().expect("sidecar liveness");
    assert_eq!(
        (probe.http_get.port, probe.http_get.path.as_str()),
        (3990, "/.kube-apiserver-healthcheck/healthz")
    );
    // The three files it reads, and nothing else of /etc/srv/kubernetes (the apiserver's keys are beside them).
    let mut mounted: Vec<&str> = hc
        .volume_mounts
        .iter()
        .map(|m| m.mount_path.as_str())
        .collect();
    mounted.sort();
    assert_eq!(
        mounted,
        [
            "/etc/srv/kubernetes/pki/ca.crt",
            "/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.crt",
            "/etc/srv/kubernetes/pki/kube-apiserver-healthcheck.key",
        ]
    );
    assert!(hc.volume_mounts.iter().all(|m| m.read_only));
}

#[test]
fn replicated_components_elect_a_leader() {
    let files = files(base());
    for name in [
        "kube-controller-manager",
        "kube-scheduler",
        "cluster-autoscaler",
    ] {
        let p = pod(&files, name);
        assert_eq!(
            flags(&p.spec.containers[0])
                .get("leader-elect")
                .map(String::as_str),
            Some("true"),
            "{name}"
        );
    }
    let addon = pod(&files, "kube-addon-manager");
    assert!(
        addon.spec.containers[0]
            .env
            .iter()
            .any(|e| e.name == "ADDON_MANAGER_LEADER_ELECTION" && e.value == "true")
    );
}

#[test]
fn kubelet_talks_to_the_static_ip_never_a_replica() {
    let rendered = files(base());
    let kc: Kubeconfig =
        serde_norway::from_str(&rendered[paths::KUBELET_KUBECONFIG].content).unwrap();
    assert_eq!(kc.clusters[0].item.cluster.server, "https://34.1.2.3");
    assert_eq!(kc.users[0].name, "system:node:prod-b");
    let kcfg: KubeletConfiguration =
        serde_norway::from_str(&rendered[paths::KUBELET_CONFIG].content).unwrap();
    assert_eq!(kcfg.static_pod_path, "/etc/kubernetes/manifests");
    assert_eq!(kcfg.cluster_dns, ["10.0.0.10"]);
    assert!(
        rendered[paths::MONIT_KUBELET]
            .content
            .contains("10248/healthz")
    );
    // Components on the master use their own replica's apiserver.
    let cm: Kubeconfig = serde_norway::from_str(
        &rendered["/etc/srv/kubernetes/kube-controller-manager/kubeconfig"].content,
    )
    .unwrap();
    assert_eq!(cm.clusters[0].item.cluster.server, "https://127.0.0.1:443");

    let mut other_port = base().clone();
    other_port.api_port = 8443;
    let kc: Kubeconfig =
        serde_norway::from_str(&files(&other_port)[paths::KUBELET_KUBECONFIG].content).unwrap();
    assert_eq!(kc.clusters[0].item.cluster.server, "https://34.1.2.3:8443");
}

#[test]
fn multizone_appears_in_gce_conf_only_when_set() {
    let single = &files(base())[paths::GCE_CONF].content;
    assert!(!single.contains("multizone"), "{single}");
    assert!(single.contains("project-id = \"my-project\""));
    assert!(single.contains("local-zone = \"europe-west1-b\""));
    let mut mz = base().clone();
    mz.multizone = true;
    let multi = &files(&mz)[paths::GCE_CONF].content;
    assert!(multi.lines().any(|l| l == "multizone = true"), "{multi}");
}

#[test]
fn check_refuses_what_no_master_could_run() {
    assert_eq!(check(base()), Ok(()));
    let mut c = base().clone();
    c.etcd_quorum_read = false;
    assert_eq!(check(&c), Err(MasterError::QuorumReadOff));
    let mut c = base().clone();
    c.initial_cluster.retain(|(n, _)| n != "prod-b");
    assert!(matches!(
        check(&c),
        Err(MasterError::NotInInitialCluster { .. })
    ));
    let mut c = base().clone();
    c.initial_cluster.push(("prod-a".into(), ip("10.128.0.9")));
    assert_eq!(
        check(&c),
        Err(MasterError::DuplicateMember("prod-a".into()))
    );
    let mut c = base().clone();
    c.service_cluster_ip_range = "10.0.0.0/29".parse().unwrap();
    assert!(matches!(
        check(&c),
        Err(MasterError::ServiceRangeTooSmall(_))
    ));
}

/// A rotation of the service-account key: the API servers verify the signing key and the other one, from one
/// file, signing key first; only a public key is taken as the other one.
#[test]
fn a_rotation_verifies_two_service_account_keys_and_signs_with_one() {
    let other = pki::service_account_key().unwrap();
    let other_public = pki::service_account_public_key(&other).unwrap();
    let mut c = base().clone();
    c.service_account_also_verifies = vec![other_public.clone()];
    assert_eq!(check(&c), Ok(()));
    let rendered = files(&c);
    let public = &rendered[paths::SERVICE_ACCOUNT_PUB].content;
    let signing = pki::service_account_public_key(&c.service_account_key_pem).unwrap();
    assert_eq!(
        pki::public_key_fingerprints(public).unwrap(),
        [
            pki::public_key_fingerprints(&signing).unwrap(),
            pki::public_key_fingerprints(&other_public).unwrap()
        ]
        .concat()
    );
    assert_eq!(
        pki::public_key_fingerprints(&files(base())[paths::SERVICE_ACCOUNT_PUB].content)
            .unwrap()
            .len(),
        1,
        "one key when none is rotated"
    );
    // A private key never goes where public keys do.
    c.service_account_also_verifies = vec![other];
    assert!(matches!(check(&c), Err(MasterError::ServiceAccountKey(_))));
}

#[test]
fn service_ips_and_debug() {
    let r: Ipv4Net = "10.96.0.0/12".parse().unwrap();
    assert_eq!(first_service_ip(&r), ip("10.96.0.1"));
    assert_eq!(dns_service_ip(&r), ip("10.96.0.10"));
    let dbg = format!("{:?}", base());
    assert!(
        !dbg.contains("PRIVATE KEY") && dbg.contains("prod-b"),
        "{dbg}"
    );
}

#[test]
#[ignore = "prints the rendered user-data for a human to read"]
fn print_user_data() {
    println!("{}", render_user_data(base()));
}

fn restoring(image: &str) -> MasterConfig {
    let mut cfg = base().clone();
    cfg.initial_state = InitialState::RestoreFromSnapshot;
    cfg.etcd_image = image.into();
    cfg.restore = Some(crate::SnapshotRestore {
        url: "gs://backups/prod/etcd-20261125T101500Z-rev42.db".into(),
        storage_endpoint: Some("http://127.0.0.1:4443/storage/v1/".into()),
        bump_revision: None,
        sha256: Some("ab".repeat(32)),
    });
    cfg
}

#[test]
fn a_restoring_etcd_fetches_and_restores_its_snapshot_before_it_starts() {
    for (image, tool, api_env) in [
        (
            "registry.k8s.io/etcd:3.4.13-0",
            "/usr/local/bin/etcdctl",
            true,
        ),
        // The images carry no etcdutl (etcd-io/etcd#13764): 3.5 restores with its deprecated etcdctl too.
        (
            "registry.k8s.io/etcd:3.5.1-0",
            "/usr/local/bin/etcdctl",
            true,
        ),
    ] {
        let cfg = restoring(image);
        crate::check(&cfg).unwrap();
        let pod = super::manifests::etcd(&cfg);
        let init = &pod.spec.init_containers;
        assert_eq!(init.len(), 2, "{image}");
        assert_eq!(
            init[0].command,
            [
                "sh",
                "-c",
                super::manifests::FETCH_SNAPSHOT_TEXT,
                "fetch-snapshot",
                "gs://backups/prod/etcd-20261125T101500Z-rev42.db",
                "/var/lib/etcd-restore/snapshot.db",
                &"ab".repeat(32),
            ]
        );
        assert!(
            init[0]
                .env
                .iter()
                .any(|e| e.name == "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE"),
            "the custom endpoint reaches gcloud"
        );
        let restore = &init[1].command;
        assert_eq!(restore[0], tool, "{image}");
        assert_eq!(
            init[1].image, image,
            "the restore runs the cluster's own etcd"
        );
        assert!(restore.contains(&"--data-dir=/mnt/disks/master-pd/var/etcd".to_string()));
        assert!(restore.contains(&"--name=prod-b".to_string()));
        assert!(restore.contains(&"--initial-cluster=prod-b=https://10.128.0.7:2380".to_string()));
        assert_eq!(
            init[1]
                .env
                .iter()
                .any(|e| e.name == "ETCDCTL_API" && e.value == "3"),
            api_env,
            "{image}"
        );
        // etcd's restore makes the data directory itself: nothing may create it first.
        let data = pod.spec.volumes.iter().find(|v| v.name == "data").unwrap();
        assert_eq!(data.host_path.kind, None);
        assert!(
            !restore
                .iter()
                .any(|a| a.contains("bump-revision") || a.contains("mark-compacted")),
            "no bump asked, none rendered: {restore:?}"
        );
    }
    // An etcd with the flags (3.5.10+) moves the revision on and marks the old ones compacted.
    let mut cfg = restoring("registry.k8s.io/etcd:3.5.24-0");
    cfg.restore.as_mut().unwrap().bump_revision = Some(1_000_000_000);
    let pod = super::manifests::etcd(&cfg);
    let restore = &pod.spec.init_containers[1].command;
    assert!(
        restore.contains(&"--bump-revision=1000000000".to_string()),
        "{restore:?}"
    );
    assert!(
        restore.contains(&"--mark-compacted".to_string()),
        "{restore:?}"
    );
    // Any other start keeps the data directory created for etcd and has no init container.
    let normal = super::manifests::etcd(base());
    assert!(normal.spec.init_containers.is_empty());
    let data = normal
        .spec
        .volumes
        .iter()
        .find(|v| v.name == "data")
        .unwrap();
    assert_eq!(data.host_path.kind.as_deref(), Some("DirectoryOrCreate"));
}

#[test]
fn a_restore_needs_its_snapshot_and_only_a_restoring_start_has_one() {
    let mut cfg = restoring("registry.k8s.io/etcd:3.5.1-0");
    cfg.restore = None;
    assert_eq!(
        crate::check(&cfg),
        Err(crate::MasterError::RestoreMisconfigured)
    );
    let mut cfg = base().clone();
    cfg.restore = restoring("registry.k8s.io/etcd:3.5.1-0").restore;
    assert_eq!(
        crate::check(&cfg),
        Err(crate::MasterError::RestoreMisconfigured)
    );
}

/// Writes `text` to `dir/name` and checks it is POSIX sh that `sh -n` parses and shellcheck passes, as every
/// script a master runs must be (its /bin/sh is dash). Returns the file's path, for running it.
pub(super) fn assert_posix_sh(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    use std::process::Command;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let syntax = Command::new("sh").arg("-n").arg(&path).output().unwrap();
    assert!(syntax.status.success(), "{name}: {syntax:?}");
    let lint = Command::new("shellcheck")
        .args(["-s", "sh"])
        .arg(&path)
        .output()
        .expect("shellcheck is installed by `bash scripts/setup`");
    assert!(
        lint.status.success(),
        "shellcheck {name}: {}",
        String::from_utf8_lossy(&lint.stdout)
    );
    path
}

/// The snapshot fetch run for real, with a `gcloud` on PATH that copies a local file as `gcloud storage cp` copies
/// the object: the recorded SHA-256 lets only those bytes through, and etcd's restore finds no file otherwise.
#[test]
fn the_snapshot_fetch_lets_only_the_recorded_bytes_reach_etcd() {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let script = assert_posix_sh(
        dir.path(),
        "fetch-snapshot.sh",
        super::manifests::FETCH_SNAPSHOT_TEXT,
    );
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let gcloud = bin.join("gcloud");
    // `gcloud storage cp gs://<path> DEST`: the object is the local file at <path>.
    std::fs::write(&gcloud, "#!/bin/sh\ncp \"${3#gs://}\" \"$4\"\n").unwrap();
    std::fs::set_permissions(&gcloud, std::fs::Permissions::from_mode(0o755)).unwrap();
    // An etcd snapshot: the database, then its SHA-256; the backup records the database's digest.
    let db = b"an etcd database".as_slice();
    let trailer = ring::digest::digest(&ring::digest::SHA256, db);
    let snapshot = [db, trailer.as_ref()].concat();
    let object = dir.path().join("snapshot-object");
    std::fs::write(&object, &snapshot).unwrap();
    let recorded = super::keys::sha256_hex(db);
    let file = dir.path().join("snapshot.db");
    let run = |args: &[&str]| {
        Command::new("/bin/sh")
            .arg(&script)
            .args(args)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap()
    };
    let url = format!("gs://{}", object.display());
    let file_arg = file.to_str().unwrap();

    let ok = run(&[&url, file_arg, &recorded]);
    assert!(ok.status.success(), "{ok:?}");
    assert_eq!(std::fs::read(&file).unwrap(), snapshot);

    // Other bytes under the same name: refused, and no file is left for the restore.
    std::fs::write(
        &object,
        b"someone else's snapshot, long enough to have a trailer",
    )
    .unwrap();
    let refused = run(&[&url, file_arg, &recorded]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains(&format!("not the {recorded} recorded"))
            && why.contains("refusing to restore"),
        "{why}"
    );
    assert!(!file.exists() && !dir.path().join("snapshot.db.part").exists());

    // A snapshot taken by hand records no digest: fetched as it is.
    let unrecorded = run(&[&url, file_arg]);
    assert!(unrecorded.status.success(), "{unrecorded:?}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"someone else's snapshot, long enough to have a trailer"
    );
    // Too short to hold etcd's trailer: refused too.
    std::fs::write(&object, b"short").unwrap();
    let short = run(&[&url, file_arg, &recorded]);
    assert_eq!(short.status.code(), Some(1), "{short:?}");
    assert!(String::from_utf8_lossy(&short.stderr).contains("too small"));

    let usage = run(&[&url]);
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");
}
