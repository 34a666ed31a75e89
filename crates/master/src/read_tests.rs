//! Reading a rendered configuration back gives what was rendered: the files import recovers and the settings it
//! learns from them.

use super::read::read_user_data;
use super::tests::{cas, config_for};
use super::*;

fn rendered(multizone: bool, domain: &str, range: &str) -> MasterConfig {
    let ip: Ipv4Addr = "10.0.0.5".parse().unwrap();
    let mut cfg = config_for(cas(), "prod", ip, &[("prod", ip)], InitialState::New);
    cfg.multizone = multizone;
    cfg.dns_domain = domain.into();
    cfg.service_cluster_ip_range = range.parse().unwrap();
    cfg
}

#[test]
fn files_settings_and_keys_read_back() {
    let cases = [
        (false, "cluster.local", "10.0.0.0/16"),
        (true, "corp.example", "10.96.0.0/12"),
    ];
    for (multizone, domain, range) in cases {
        let cfg = rendered(multizone, domain, range);
        let files = read_user_data(&render_user_data(&cfg)).unwrap();
        assert_eq!(files.multizone(), multizone);
        assert_eq!(files.cluster_domain().as_deref(), Some(domain));
        assert_eq!(files.etcd_image(), Some(cfg.etcd_image.clone()));
        assert_eq!(
            files
                .flag("kube-apiserver.yaml", "service-cluster-ip-range")
                .as_deref(),
            Some(range)
        );
        assert_eq!(files.get(paths::CA), Some(cfg.cas.cluster_ca.as_str()));
        assert_eq!(
            files.get(paths::ETCD_CA),
            Some(cfg.cas.etcd_peer_ca.as_str())
        );
        assert_eq!(
            files.get(paths::ETCD_CLIENT_CA),
            Some(cfg.cas.etcd_client_ca.as_str())
        );
        assert_eq!(
            files.get(paths::APISERVER_KEY),
            Some(cfg.certs.api_server.key_pem.as_str())
        );
        assert_eq!(
            files.get(paths::SERVICE_ACCOUNT_KEY),
            Some(cfg.service_account_key_pem.as_str())
        );
        assert_eq!(files.flag("etcd.yaml", "name").as_deref(), Some("prod"));
    }
}

#[test]
fn what_is_not_a_master_configuration_says_why() {
    assert!(
        read_user_data("#!/bin/bash\necho hi")
            .unwrap_err()
            .contains("#cloud-config")
    );
    assert!(
        read_user_data("#cloud-config\n: [")
            .unwrap_err()
            .contains("does not parse")
    );
    let files = read_user_data("#cloud-config\nwrite_files: []\n").unwrap();
    assert!(files.require(paths::CA).unwrap_err().contains(paths::CA));
    assert!(!files.multizone() && files.cluster_domain().is_none());
}

#[test]
fn the_etcd_image_reads_back_whatever_version_was_rendered() {
    let mut cfg = rendered(false, "cluster.local", "10.0.0.0/16");
    cfg.etcd_image = "registry.k8s.io/etcd:3.5.1-0".into();
    let files = read_user_data(&render_user_data(&cfg)).unwrap();
    assert_eq!(
        files.etcd_image().as_deref(),
        Some("registry.k8s.io/etcd:3.5.1-0")
    );
}

/// A release's images and cloud integration reach every place a master reads them, and read back.
#[test]
fn the_kubernetes_release_sets_images_and_cloud_flags_and_reads_back() {
    use crate::{CloudProvider, KubernetesRelease};
    let mut cfg = rendered(false, "cluster.local", "10.0.0.0/16");
    let files = read_user_data(&render_user_data(&cfg)).unwrap();
    assert_eq!(
        files.apiserver_image().as_deref(),
        Some("registry.k8s.io/kube-apiserver:v1.28.15")
    );
    assert_eq!(
        files
            .flag("kube-controller-manager.yaml", "cloud-provider")
            .as_deref(),
        Some("gce")
    );
    assert!(
        files
            .get(&format!(
                "{}/cloud-controller-manager.yaml",
                paths::MANIFESTS
            ))
            .is_none()
    );

    cfg.kubernetes = KubernetesRelease {
        image_tag: "v1.30.14".into(),
        cloud: CloudProvider::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v30.0.0".into(),
            ccm_program: "/ko-app/cloud-controller-manager".into(),
        },
        leader_migration: true,
        autoscaler_image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.30.0".into(),
    };
    let files = read_user_data(&render_user_data(&cfg)).unwrap();
    assert_eq!(
        files.apiserver_image().as_deref(),
        Some("registry.k8s.io/kube-apiserver:v1.30.14")
    );
    let kcm = "kube-controller-manager.yaml";
    assert_eq!(
        files.flag(kcm, "cloud-provider").as_deref(),
        Some("external")
    );
    assert_eq!(files.flag(kcm, "cloud-config"), None);
    // On the release that moves the cloud controllers out, only the cloud-controller-manager takes part in leader
    // migration; a controller manager without them must not compete for the lease (kubernetes.io, "Migrate
    // Replicated Control Plane To Use Cloud Controller Manager").
    assert_eq!(files.flag(kcm, "enable-leader-migration"), None);
    let ccm = "cloud-controller-manager.yaml";
    assert_eq!(files.flag(ccm, "cloud-provider").as_deref(), Some("gce"));
    assert_eq!(
        files.flag(ccm, "cloud-config").as_deref(),
        Some(paths::GCE_CONF)
    );
    assert_eq!(
        files.flag(ccm, "enable-leader-migration").as_deref(),
        Some("true")
    );
    let dropin = files.get(paths::KUBELET_DROPIN).unwrap();
    assert!(
        dropin.contains("--cloud-provider=external") && !dropin.contains("--cloud-config"),
        "{dropin}"
    );
    // The addon the addon manager applies: the cloud-controller-manager's own role and bindings, and the cloud node
    // controller's role bound to its service account.
    let rbac = files
        .get(&format!(
            "{}/cloud-controller-manager-rbac.yaml",
            paths::ADDONS
        ))
        .unwrap();
    let kinds: Vec<String> = serde_norway::Deserializer::from_str(rbac)
        .map(|doc| {
            let v = <serde_norway::Value as serde::Deserialize>::deserialize(doc).unwrap();
            v["kind"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "RoleBinding",
            "ClusterRoleBinding",
            "ClusterRole",
            "ClusterRoleBinding"
        ],
        "{rbac}"
    );
    let autoscaler = files
        .get(&format!("{}/cluster-autoscaler.yaml", paths::MANIFESTS))
        .unwrap();
    assert!(
        autoscaler.contains("cluster-autoscaler:v1.30.0"),
        "{autoscaler}"
    );

    // 1.29 keeps the in-tree provider through its feature gates, on the kubelet and the controller manager.
    cfg.kubernetes = KubernetesRelease {
        image_tag: "v1.29.15".into(),
        cloud: CloudProvider::InTreeByGate,
        leader_migration: true,
        autoscaler_image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.29.0".into(),
    };
    let files = read_user_data(&render_user_data(&cfg)).unwrap();
    let gates = "DisableCloudProviders=false,DisableKubeletCloudCredentialProviders=false";
    assert_eq!(files.flag(kcm, "feature-gates").as_deref(), Some(gates));
    assert_eq!(files.flag(kcm, "cloud-provider").as_deref(), Some("gce"));
    assert_eq!(
        files.flag(kcm, "enable-leader-migration").as_deref(),
        Some("true")
    );
    assert!(files.get(paths::KUBELET_DROPIN).unwrap().contains(gates));
    assert!(files.get(&format!("{}/{ccm}", paths::MANIFESTS)).is_none());
}
