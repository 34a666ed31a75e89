//! What import concludes from the GCE objects it finds (pure): which VMs are a cluster's replicas when they carry
//! no label (kube-up's names), the cluster's primary zone, and the settings every replica shares.

use std::collections::BTreeMap;

/// Whether `instance` is named as kube-up names the masters of `master`: the first one `<master>`, later ones
/// `<master>-xyz` (three characters; kube-up uses hex, this provider's default names use letters).
pub fn is_replica_name(instance: &str, master: &str) -> bool {
    if instance == master {
        return true;
    }
    instance
        .strip_prefix(master)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|s| {
            s.len() == 3
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// The cluster's primary zone as far as the replicas tell it: the zone they all share, else the zone of the
/// first master kube-up made (named exactly `<master>`). `None` when they are spread and none is named so: the
/// primary zone cannot be read back then.
pub fn primary_zone(replicas: &[(String, String)], master: &str) -> Option<String> {
    let (_, first) = replicas.first()?;
    if replicas.iter().all(|(_, z)| z == first) {
        return Some(first.clone());
    }
    replicas
        .iter()
        .find(|(n, _)| n == master)
        .map(|(_, z)| z.clone())
}

/// The labels every replica carries with the same value: the cluster's labels (a replica's own labels are those
/// on top). Empty without replicas.
pub fn shared_labels(replicas: &[BTreeMap<String, String>]) -> BTreeMap<String, String> {
    let Some((first, rest)) = replicas.split_first() else {
        return BTreeMap::new();
    };
    first
        .iter()
        .filter(|(k, v)| rest.iter().all(|m| m.get(*k) == Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_up_names_are_the_master_and_three_character_suffixes() {
        let cases = [
            ("prod", true),
            ("prod-a1f", true),
            ("prod-abc", true),
            ("prod-minion-group-x1z2", false),
            ("prod-ab", false),
            ("prod-abcd", false),
            ("prod-AB1", false),
            ("prodx-abc", false),
            ("other", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_replica_name(name, "prod"), want, "{name}");
        }
    }

    #[test]
    fn the_primary_zone_is_shared_or_the_first_masters() {
        let r = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(n, z)| (n.to_string(), z.to_string()))
                .collect()
        };
        let cases = [
            (r(&[]), None),
            (r(&[("p-abc", "b"), ("p-def", "b")]), Some("b")),
            (r(&[("p-abc", "c"), ("p", "b")]), Some("b")),
            (r(&[("p-abc", "c"), ("p-def", "b")]), None),
        ];
        for (replicas, want) in cases {
            assert_eq!(
                primary_zone(&replicas, "p").as_deref(),
                want,
                "{replicas:?}"
            );
        }
    }

    #[test]
    fn shared_labels_are_the_intersection() {
        let m = |v: &[(&str, &str)]| -> BTreeMap<String, String> {
            v.iter()
                .map(|(k, x)| (k.to_string(), x.to_string()))
                .collect()
        };
        assert!(shared_labels(&[]).is_empty());
        assert_eq!(
            shared_labels(&[
                m(&[("env", "prod"), ("tier", "a")]),
                m(&[("env", "prod"), ("tier", "b")])
            ]),
            m(&[("env", "prod")])
        );
        assert_eq!(
            shared_labels(&[m(&[("env", "prod")])]),
            m(&[("env", "prod")])
        );
    }
}
