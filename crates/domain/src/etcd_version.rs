//! The etcd version a cluster's masters run (`etcd_version`), and whether a change of it may be planned.
//!
//! etcd's rules (etcd.io "Upgrade etcd from 3.4 to 3.5", and the 3.6 guide's mixed-version note): a cluster is
//! upgraded one minor at a time, by restarting members one by one on the newer binary, from a healthy cluster
//! whose members all run the older minor. Once every member runs the newer minor, etcd raises the *cluster
//! version* (what `/version` reports as `etcdcluster`) and starts writing data the older binary cannot read: from
//! then on, going back is a snapshot restore, not a binary swap. So going back is allowed only while the cluster
//! version is still the older minor. The facts come from etcd itself (each member's server version and the
//! cluster version), never from what the provider last wrote.

use super::topology::Refusal;

/// A pinned etcd release: its minor, its patch and the image tag of that patch on registry.k8s.io (Kubernetes'
/// etcd images are tagged `<etcd version>-<image revision>`, e.g. `3.5.24-0`). `current` marks the patch a minor
/// runs (`etcd_version = "3.5"`); an older pin stays selectable by its patch, so a cluster that named it keeps
/// exactly the image it has.
struct Pinned {
    minor: &'static str,
    patch: &'static str,
    tag: &'static str,
    current: bool,
}

/// Oldest first. 3.4's pin is the image every master has run since the provider's first release, so a cluster
/// that never set `etcd_version` keeps exactly the image it has. 3.5 runs 3.5.24, the patch kubeadm pins for
/// Kubernetes 1.31 to 1.33; 3.5.1, its pin before, is kept by its patch only: etcd's maintainers advise against
/// 3.5.0 to 3.5.2 in production (a data inconsistency fixed in 3.5.3), so a cluster that says `"3.5"` rolls onto
/// 3.5.24, a patch change etcd allows in either direction.
const PINNED: &[Pinned] = &[
    Pinned {
        minor: "3.4",
        patch: "3.4.13",
        tag: "3.4.13-0",
        current: true,
    },
    Pinned {
        minor: "3.5",
        patch: "3.5.24",
        tag: "3.5.24-0",
        current: true,
    },
    Pinned {
        minor: "3.5",
        patch: "3.5.1",
        tag: "3.5.1-0",
        current: false,
    },
];

/// What a cluster that never set `etcd_version` runs: every master built before the setting existed ran etcd
/// 3.4, so a state without the attribute means this minor, and its builds keep their digest. A new cluster gets
/// the minor its Kubernetes release calls for instead (`kubernetes_version::etcd_for`).
pub const LEGACY: &str = "3.4";

const REPOSITORY: &str = "registry.k8s.io/etcd";

fn supported() -> String {
    let minors = PINNED
        .iter()
        .filter(|p| p.current)
        .map(|p| format!("\"{}\" (etcd {})", p.minor, p.patch))
        .collect::<Vec<_>>()
        .join(", ");
    let older = PINNED
        .iter()
        .filter(|p| !p.current)
        .map(|p| format!("\"{}\"", p.patch))
        .collect::<Vec<_>>()
        .join(", ");
    format!("{minors}; older pins kept by their patch: {older}")
}

/// `3.4` → `(3, 4)`; `3.5.1` → `(3, 5)`; `None` for anything else.
fn minor_of(v: &str) -> Option<(u32, u32)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Every pinned patch, current or kept (`3.4.13`, `3.5.24`, `3.5.1`): what a table test renders.
pub fn pinned_patches() -> Vec<&'static str> {
    PINNED.iter().map(|p| p.patch).collect()
}

/// The first patch of each minor whose restore can move etcd's revision on (`--bump-revision` and
/// `--mark-compacted`: etcd-io/etcd#16029 for 3.5.10, and 3.4.27's backport). Older patches restore without.
const RESTORE_BUMPS_FROM: &[(u32, u32, u32)] = &[(3, 4, 27), (3, 5, 10)];

/// Whether the etcd `version` (a minor, as its current pin, or a pinned patch) restores a snapshot with
/// `--bump-revision` and `--mark-compacted`: of the pins, 3.5.24 does, 3.4.13 and 3.5.1 do not.
pub fn restore_bumps_revision(version: &str) -> bool {
    let Some(p) = pinned(version) else {
        return false;
    };
    let mut parts = p.patch.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    RESTORE_BUMPS_FROM
        .iter()
        .any(|&(ma, mb, from)| (a, b) == (ma, mb) && c >= from)
}

/// A minor names its current pin; a patch names itself.
fn pinned(version: &str) -> Option<&'static Pinned> {
    PINNED
        .iter()
        .find(|p| (p.current && p.minor == version) || p.patch == version)
}

/// The validator of `etcd_version`: a supported minor (`"3.5"`) or a pinned patch (`"3.5.24"`, `"3.5.1"`).
pub fn check(version: &str) -> Result<(), (String, String)> {
    if pinned(version).is_some() {
        return Ok(());
    }
    let well_formed = version.split('.').count() <= 3
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && version.contains('.');
    let summary = if well_formed {
        format!("etcd {version} is not a version this provider runs")
    } else {
        format!("{version:?} is not an etcd version")
    };
    Err((
        summary,
        format!(
            "Set `etcd_version` to a minor ({}). Each minor runs one patch, the registry.k8s.io/etcd image the provider pins for it.",
            supported()
        ),
    ))
}

/// The etcd image a master runs for `version` (checked by [`check`]; an unknown one falls back to the default's,
/// which validation has refused before anything is built).
pub fn image(version: &str) -> String {
    let p = pinned(version).unwrap_or(&PINNED[0]);
    format!("{REPOSITORY}:{}", p.tag)
}

/// The `etcd_version` a running master's etcd image stands for (import): the minor of its tag when that tag is
/// the minor's current pin or an unpinned patch of a minor the provider runs (`registry.k8s.io/etcd:3.5.24-0` →
/// `3.5`), the patch when it is an older pin (`3.5.1-0` → `3.5.1`, so the imported cluster keeps its image), else
/// `None`.
pub fn version_of_image(image: &str) -> Option<String> {
    let (_, tag) = image.rsplit('/').next()?.split_once(':')?;
    if let Some(old) = PINNED.iter().find(|p| !p.current && p.tag == tag) {
        return Some(old.patch.to_string());
    }
    let m = minor(tag)?;
    PINNED.iter().any(|p| p.minor == m).then_some(m)
}

/// The minor `version` names, as etcd reports minors (`3.5`).
pub fn minor(version: &str) -> Option<String> {
    minor_of(version).map(|(a, b)| format!("{a}.{b}"))
}

/// What etcd says about its versions, read at plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdVersions {
    /// Every voting member: its name, the server version it reports (`None` when it did not answer) and whether it
    /// is healthy.
    pub members: Vec<MemberVersion>,
    /// The cluster version (`etcdcluster` of `/version`, e.g. `3.4.0`); `None` when no member answered it.
    pub cluster: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberVersion {
    pub name: String,
    pub server: Option<String>,
    pub healthy: bool,
}

/// How a plan that changes `etcd_version` from `from` to `to` is judged: refused with the rule it breaks, or
/// allowed with a warning that says what the apply will do. `observed` is `None` when the cluster has no replica
/// yet (nothing runs etcd, so nothing to check); `Some(Err(why))` when etcd could not be asked.
pub fn check_change(
    cluster: &str,
    from: &str,
    to: &str,
    observed: Option<Result<&EtcdVersions, &str>>,
) -> Result<Option<(String, String)>, Refusal> {
    let (Some(old), Some(new)) = (minor_of(from), minor_of(to)) else {
        return Ok(None);
    };
    if old == new {
        return Ok(None);
    }
    let (old_s, new_s) = (
        format!("{}.{}", old.0, old.1),
        format!("{}.{}", new.0, new.1),
    );
    let upgrade = new > old;
    if upgrade && (new.0 != old.0 || new.1 != old.1 + 1) {
        return Err((
            format!("etcd {old_s} cannot be upgraded to {new_s} in one step"),
            format!(
                "Rule: etcd upgrades one minor version at a time. Upgrade cluster {cluster} to the next minor first, apply, and continue from there."
            ),
        ));
    }
    let versions = match observed {
        None => return Ok(None),
        Some(Err(why)) => {
            return Err((
                format!(
                    "Cannot check etcd's versions before changing etcd_version of cluster {cluster}"
                ),
                format!(
                    "Rule: the provider changes etcd's version only after reading every member's version and the cluster version from etcd, and it could not: {why}. Make etcd reachable from where Terraform runs (see `etcd_client_source_ranges`), then plan again."
                ),
            ));
        }
        Some(Ok(v)) => v,
    };
    let cluster_minor = versions.cluster.as_deref().and_then(minor_of);
    if upgrade {
        let unhealthy: Vec<&str> = versions
            .members
            .iter()
            .filter(|m| !m.healthy)
            .map(|m| m.name.as_str())
            .collect();
        if !unhealthy.is_empty() {
            return Err((
                format!("etcd of cluster {cluster} is not healthy enough to upgrade"),
                format!(
                    "Rule: an etcd upgrade starts only when every member is healthy, since each member restarts in turn. Not healthy: {}. Repair them (plan shows what is wrong with each replica) and plan again.",
                    unhealthy.join(", ")
                ),
            ));
        }
        // A member already on the newer minor is an upgrade that was interrupted (or rolled back half way and
        // now resumed): it is where the upgrade takes every member.
        let elsewhere: Vec<String> = versions
            .members
            .iter()
            .filter(|m| {
                let mm = m.server.as_deref().and_then(minor_of);
                mm != Some(old) && mm != Some(new)
            })
            .map(|m| {
                format!(
                    "{} runs {}",
                    m.name,
                    m.server.as_deref().unwrap_or("an unknown version")
                )
            })
            .collect();
        if !elsewhere.is_empty() {
            return Err((
                format!("etcd of cluster {cluster} cannot be upgraded from {old_s} to {new_s}"),
                format!(
                    "Rule: an upgrade moves every member from the older minor to the next one; every member must run etcd {old_s} (or already {new_s}). {}.",
                    elsewhere.join("; ")
                ),
            ));
        }
        return Ok(Some((
            format!("etcd of cluster {cluster} will be upgraded from {old_s} to {new_s}"),
            format!(
                "Each replica restarts on etcd {to} in turn (its plan shows the roll). etcd raises the cluster version to {new_s} once every member runs it; until then, setting etcd_version back to \"{old_s}\" rolls the upgraded replicas back. After that, etcd cannot go back to {old_s}."
            ),
        )));
    }
    // A downgrade: only while the cluster version has not moved past the target.
    match cluster_minor {
        Some(c) if c > new => Err((
            format!("etcd of cluster {cluster} cannot go back from {old_s} to {new_s}"),
            format!(
                "Rule: etcd cannot downgrade once its cluster version has moved. The cluster version is {} (every member ran {}.{} and etcd now writes data etcd {new_s} cannot read), so going back would need a restore from a snapshot taken before the upgrade. Keep etcd_version = \"{from}\".",
                versions.cluster.as_deref().unwrap_or_default(),
                c.0,
                c.1
            ),
        )),
        Some(_) => Ok(Some((
            format!("etcd of cluster {cluster} goes back from {old_s} to {new_s}"),
            format!(
                "The cluster version is still {}, so replicas already on etcd {old_s} restart on etcd {new_s} in turn.",
                versions.cluster.as_deref().unwrap_or_default()
            ),
        ))),
        None => Err((
            format!("Cannot tell whether etcd of cluster {cluster} can go back to {new_s}"),
            "Rule: going back is allowed only while etcd's cluster version is still the older minor, and no member answered it. Make the replicas' etcd healthy and reachable, then plan again.".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, server: &str, healthy: bool) -> MemberVersion {
        MemberVersion {
            name: name.into(),
            server: (!server.is_empty()).then(|| server.into()),
            healthy,
        }
    }

    fn world(members: &[(&str, &str, bool)], cluster: &str) -> EtcdVersions {
        EtcdVersions {
            members: members.iter().map(|(n, s, h)| member(n, s, *h)).collect(),
            cluster: (!cluster.is_empty()).then(|| cluster.into()),
        }
    }

    #[test]
    fn versions_are_a_supported_minor_or_its_pinned_patch() {
        for ok in ["3.4", "3.5", "3.4.13", "3.5.24", "3.5.1"] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("3.6", "not a version this provider runs"),
            ("3.5.2", "not a version this provider runs"),
            ("3.5.21", "not a version this provider runs"),
            ("3", "not an etcd version"),
            ("v3.5", "not an etcd version"),
            ("latest", "not an etcd version"),
            ("3.5.", "not an etcd version"),
            ("", "not an etcd version"),
        ] {
            let (summary, detail) = check(bad).unwrap_err();
            assert!(summary.contains(says), "{bad}: {summary}");
            assert!(detail.contains("\"3.5\" (etcd 3.5.24)"), "{bad}: {detail}");
            assert!(
                detail.contains("older pins kept by their patch: \"3.5.1\""),
                "{bad}: {detail}"
            );
        }
    }

    #[test]
    fn a_minor_and_its_patch_pin_one_registry_image() {
        assert_eq!(image("3.4"), "registry.k8s.io/etcd:3.4.13-0");
        assert_eq!(image("3.4.13"), "registry.k8s.io/etcd:3.4.13-0");
        // A minor runs its current pin; the older 3.5 pin is had by naming its patch.
        assert_eq!(image("3.5"), "registry.k8s.io/etcd:3.5.24-0");
        assert_eq!(image("3.5.24"), "registry.k8s.io/etcd:3.5.24-0");
        assert_eq!(image("3.5.1"), "registry.k8s.io/etcd:3.5.1-0");
        assert_eq!(image(LEGACY), "registry.k8s.io/etcd:3.4.13-0");
        assert_eq!(minor("3.5.1"), Some("3.5".into()));
        for (version, bumps) in [
            ("3.5", true),
            ("3.5.24", true),
            ("3.5.1", false),
            ("3.4", false),
            ("3.4.13", false),
            ("3.6", false),
        ] {
            assert_eq!(restore_bumps_revision(version), bumps, "{version}");
        }
        // Import reads the version back from a master's image.
        assert_eq!(
            version_of_image("registry.k8s.io/etcd:3.5.24-0"),
            Some("3.5".into())
        );
        // An older pin is read back as its patch, so an imported cluster keeps the image it runs.
        assert_eq!(
            version_of_image("registry.k8s.io/etcd:3.5.1-0"),
            Some("3.5.1".into())
        );
        assert_eq!(
            image(&version_of_image("registry.k8s.io/etcd:3.5.1-0").unwrap()),
            "registry.k8s.io/etcd:3.5.1-0"
        );
        assert_eq!(
            version_of_image("registry.k8s.io/etcd:3.5.16-0"),
            Some("3.5".into())
        );
        assert_eq!(
            version_of_image("gcr.io/google_containers/etcd:3.4.13-0"),
            Some("3.4".into())
        );
        assert_eq!(version_of_image("registry.k8s.io/etcd:3.6.0-0"), None);
        assert_eq!(version_of_image("registry.k8s.io/etcd"), None);
    }

    #[test]
    fn changes_are_judged_by_etcds_own_versions() {
        let healthy34 = world(
            &[
                ("a", "3.4.23", true),
                ("b", "3.4.23", true),
                ("c", "3.4.23", true),
            ],
            "3.4.0",
        );
        let mixed = world(
            &[
                ("a", "3.5.1", true),
                ("b", "3.4.23", true),
                ("c", "3.4.23", true),
            ],
            "3.4.0",
        );
        let all35 = world(
            &[
                ("a", "3.5.1", true),
                ("b", "3.5.1", true),
                ("c", "3.5.1", true),
            ],
            "3.5.0",
        );
        let sick = world(
            &[
                ("a", "3.4.23", true),
                ("b", "", false),
                ("c", "3.4.23", true),
            ],
            "3.4.0",
        );
        let older = world(&[("a", "3.3.25", true), ("b", "3.4.23", true)], "3.3.0");
        let no_cluster_version = world(&[("a", "", false)], "");
        enum Want {
            Nothing,
            Warn(&'static str),
            Refuse(&'static str),
        }
        use Want::*;
        type Case<'a> = (
            &'a str,
            &'a str,
            &'a str,
            Option<Result<&'a EtcdVersions, &'a str>>,
            Want,
        );
        let table: &[Case] = &[
            ("same minor", "3.4", "3.4.13", Some(Ok(&healthy34)), Nothing),
            ("no replica yet", "3.4", "3.5", None, Nothing),
            (
                "upgrade, all on 3.4 and healthy",
                "3.4",
                "3.5",
                Some(Ok(&healthy34)),
                Warn("upgraded from 3.4 to 3.5"),
            ),
            (
                "upgrade resumed while mixed",
                "3.4",
                "3.5",
                Some(Ok(&mixed)),
                Warn("upgraded"),
            ),
            (
                "upgrade with a sick member",
                "3.4",
                "3.5",
                Some(Ok(&sick)),
                Refuse("every member is healthy"),
            ),
            (
                "upgrade from a member on another minor",
                "3.4",
                "3.5",
                Some(Ok(&older)),
                Refuse("a runs 3.3.25"),
            ),
            (
                "upgrade skipping a minor",
                "3.4",
                "3.6",
                Some(Ok(&healthy34)),
                Refuse("one minor version at a time"),
            ),
            (
                "upgrade with etcd unreadable",
                "3.4",
                "3.5",
                Some(Err("no member answered")),
                Refuse("no member answered"),
            ),
            (
                "back while the cluster version is 3.4",
                "3.5",
                "3.4",
                Some(Ok(&mixed)),
                Warn("still 3.4.0"),
            ),
            (
                "back once the cluster version is 3.5",
                "3.5",
                "3.4",
                Some(Ok(&all35)),
                Refuse("cannot downgrade once its cluster version has moved"),
            ),
            (
                "back with no cluster version read",
                "3.5",
                "3.4",
                Some(Ok(&no_cluster_version)),
                Refuse("no member answered it"),
            ),
            (
                "back with etcd unreadable",
                "3.5",
                "3.4",
                Some(Err("timeout")),
                Refuse("could not: timeout"),
            ),
        ];
        for (case, from, to, observed, want) in table {
            let got = check_change("prod", from, to, *observed);
            match (want, &got) {
                (Nothing, Ok(None)) => {}
                (Warn(s), Ok(Some((summary, detail))))
                    if summary.contains(s) || detail.contains(s) => {}
                (Refuse(s), Err((summary, detail)))
                    if summary.contains(s) || detail.contains(s) =>
                {
                    assert!(
                        detail.starts_with("Rule:"),
                        "{case}: the refusal names its rule: {detail}"
                    );
                }
                _ => panic!("{case}: got {got:?}"),
            }
        }
    }

    #[test]
    fn the_downgrade_refusal_says_why() {
        let all35 = world(&[("a", "3.5.1", true)], "3.5.0");
        let (summary, detail) = check_change("prod", "3.5", "3.4", Some(Ok(&all35))).unwrap_err();
        assert_eq!(
            summary,
            "etcd of cluster prod cannot go back from 3.5 to 3.4"
        );
        assert!(detail.contains("The cluster version is 3.5.0"), "{detail}");
        assert!(detail.contains("Keep etcd_version = \"3.5\""), "{detail}");
    }
}
