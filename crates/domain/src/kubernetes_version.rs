//! The Kubernetes version a cluster's masters run (`kubernetes_version`): which releases the provider can run,
//! what each needs on a master (images, and how it reaches Google Cloud), and whether a change may be planned.
//!
//! The rules are Kubernetes' version-skew policy (kubernetes.io "Version Skew Policy"): in an HA control plane
//! the newest and oldest kube-apiserver are at most one minor apart, so a control plane is upgraded one minor at a
//! time, every master reaching the new minor before the next upgrade starts; and a control plane's minor is never
//! downgraded (storage versions and API removals only go forward), while a patch may go back within a minor.
//! The versions judged are the ones the masters were built with (read from each VM's startup configuration), not
//! only what the provider last wrote, so a roll that stopped half way is seen as the mixed control plane it is.
//!
//! Cloud integration: the in-tree GCE cloud provider (`--cloud-provider=gce`) is off by default from 1.29
//! (`DisableCloudProviders`, re-enabled by its feature gate) and gone from 1.31. So 1.28 runs it in-tree, 1.29
//! in-tree through the gate, and from 1.30 the cloud controllers run in Google's cloud-controller-manager
//! (`registry.k8s.io/cloud-provider-gcp/cloud-controller-manager`, tagged `v<minor>.<patch>.<ccm patch>`).
//! Moving them between the two is Kubernetes' "leader migration" for replicated control planes: 1.29 and 1.30
//! controller managers (and 1.30's cloud-controller-manager) run with `--enable-leader-migration`, so during the
//! 1.29 → 1.30 roll the cloud controllers run in exactly one place; from 1.31 every master runs the external one.

use super::topology::Refusal;

/// How a release's masters reach Google Cloud for node, route and load-balancer controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudIntegration {
    /// kube-controller-manager and the kubelet run `--cloud-provider=gce`.
    InTree,
    /// The same, with `DisableCloudProviders=false,DisableKubeletCloudCredentialProviders=false` (1.29).
    InTreeByGate,
    /// kube-controller-manager and the kubelet run `--cloud-provider=external`; this cloud-controller-manager
    /// image runs the cloud controllers, with its program at `ccm_program` (the path differs by how the image was
    /// built: see [`KO_CCM`] and [`DOCKERFILE_CCM`]).
    External {
        ccm_image: &'static str,
        ccm_program: &'static str,
    },
}

/// A supported minor and what its masters run.
struct Release {
    minor: u32,
    /// The patch `kubernetes_version = "1.<minor>"` pins: a release published on registry.k8s.io.
    patch: u32,
    cloud: CloudIntegration,
    /// Whether its controller managers take part in leader migration (the in-tree → external hand-over).
    leader_migration: bool,
    /// cluster-autoscaler releases track Kubernetes minors (`v1.<minor>.0`).
    autoscaler_tag: &'static str,
    /// The `etcd_version` a new cluster of this release runs when it sets none. kubeadm pins etcd 3.5 for
    /// Kubernetes up to 1.33 (3.5.24-0 for 1.31 to 1.33) and etcd 3.6 from 1.34; the provider runs 3.4 and 3.5,
    /// so from 1.34 it is 3.5, the newest it runs, which those releases still support (the API server needs
    /// etcd 3.5 or later, whose storage API is the same).
    etcd: &'static str,
}

const CCM: &str = "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager";
/// Where cloud-provider-gcp's v30 images keep the program: `ko` built them (`tools/push-images` at `ccm/v30.0.0`
/// runs `ko build ./cmd/cloud-controller-manager/`; there is no Dockerfile), and ko puts a binary at
/// `/ko-app/<name>`.
pub const KO_CCM: &str = "/ko-app/cloud-controller-manager";
/// From v32 the repository's Dockerfile copies the program to `/cloud-controller-manager` on go-runner.
pub const DOCKERFILE_CCM: &str = "/cloud-controller-manager";

/// Oldest first; every minor between the oldest and the newest, since an upgrade passes through each of them.
/// 1.28.15 is what every master ran before the version was a setting.
const RELEASES: &[Release] = &[
    Release {
        minor: 28,
        patch: 15,
        cloud: CloudIntegration::InTree,
        leader_migration: false,
        autoscaler_tag: "v1.28.0",
        etcd: "3.5",
    },
    Release {
        minor: 29,
        patch: 15,
        cloud: CloudIntegration::InTreeByGate,
        leader_migration: true,
        autoscaler_tag: "v1.29.0",
        etcd: "3.5",
    },
    Release {
        minor: 30,
        patch: 14,
        cloud: CloudIntegration::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v30.0.0",
            ccm_program: KO_CCM,
        },
        leader_migration: true,
        autoscaler_tag: "v1.30.0",
        etcd: "3.5",
    },
    // The cloud-controller-manager may be one minor older than the API server (kOps runs v30 on 1.31).
    Release {
        minor: 31,
        patch: 13,
        cloud: CloudIntegration::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v30.0.0",
            ccm_program: KO_CCM,
        },
        leader_migration: false,
        autoscaler_tag: "v1.31.0",
        etcd: "3.5",
    },
    Release {
        minor: 32,
        patch: 9,
        cloud: CloudIntegration::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v32.2.5",
            ccm_program: DOCKERFILE_CCM,
        },
        leader_migration: false,
        autoscaler_tag: "v1.32.0",
        etcd: "3.5",
    },
    Release {
        minor: 33,
        patch: 5,
        cloud: CloudIntegration::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v32.2.5",
            ccm_program: DOCKERFILE_CCM,
        },
        leader_migration: false,
        autoscaler_tag: "v1.33.0",
        etcd: "3.5",
    },
    Release {
        minor: 34,
        patch: 1,
        cloud: CloudIntegration::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v34.0.0",
            ccm_program: DOCKERFILE_CCM,
        },
        leader_migration: false,
        autoscaler_tag: "v1.34.0",
        etcd: "3.5",
    },
    Release {
        minor: 35,
        patch: 0,
        cloud: CloudIntegration::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v35.0.0",
            ccm_program: DOCKERFILE_CCM,
        },
        leader_migration: false,
        autoscaler_tag: "v1.35.0",
        etcd: "3.5",
    },
    Release {
        minor: 36,
        patch: 0,
        cloud: CloudIntegration::External {
            ccm_image: "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v36.0.7",
            ccm_program: DOCKERFILE_CCM,
        },
        leader_migration: false,
        autoscaler_tag: "v1.36.0",
        etcd: "3.5",
    },
];

/// What a cluster that never set `kubernetes_version` runs: every master built before the setting existed ran it,
/// so a state without the attribute means this version, and its builds keep their digest.
pub const LEGACY: &str = "1.28.15";

/// What a new cluster runs when `kubernetes_version` is not set: a supported minor, its pinned patch.
pub const DEFAULT_FOR_NEW: &str = "1.35.0";

/// A version as the provider understands it: `1.<minor>.<patch>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub minor: u32,
    pub patch: u32,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1.{}.{}", self.minor, self.patch)
    }
}

fn release(minor: u32) -> Option<&'static Release> {
    RELEASES.iter().find(|r| r.minor == minor)
}

/// Every supported minor at its pinned patch, oldest first (`1.28.15`, …): what a table test renders.
pub fn pinned_versions() -> Vec<String> {
    RELEASES
        .iter()
        .map(|r| {
            Version {
                minor: r.minor,
                patch: r.patch,
            }
            .to_string()
        })
        .collect()
}

fn supported() -> String {
    let first = RELEASES.first().map_or(0, |r| r.minor);
    let last = RELEASES.last().map_or(0, |r| r.minor);
    format!("1.{first} to 1.{last}")
}

/// `"1.33"` → 1.33 at its pinned patch; `"1.33.4"` → 1.33.4; anything else (a `v`, a pre-release, another major,
/// an unsupported minor) → `None`.
pub fn parse(version: &str) -> Option<Version> {
    let parts: Vec<&str> = version.split('.').collect();
    let number = |s: &str| -> Option<u32> {
        (!s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (major, minor, patch) = match parts.as_slice() {
        [a, b] => (number(a)?, number(b)?, None),
        [a, b, c] => (number(a)?, number(b)?, Some(number(c)?)),
        _ => return None,
    };
    if major != 1 {
        return None;
    }
    let r = release(minor)?;
    Some(Version {
        minor,
        patch: patch.unwrap_or(r.patch),
    })
}

/// The validator of `kubernetes_version`.
pub fn check(version: &str) -> Result<(), (String, String)> {
    if parse(version).is_some() {
        return Ok(());
    }
    let looks_like_one = version.trim_start_matches('v').split('.').count() >= 2
        && version
            .trim_start_matches('v')
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let summary = if looks_like_one && !version.starts_with('v') {
        format!("Kubernetes {version} is not a version this provider runs")
    } else {
        format!("{version:?} is not a Kubernetes version")
    };
    Err((
        summary,
        format!(
            "Set `kubernetes_version` to a release from {} as `1.<minor>.<patch>` (e.g. \"{DEFAULT_FOR_NEW}\"), without a leading `v`, or to `1.<minor>` for the patch the provider pins for that minor.",
            supported()
        ),
    ))
}

/// What a master of `version` runs, as plain strings for its startup configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterRelease {
    /// The tag of kube-apiserver, kube-controller-manager and kube-scheduler (`v1.35.0`).
    pub image_tag: String,
    pub cloud: CloudIntegration,
    pub leader_migration: bool,
    pub autoscaler_image: String,
}

/// The release a master of `version` runs (checked by [`check`]; an unknown one is the legacy release, which
/// validation refused before anything is built).
pub fn master_release(version: &str) -> MasterRelease {
    let v = parse(version).or_else(|| parse(LEGACY)).unwrap_or(Version {
        minor: 28,
        patch: 15,
    });
    let r = release(v.minor).unwrap_or(&RELEASES[0]);
    MasterRelease {
        image_tag: format!("v{v}"),
        cloud: r.cloud,
        leader_migration: r.leader_migration,
        autoscaler_image: format!(
            "registry.k8s.io/autoscaling/cluster-autoscaler:{}",
            r.autoscaler_tag
        ),
    }
}

/// The `etcd_version` a new cluster of `version` gets when it sets none (see `Release::etcd`); `None` for a
/// version the provider does not run, which validation refuses.
pub fn etcd_for(version: &str) -> Option<&'static str> {
    parse(version)
        .and_then(|v| release(v.minor))
        .map(|r| r.etcd)
}

/// The `kubernetes_version` a master's kube-apiserver image stands for (`registry.k8s.io/kube-apiserver:v1.33.5`
/// → `1.33.5`), when the provider runs that minor.
pub fn version_of_image(image: &str) -> Option<Version> {
    let (_, tag) = image.rsplit('/').next()?.split_once(':')?;
    parse(tag.strip_prefix('v')?)
}

/// The version each replica's master was built with, read from its VM; `None` where it could not be read (a VM
/// gone or built by other means).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaVersion {
    pub replica: String,
    pub version: Option<Version>,
}

/// How a plan that changes `kubernetes_version` from `from` to `to` is judged: refused with the rule it breaks, or
/// allowed with a warning that says what the apply will do. `replicas` are the versions the masters run now.
pub fn check_change(
    cluster: &str,
    from: &str,
    to: &str,
    replicas: &[ReplicaVersion],
) -> Result<Option<(String, String)>, Refusal> {
    let (Some(old), Some(new)) = (parse(from), parse(to)) else {
        return Ok(None);
    };
    // What runs: the recorded version and every master's own, so a half-done roll is judged as mixed.
    let mut running: Vec<(String, Version)> = vec![(format!("cluster {cluster}"), old)];
    running.extend(
        replicas
            .iter()
            .filter_map(|r| r.version.map(|v| (format!("replica {}", r.replica), v))),
    );
    if let Some((who, v)) = running.iter().find(|(_, v)| v.minor > new.minor) {
        return Err((
            format!(
                "Kubernetes of cluster {cluster} cannot go back from 1.{} to 1.{}",
                v.minor, new.minor
            ),
            format!(
                "Rule: a control plane's minor version is never downgraded (only a patch may go back within a minor); {who} runs {v}. Set `kubernetes_version` to a 1.{} release. Going back a minor means restoring etcd from a backup taken before the upgrade.",
                v.minor
            ),
        ));
    }
    let behind: Vec<&(String, Version)> = running
        .iter()
        .filter(|(_, v)| new.minor > v.minor + 1)
        .collect();
    if let Some((_, v)) = behind.iter().min_by_key(|(_, v)| *v) {
        let who = behind
            .iter()
            .map(|(who, v)| format!("{who} runs {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let next = v.minor + 1;
        return Err((
            format!(
                "Kubernetes of cluster {cluster} cannot move from 1.{} to 1.{} in one step",
                v.minor, new.minor
            ),
            format!(
                "Rule: masters are upgraded one minor version at a time (Kubernetes' version-skew policy: API servers at most one minor apart); {who} runs {v}. Set `kubernetes_version = \"1.{next}\"`, apply, and continue from there."
            ),
        ));
    }
    if new == old && running.iter().all(|(_, v)| *v == new) {
        return Ok(None);
    }
    let lowest = running.iter().map(|(_, v)| *v).min().unwrap_or(old);
    let what = if new.minor > lowest.minor {
        format!("Kubernetes of cluster {cluster} will be upgraded from {lowest} to {new}")
    } else if new < old {
        format!("Kubernetes of cluster {cluster} goes back from {old} to {new} (a patch)")
    } else {
        format!("Kubernetes of cluster {cluster} moves from {old} to {new}")
    };
    let mut detail = format!(
        "Apply rolls the masters one at a time onto {new}: each replica leaves the load balancer, is rebuilt on its etcd data disk with the new kube-apiserver, kube-controller-manager, kube-scheduler and cluster-autoscaler, and comes back before the next one starts. Until the last one is done, the API servers behind the static IP answer with both versions, never more than one minor apart."
    );
    let from_cloud = release(lowest.minor).map(|r| r.cloud);
    let to_cloud = release(new.minor).map(|r| r.cloud);
    if matches!(
        from_cloud,
        Some(CloudIntegration::InTree | CloudIntegration::InTreeByGate)
    ) && matches!(to_cloud, Some(CloudIntegration::External { .. }))
    {
        detail.push_str(&format!(
            " The cloud controllers (nodes, routes, load balancers) move from kube-controller-manager to Google's cloud-controller-manager ({CCM}); leader migration keeps them running on exactly one master during the roll."
        ));
    }
    Ok(Some((what, detail)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32, patch: u32) -> Version {
        Version { minor, patch }
    }

    #[test]
    fn a_new_cluster_runs_the_etcd_its_release_calls_for() {
        for (k8s, etcd) in [
            ("1.28.15", Some("3.5")),
            ("1.33", Some("3.5")),
            ("1.34.1", Some("3.5")),
            (DEFAULT_FOR_NEW, Some("3.5")),
            ("1.36", Some("3.5")),
            ("1.27.16", None),
            ("v1.35.0", None),
        ] {
            assert_eq!(etcd_for(k8s), etcd, "{k8s}");
        }
        // Every release's etcd is one the provider runs, so a new cluster never plans what validation refuses.
        for r in RELEASES {
            assert_eq!(
                super::super::etcd_version::check(r.etcd),
                Ok(()),
                "1.{}",
                r.minor
            );
        }
    }

    #[test]
    fn versions_parse_to_a_supported_minor_and_patch() {
        let cases: &[(&str, Option<Version>)] = &[
            ("1.33.5", Some(v(33, 5))),
            ("1.33", Some(v(33, 5))),
            ("1.28", Some(v(28, 15))),
            ("1.36.2", Some(v(36, 2))),
            ("1.27.3", None),
            ("1.37.0", None),
            ("v1.33.5", None),
            ("2.33.5", None),
            ("1.33.5-rc.1", None),
            ("1..5", None),
            ("1", None),
            ("", None),
            ("1.33.5.1", None),
            ("1.33.99999", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse(s), *want, "{s:?}");
            assert_eq!(check(s).is_ok(), want.is_some(), "{s:?}");
        }
    }

    #[test]
    fn refusals_say_what_is_supported_and_how_to_write_it() {
        let (summary, detail) = check("1.27.3").unwrap_err();
        assert_eq!(
            summary,
            "Kubernetes 1.27.3 is not a version this provider runs"
        );
        assert!(detail.contains("1.28 to 1.36"), "{detail}");
        let (summary, detail) = check("v1.33.5").unwrap_err();
        assert_eq!(summary, "\"v1.33.5\" is not a Kubernetes version");
        assert!(detail.contains("without a leading `v`"), "{detail}");
    }

    #[test]
    fn every_minor_between_the_oldest_and_newest_is_supported_and_pins_a_patch() {
        for pair in RELEASES.windows(2) {
            assert_eq!(
                pair[1].minor,
                pair[0].minor + 1,
                "an upgrade must pass through every minor"
            );
        }
        assert_eq!(parse(LEGACY), Some(v(28, 15)));
        assert!(parse(DEFAULT_FOR_NEW).is_some());
    }

    #[test]
    fn each_release_reaches_google_cloud_as_its_kubernetes_allows() {
        // (version, in-tree?, leader migration?, ccm image tag, autoscaler tag)
        let cases: &[(&str, bool, bool, Option<&str>, &str)] = &[
            ("1.28", true, false, None, "v1.28.0"),
            ("1.29", true, true, None, "v1.29.0"),
            ("1.30", false, true, Some("v30.0.0"), "v1.30.0"),
            ("1.31", false, false, Some("v30.0.0"), "v1.31.0"),
            ("1.35.0", false, false, Some("v35.0.0"), "v1.35.0"),
        ];
        for (version, in_tree, migration, ccm, autoscaler) in cases {
            let r = master_release(version);
            assert_eq!(
                matches!(
                    r.cloud,
                    CloudIntegration::InTree | CloudIntegration::InTreeByGate
                ),
                *in_tree,
                "{version}"
            );
            assert_eq!(r.leader_migration, *migration, "{version}");
            let tag = match r.cloud {
                CloudIntegration::External { ccm_image, .. } => ccm_image.rsplit(':').next(),
                _ => None,
            };
            assert_eq!(tag, *ccm, "{version}");
            assert!(r.autoscaler_image.ends_with(autoscaler), "{version}");
        }
        assert_eq!(master_release("1.33").image_tag, "v1.33.5");
    }

    #[test]
    fn the_apiserver_image_reads_back_as_its_version() {
        assert_eq!(
            version_of_image("registry.k8s.io/kube-apiserver:v1.33.5"),
            Some(v(33, 5))
        );
        assert_eq!(
            version_of_image("registry.k8s.io/kube-apiserver:v1.20.0"),
            None
        );
        assert_eq!(version_of_image("kube-apiserver"), None);
    }

    fn at(replica: &str, version: &str) -> ReplicaVersion {
        ReplicaVersion {
            replica: replica.into(),
            version: parse(version),
        }
    }

    #[test]
    fn changes_are_judged_by_the_skew_policy_against_what_the_masters_run() {
        // (from, to, replicas, Ok(summary prefix) or Err(summary prefix))
        let all = |ver: &str| vec![at("a", ver), at("b", ver), at("c", ver)];
        type Case = (
            &'static str,
            &'static str,
            Vec<ReplicaVersion>,
            Result<Option<&'static str>, &'static str>,
        );
        let cases: Vec<Case> = vec![
            ("1.33.5", "1.33.5", all("1.33.5"), Ok(None)),
            ("1.33", "1.33.5", all("1.33.5"), Ok(None)),
            (
                "1.33.5",
                "1.34.1",
                all("1.33.5"),
                Ok(Some(
                    "Kubernetes of cluster c will be upgraded from 1.33.5 to 1.34.1",
                )),
            ),
            (
                "1.33.5",
                "1.33.7",
                all("1.33.5"),
                Ok(Some("Kubernetes of cluster c moves from 1.33.5 to 1.33.7")),
            ),
            (
                "1.33.7",
                "1.33.5",
                all("1.33.7"),
                Ok(Some(
                    "Kubernetes of cluster c goes back from 1.33.7 to 1.33.5 (a patch)",
                )),
            ),
            (
                "1.33.5",
                "1.35.0",
                all("1.33.5"),
                Err("Kubernetes of cluster c cannot move from 1.33 to 1.35 in one step"),
            ),
            (
                "1.34.1",
                "1.33.5",
                all("1.34.1"),
                Err("Kubernetes of cluster c cannot go back from 1.34 to 1.33"),
            ),
            // A roll that stopped half way: one master still on 1.33, so 1.35 would put them two minors apart.
            (
                "1.34.1",
                "1.35.0",
                vec![at("a", "1.34.1"), at("b", "1.33.5"), at("c", "1.34.1")],
                Err("Kubernetes of cluster c cannot move from 1.33 to 1.35 in one step"),
            ),
            // ... and finishing it is an upgrade from the oldest master.
            (
                "1.34.1",
                "1.34.1",
                vec![at("a", "1.34.1"), at("b", "1.33.5"), at("c", "1.34.1")],
                Ok(Some(
                    "Kubernetes of cluster c will be upgraded from 1.33.5 to 1.34.1",
                )),
            ),
            // Going back from a half-done upgrade would downgrade the masters already on the new minor.
            (
                "1.34.1",
                "1.33.5",
                vec![at("a", "1.34.1"), at("b", "1.33.5"), at("c", "1.33.5")],
                Err("Kubernetes of cluster c cannot go back from 1.34 to 1.33"),
            ),
            // A replica whose VM is gone says nothing.
            (
                "1.33.5",
                "1.34.1",
                vec![ReplicaVersion {
                    replica: "a".into(),
                    version: None,
                }],
                Ok(Some("Kubernetes of cluster c will be upgraded")),
            ),
            // Unparsable values were refused by the validator; nothing more to say here.
            ("1.33.5", "x", all("1.33.5"), Ok(None)),
        ];
        for (from, to, replicas, want) in cases {
            let got = check_change("c", from, to, &replicas);
            match (&got, &want) {
                (Ok(None), Ok(None)) => {}
                (Ok(Some((s, _))), Ok(Some(prefix))) => {
                    assert!(s.starts_with(prefix), "{from} -> {to}: {s}")
                }
                (Err((s, d)), Err(prefix)) => {
                    assert!(s.starts_with(prefix), "{from} -> {to}: {s}");
                    assert!(d.starts_with("Rule: "), "{from} -> {to}: {d}");
                }
                _ => panic!("{from} -> {to} with {replicas:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_move_to_the_external_cloud_controller_manager_is_announced() {
        let (_, detail) = check_change("c", "1.29", "1.30", &[]).unwrap().unwrap();
        assert!(detail.contains("cloud-controller-manager"), "{detail}");
        assert!(detail.contains("leader migration"), "{detail}");
        let (_, detail) = check_change("c", "1.33", "1.34", &[]).unwrap().unwrap();
        assert!(!detail.contains("leader migration"), "{detail}");
    }
}
