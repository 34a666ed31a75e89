//! Every supported release's master judged by the rules of the real programs (here, in `ops`, because the
//! releases are `domain`'s and what a release makes of a master is `ops::build`'s): ha-sim's Kubernetes contract
//! checker (`sim/src/contract`, the check a sim VM's boot runs) and the release's OpenAPI schemas
//! (`scripts/check-k8s-schemas`, PyPI kubernetes-validate). Then each defect that once stopped a real master is put
//! back, and the checker must refuse it with a sentence naming the component and the cause.

use ha_domain::{etcd_version, kubernetes_version};
use ha_master::tests::{base, files};
use ha_master::{MasterConfig, check, metadata_items, paths};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `base()` at Kubernetes `version` and etcd `etcd`.
fn master(version: &str, etcd: &str) -> MasterConfig {
    MasterConfig {
        kubernetes: super::build::kubernetes_release(version),
        etcd_image: etcd_version::image(etcd),
        ..base().clone()
    }
}

fn metadata(cfg: &MasterConfig) -> BTreeMap<String, String> {
    metadata_items(cfg).into_iter().collect()
}

fn judge(metadata: &BTreeMap<String, String>) -> Result<(), ha_sim::contract::Refusal> {
    let scratch = tempfile::tempdir().unwrap();
    ha_sim::contract::check_metadata(metadata, scratch.path())
}

#[test]
fn every_supported_release_and_etcd_pin_passes_the_contract() {
    assert!(
        ha_sim::contract::filecheck_program().is_some(),
        "k8s-filecheck is missing: run `bash scripts/setup`"
    );
    for version in kubernetes_version::pinned_versions() {
        for etcd in etcd_version::pinned_patches() {
            let cfg = master(&version, etcd);
            check(&cfg).unwrap();
            if let Err(refusal) = judge(&metadata(&cfg)) {
                panic!("Kubernetes {version}, etcd {etcd}: {refusal}");
            }
        }
    }
}

/// A restore, so the init containers that fetch and restore a snapshot are judged too.
fn restore() -> ha_master::SnapshotRestore {
    ha_master::SnapshotRestore {
        url: "gs://backups/prod/snapshot.db".into(),
        storage_endpoint: None,
        bump_revision: None,
        sha256: Some("0".repeat(64)),
    }
}

#[test]
fn no_container_of_any_release_can_read_a_key_it_does_not_use() {
    for version in kubernetes_version::pinned_versions() {
        for etcd in etcd_version::pinned_patches() {
            let cfg = MasterConfig {
                restore: Some(restore()),
                ..master(&version, etcd)
            };
            let exposed = ha_sim::contract::exposures(&metadata(&cfg)).unwrap();
            assert!(
                exposed.is_empty(),
                "Kubernetes {version}, etcd {etcd}:\n{}",
                exposed
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

/// The check itself: the sidecar given the whole of /etc/srv/kubernetes again (as every pod had it before
/// stop 47) can read the apiserver's keys, every component's kubeconfig and the service-account signing key.
#[test]
fn a_sidecar_given_the_whole_key_directory_is_an_exposure() {
    let cfg = master("1.35.0", "3.5.24");
    let md = edit(&cfg, &manifest("kube-apiserver"), |pod| {
        pod["spec"]["volumes"].as_sequence_mut().unwrap().push(
            serde_norway::from_str(&format!(
                "{{name: all, hostPath: {{path: {}}}}}",
                paths::SRV
            ))
            .unwrap(),
        );
        let hc = pod["spec"]["containers"]
            .as_sequence_mut()
            .unwrap()
            .iter_mut()
            .find(|c| c["name"].as_str() == Some("healthcheck"))
            .unwrap();
        hc["volumeMounts"] = serde_norway::from_str(&format!(
            "[{{name: all, mountPath: {}, readOnly: true}}]",
            paths::SRV
        ))
        .unwrap();
    });
    // It still boots: the exposure is no boot failure.
    judge(&md).unwrap();
    let exposed = ha_sim::contract::exposures(&md).unwrap();
    assert!(
        exposed.iter().all(|e| e.container == "healthcheck"),
        "{exposed:?}"
    );
    let files: Vec<&str> = exposed.iter().map(|e| e.file.as_str()).collect();
    for key in [
        paths::APISERVER_KEY,
        paths::SERVICE_ACCOUNT_KEY,
        paths::ETCD_PEER_KEY,
        "/etc/srv/kubernetes/kube-addon-manager/kubeconfig",
    ] {
        assert!(files.contains(&key), "want {key} in {files:?}");
    }
    assert!(
        !files.contains(&paths::HEALTHCHECK_CLIENT_KEY),
        "its own key is no exposure"
    );
    assert!(
        exposed[0]
            .to_string()
            .starts_with("container `healthcheck` of kube-apiserver.yaml can read "),
        "{}",
        exposed[0]
    );
}

/// The API server's kubelet client is in no group: without the master's binding to system:kubelet-api-admin,
/// every kubelet refuses its log streams and exec sessions.
#[test]
fn the_apiservers_kubelet_client_needs_its_binding() {
    for version in ["1.28.15", "1.35.0"] {
        let cfg = master(version, "3.5.24");
        let md = without(
            &cfg,
            &format!("{}/kubelet-api-admin-rbac.yaml", paths::ADDONS),
        );
        refused(
            &md,
            "kube-apiserver",
            &[
                "kubectl logs, exec",
                "User \"kube-apiserver-kubelet-client\" cannot get resource \"nodes/proxy\"",
            ],
        );
    }
}

/// Narrow mounts must still show each program every file it opens: etcd without its peer key's mount exits at
/// start, and so does the addon manager without its kubeconfig's (read from `KUBECTL_OPTS`).
#[test]
fn a_program_whose_own_file_is_not_mounted_is_refused() {
    let cfg = master("1.35.0", "3.5.24");
    let drop_mount = |container: &'static str, path: &'static str| {
        move |pod: &mut serde_norway::Value| {
            let c = pod["spec"]["containers"]
                .as_sequence_mut()
                .unwrap()
                .iter_mut()
                .find(|c| c["name"].as_str() == Some(container))
                .unwrap();
            let mounts = c["volumeMounts"].as_sequence_mut().unwrap();
            let before = mounts.len();
            mounts.retain(|m| m["mountPath"].as_str() != Some(path));
            assert_eq!(mounts.len() + 1, before, "{container} mounted {path}");
        }
    };
    let md = edit(
        &cfg,
        &manifest("etcd"),
        drop_mount("etcd", paths::ETCD_PEER_KEY),
    );
    refused(
        &md,
        "etcd",
        &["--peer-cert-file --peer-key-file", "no hostPath volume"],
    );
    let kubeconfig = "/etc/srv/kubernetes/kube-addon-manager/kubeconfig";
    let md = edit(
        &cfg,
        &manifest("kube-addon-manager"),
        drop_mount("kube-addon-manager", kubeconfig),
    );
    refused(&md, "kube-addon-manager", &["--kubeconfig", "no such file"]);
}

/// Edits one rendered manifest (or addon) of the user-data, as a defect in the renderer would have written it.
fn edit(
    cfg: &MasterConfig,
    path: &str,
    change: impl FnOnce(&mut serde_norway::Value),
) -> BTreeMap<String, String> {
    let mut md = metadata(cfg);
    let ud = md["user-data"].clone();
    let mut cloud: serde_norway::Value =
        serde_norway::from_str(ud.strip_prefix("#cloud-config\n").unwrap()).unwrap();
    let write_files = cloud["write_files"].as_sequence_mut().unwrap();
    let entry = write_files
        .iter_mut()
        .find(|f| f["path"].as_str() == Some(path))
        .unwrap_or_else(|| panic!("no {path}"));
    let mut doc: serde_norway::Value =
        serde_norway::from_str(entry["content"].as_str().unwrap()).unwrap();
    change(&mut doc);
    entry["content"] = serde_norway::Value::String(serde_norway::to_string(&doc).unwrap());
    md.insert(
        "user-data".into(),
        format!(
            "#cloud-config\n{}",
            serde_norway::to_string(&cloud).unwrap()
        ),
    );
    md
}

/// The user-data without one of its files.
fn without(cfg: &MasterConfig, path: &str) -> BTreeMap<String, String> {
    let mut md = metadata(cfg);
    let mut cloud: serde_norway::Value =
        serde_norway::from_str(md["user-data"].strip_prefix("#cloud-config\n").unwrap()).unwrap();
    let write_files = cloud["write_files"].as_sequence_mut().unwrap();
    let before = write_files.len();
    write_files.retain(|f| f["path"].as_str() != Some(path));
    assert_eq!(write_files.len() + 1, before, "{path} was rendered once");
    md.insert(
        "user-data".into(),
        format!(
            "#cloud-config\n{}",
            serde_norway::to_string(&cloud).unwrap()
        ),
    );
    md
}

fn manifest(name: &str) -> String {
    format!("{}/{name}.yaml", paths::MANIFESTS)
}

/// The `command` of container `name` in a pod document.
fn command_of<'a>(
    pod: &'a mut serde_norway::Value,
    name: &str,
) -> &'a mut Vec<serde_norway::Value> {
    pod["spec"]["containers"]
        .as_sequence_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"].as_str() == Some(name))
        .unwrap()["command"]
        .as_sequence_mut()
        .unwrap()
}

/// Every string of a pod document (flags, mount paths, hostPaths) that names `from`'s files names `to`'s.
fn retarget(doc: &mut serde_norway::Value, from: &str, to: &str) {
    match doc {
        serde_norway::Value::String(s) if s.contains(paths::SRV) => {
            *s = s
                .replace(&format!("/{from}/"), &format!("/{to}/"))
                .replace(&format!("/{from}."), &format!("/{to}."));
        }
        serde_norway::Value::Sequence(items) => {
            for v in items {
                retarget(v, from, to);
            }
        }
        serde_norway::Value::Mapping(m) => {
            for (_, v) in m.iter_mut() {
                retarget(v, from, to);
            }
        }
        _ => {}
    }
}

fn refused(md: &BTreeMap<String, String>, component: &str, cause: &[&str]) {
    let refusal = judge(md).expect_err("the defect must be refused");
    let sentence = refusal.to_string();
    assert_eq!(refusal.component, component, "{sentence}");
    for c in cause {
        assert!(sentence.contains(c), "want {c:?} in: {sentence}");
    }
}

#[test]
fn a_pkcs8_key_for_the_service_account_key_file_is_refused() {
    let cfg = master("1.35.0", "3.5.24");
    let md = edit(&cfg, &manifest("kube-apiserver"), |pod| {
        for arg in command_of(pod, "kube-apiserver") {
            if arg
                .as_str()
                .is_some_and(|a| a.starts_with("--service-account-key-file="))
            {
                *arg = format!("--service-account-key-file={}", paths::SERVICE_ACCOUNT_KEY).into();
            }
        }
    });
    refused(
        &md,
        "kube-apiserver",
        &[
            "--service-account-key-file",
            "data does not contain any valid RSA or ECDSA public keys",
        ],
    );
}

#[test]
fn an_autoscaler_without_run_as_user_cannot_read_its_kubeconfig() {
    let cfg = master("1.35.0", "3.5.24");
    let md = edit(&cfg, &manifest("cluster-autoscaler"), |pod| {
        pod["spec"]["containers"][0]
            .as_mapping_mut()
            .unwrap()
            .remove("securityContext");
    });
    refused(
        &md,
        "cluster-autoscaler",
        &["permission denied", "uid 65532", "0600"],
    );
}

#[test]
fn the_v30_cloud_controller_manager_runs_the_program_where_ko_put_it() {
    for version in ["1.30.14", "1.31.13"] {
        let cfg = master(version, "3.5.24");
        let md = edit(&cfg, &manifest("cloud-controller-manager"), |pod| {
            command_of(pod, "cloud-controller-manager")[0] = "/cloud-controller-manager".into();
        });
        refused(
            &md,
            "cloud-controller-manager",
            &[
                "no such file or directory",
                "/ko-app/cloud-controller-manager",
            ],
        );
    }
}

#[test]
fn the_cloud_controller_manager_on_the_controller_managers_identity_never_leads() {
    // 1.30: the controller manager's bootstrap roles name only its own lease. (From 1.31 upstream's
    // system::leader-locking-kube-controller-manager Role grants every lease in kube-system, for coordinated
    // leader election: sim/src/contract/rbac/bootstrap.yaml.)
    let cfg = master("1.30.14", "3.5.24");
    // The controller manager's kubeconfig and the files it names, mounted where the CCM's own were.
    let md = edit(&cfg, &manifest("cloud-controller-manager"), |pod| {
        retarget(pod, "cloud-controller-manager", "kube-controller-manager");
    });
    refused(
        &md,
        "cloud-controller-manager",
        &[
            "never becomes leader",
            "system:kube-controller-manager",
            "leases",
            "cloud-controller-manager",
        ],
    );
}

#[test]
fn the_in_tree_cloud_provider_is_refused_where_it_was_removed() {
    let cfg = master("1.31.13", "3.5.24");
    let md = edit(&cfg, &manifest("kube-controller-manager"), |pod| {
        for arg in command_of(pod, "kube-controller-manager") {
            if arg.as_str() == Some("--cloud-provider=external") {
                *arg = "--cloud-provider=gce".into();
            }
        }
    });
    refused(
        &md,
        "kube-controller-manager",
        &["--cloud-provider=gce", "1.31"],
    );
}

#[test]
fn leader_migration_needs_its_lease_and_only_the_in_tree_side_of_1_30_takes_part() {
    // 1.29's controller manager migrates; without the master's grant it cannot take the migration lease.
    let cfg = master("1.29.15", "3.5.24");
    let f = files(&cfg);
    let kcm = &f[&manifest("kube-controller-manager")].content;
    assert!(kcm.contains("--enable-leader-migration=true"), "{kcm}");
    let md = without(
        &cfg,
        &format!("{}/leader-migration-rbac.yaml", paths::ADDONS),
    );
    refused(
        &md,
        "kube-controller-manager",
        &["leader migration", "cloud-provider-extraction-migration"],
    );

    // On 1.30 the cloud-controller-manager migrates and the controller manager, now without cloud controllers,
    // must not compete for the lease.
    let f = files(&master("1.30.14", "3.5.24"));
    assert!(
        !f[&manifest("kube-controller-manager")]
            .content
            .contains("leader-migration")
    );
    assert!(
        f[&manifest("cloud-controller-manager")]
            .content
            .contains("--enable-leader-migration=true")
    );
}

#[test]
fn manifests_and_addons_validate_against_each_releases_openapi_schema() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let checker = root.join("scripts/check-k8s-schemas");
    for version in kubernetes_version::pinned_versions() {
        let cfg = master(&version, "3.5.24");
        let dir = tempfile::tempdir().unwrap();
        let mut paths_out = Vec::new();
        for (path, f) in files(&cfg) {
            let yaml = path.starts_with(paths::MANIFESTS) || path.starts_with(paths::ADDONS);
            if yaml && path.ends_with(".yaml") {
                let out = dir
                    .path()
                    .join(path.trim_start_matches('/').replace('/', "_"));
                std::fs::write(&out, &f.content).unwrap();
                paths_out.push(out);
            }
        }
        let (minor, _) = version.rsplit_once('.').unwrap();
        let out = Command::new("python3")
            .arg(&checker)
            .args(["--kubernetes-version", minor])
            .args(&paths_out)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "Kubernetes {version}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_schema_violation_is_reported() {
    // The checker itself can fail: a misspelt field in a pod is refused (a kubelet would drop it silently).
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("pod.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n    image: i\n    volumeMount: []\n",
    )
    .unwrap();
    let out = Command::new("python3")
        .arg(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("scripts/check-k8s-schemas"),
        )
        .args(["--kubernetes-version", "1.35"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("volumeMount"),
        "{out:?}"
    );
}

/// Prints what the checker says of each defect put back (`cargo test print_refusals -- --ignored --nocapture`).
#[test]
#[ignore]
fn print_refusals() {
    let cfg = master("1.30.14", "3.5.24");
    for md in [
        edit(&cfg, &manifest("cloud-controller-manager"), |pod| {
            command_of(pod, "cloud-controller-manager")[0] = "/cloud-controller-manager".into();
        }),
        edit(&cfg, &manifest("cluster-autoscaler"), |pod| {
            pod["spec"]["containers"][0]
                .as_mapping_mut()
                .unwrap()
                .remove("securityContext");
        }),
        without(
            &cfg,
            &format!("{}/cloud-controller-manager-rbac.yaml", paths::ADDONS),
        ),
    ] {
        println!("{}\n", judge(&md).unwrap_err());
    }
}

/// A master that encrypts Secrets, its keys rendered into metadata so the contract sees the file (a real master
/// fetches it from its secret: `ha_master::check` refuses this delivery, so it is judged, never made).
fn encrypting(version: &str, etcd: &str) -> MasterConfig {
    MasterConfig {
        secrets_encryption: Some(
            ha_master::SecretsKey::from_payload(b"0123456789abcdef0123456789abcdef")
                .unwrap()
                .into(),
        ),
        ..master(version, etcd)
    }
}

#[test]
fn every_release_accepts_the_encryption_configuration_and_only_the_api_server_reads_it() {
    let key = |b: u8| ha_master::SecretsKey::from_payload(&[b; 32]).unwrap();
    // Every shape a change of key renders (docs/guides/secrets.md): one key; a key read while another is written;
    // keys read while nothing is written with one (`identity` first).
    let stages = [
        None,
        Some(ha_master::SecretsEncryption {
            writes: Some(key(1)),
            reads: vec![key(2)],
        }),
        Some(ha_master::SecretsEncryption {
            writes: None,
            reads: vec![key(1), key(2)],
        }),
    ];
    for version in kubernetes_version::pinned_versions() {
        for stage in &stages {
            let mut cfg = encrypting(&version, "3.5.24");
            if let Some(stage) = stage {
                cfg.secrets_encryption = Some(stage.clone());
            }
            let md = metadata(&cfg);
            if let Err(refusal) = judge(&md) {
                panic!("Kubernetes {version}, {stage:?}: {refusal}");
            }
            let exposed = ha_sim::contract::exposures(&md).unwrap();
            assert!(exposed.is_empty(), "Kubernetes {version}: {exposed:?}");
        }
    }
}

/// Each defect upstream's loader refuses, put into the file the flag names.
#[test]
fn an_encryption_configuration_upstream_would_refuse_is_refused() {
    let cfg = encrypting("1.35.0", "3.5.24");
    type Defect = fn(&mut serde_norway::Value);
    let defects: [(&str, Defect, &str); 3] = [
        (
            "a 31-byte key",
            // base64 of "0123456789abcdef0123456789abcde".
            |doc| {
                doc["resources"][0]["providers"][0]["secretbox"]["keys"][0]["secret"] =
                    "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZQ==".into();
            },
            "secret is not of the expected length",
        ),
        (
            "no providers",
            |doc| doc["resources"][0]["providers"] = serde_norway::Value::Sequence(vec![]),
            "providers",
        ),
        (
            "another kind",
            |doc| doc["kind"] = "EncryptionConfig".into(),
            "EncryptionConfig",
        ),
    ];
    for (what, defect, says) in defects {
        let md = edit(&cfg, ha_master::encryption::CONFIG_PATH, defect);
        let refusal = judge(&md).expect_err(what);
        let sentence = refusal.to_string();
        assert_eq!(refusal.component, "kube-apiserver", "{what}: {sentence}");
        assert!(
            sentence.contains("--encryption-provider-config") && sentence.contains(says),
            "{what}: want {says:?} in: {sentence}"
        );
    }
}

/// While the CAs rotate (`domain::ca_rotation`), each CA file is a bundle of the two: every release's programs
/// read it (client-go's parse, as the API server's CA loader and the kubeconfigs run it) with leaves still from the
/// current CAs (`started`) or already from the next ones (`switched`). A bundle of three is refused before any
/// program sees it.
#[test]
fn every_release_reads_the_ca_bundles_of_a_rotation() {
    let next = ha_pki::ClusterCas::generate_next("t", "r1").unwrap();
    let request = ha_pki::ReplicaCertRequest {
        name: base().replica_name.clone(),
        internal_ip: base().internal_ip,
        static_ip: base().static_ip,
        first_service_ip: ha_master::first_service_ip(&base().service_cluster_ip_range),
        dns_domain: base().dns_domain.clone(),
        validity: time::Duration::days(30),
    };
    let switched_certs = ha_pki::issue_replica_certs(&next, &request).unwrap();
    let bundle = |current: &str, next: &ha_pki::CertKey| {
        ha_pki::bundle_of([current, next.cert_pem.as_str()])
    };
    for version in kubernetes_version::pinned_versions() {
        for etcd in etcd_version::pinned_patches() {
            let mut cfg = master(&version, etcd);
            cfg.cas = ha_master::CaCerts {
                cluster_ca: bundle(&cfg.cas.cluster_ca, &next.cluster_ca),
                etcd_peer_ca: bundle(&cfg.cas.etcd_peer_ca, &next.etcd_peer_ca),
                etcd_client_ca: bundle(&cfg.cas.etcd_client_ca, &next.etcd_client_ca),
            };
            for (stage, certs) in [
                ("started", &cfg.certs.clone()),
                ("switched", &switched_certs),
            ] {
                cfg.certs = certs.clone();
                check(&cfg).unwrap();
                if let Err(refusal) = judge(&metadata(&cfg)) {
                    panic!("Kubernetes {version}, etcd {etcd}, {stage}: {refusal}");
                }
            }
        }
    }
    let mut three = base().clone();
    three.cas.cluster_ca = ha_pki::bundle_of([
        three.cas.cluster_ca.as_str(),
        next.cluster_ca.cert_pem.as_str(),
        next.etcd_peer_ca.cert_pem.as_str(),
    ]);
    assert!(matches!(
        check(&three),
        Err(ha_master::MasterError::CaBundle("cluster CA"))
    ));
}
