//! GCE labels: what GCE accepts as a key and a value, and the keys this provider writes itself, which a user must
//! not set (the provider would overwrite them, or worse, a user's value would claim or break its bookkeeping).
//! Checked at validate time, so a bad label fails the plan rather than the apply.

use std::collections::BTreeMap;

use super::{disruption, lock, roll};

/// The label every replica VM carries, so a cluster finds its replicas wherever they are in the region.
pub const CLUSTER_LABEL: &str = "ha-master-cluster";

/// Marks a replica VM whose join has not finished. The join clears it last, so a VM that still carries it when
/// another join holds the cluster's lock was left by a join that died (`domain::orphans`).
pub const JOINING_LABEL: &str = "ha-master-joining";

/// Names the replica a keys secret belongs to (secrets only: a VM is its replica), so a join can tell the keys
/// of a join that died before its VM existed (`domain::orphans`).
pub const REPLICA_LABEL: &str = "ha-master-replica";

/// Every label the provider writes on a VM or the static address.
pub const PROVIDER_LABELS: [&str; 9] = [
    CLUSTER_LABEL,
    JOINING_LABEL,
    roll::BUILD_LABEL,
    disruption::WINDOW_LABEL,
    lock::TOKEN,
    lock::HOLDER,
    lock::DOING,
    lock::SINCE,
    lock::RENEWED,
];

/// The prefixes of the provider's labels: reserved as a whole, so a label the provider adds later cannot collide
/// with one a user already set.
pub const PROVIDER_PREFIXES: [&str; 2] = ["ha-master-", "ha-lock-"];

/// The provider's labels on a VM (the static address carries the lock's five and the cluster's).
pub const VM_LABELS: [&str; 4] = [
    CLUSTER_LABEL,
    JOINING_LABEL,
    roll::BUILD_LABEL,
    disruption::WINDOW_LABEL,
];

/// GCE's limit on the labels of one object.
pub const MAX_LABELS_PER_OBJECT: usize = 64;
/// The room kept on each object for the provider's own labels: more than any object carries today (a VM four, the
/// static address six), and fixed, so a label the provider adds later does not lower the limit users plan against.
pub const PROVIDER_ROOM: usize = 8;
/// What a user may set: GCE's limit less the provider's room.
pub const MAX_USER_LABELS: usize = MAX_LABELS_PER_OBJECT - PROVIDER_ROOM;
/// GCE's limit on a key's and a value's length, in characters.
pub const MAX_LENGTH: usize = 63;

/// One bad label: the key it is about (`None` for the map as a whole), a summary and a detail that says the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelProblem {
    pub key: Option<String>,
    pub summary: String,
    pub detail: String,
}

pub fn is_provider_label(key: &str) -> bool {
    PROVIDER_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// GCE's character set for labels: lowercase letters (international ones too, and letters without case such as
/// CJK), digits, `_` and `-`.
fn allowed(c: char) -> bool {
    lowercase_letter(c) || c.is_numeric() || c == '_' || c == '-'
}

/// A lowercase letter in GCE's sense (`\p{Ll}` and `\p{Lo}`): any letter that is not uppercase.
fn lowercase_letter(c: char) -> bool {
    c.is_alphabetic() && !c.is_uppercase()
}

const RULE: &str = "GCE label keys are 1-63 characters and start with a lowercase letter; keys and values (0-63 characters) contain only lowercase letters, digits, `_` and `-` (international lowercase letters are allowed).";

fn key_problem(key: &str) -> Option<String> {
    let length = key.chars().count();
    if length == 0 {
        return Some("The key is empty".into());
    }
    if length > MAX_LENGTH {
        return Some(format!("The key is {length} characters long"));
    }
    let first = key.chars().next()?;
    if !lowercase_letter(first) {
        return Some(format!("The key starts with {first:?}"));
    }
    key.chars()
        .find(|c| !allowed(*c))
        .map(|c| format!("The key contains {c:?}"))
}

fn value_problem(value: &str) -> Option<String> {
    let length = value.chars().count();
    if length > MAX_LENGTH {
        return Some(format!("The value is {length} characters long"));
    }
    value
        .chars()
        .find(|c| !allowed(*c))
        .map(|c| format!("The value contains {c:?}"))
}

/// Every problem with a user's labels: GCE's rules for each key and value, the provider's own keys, the count.
pub fn check_labels(labels: &BTreeMap<String, String>) -> Vec<LabelProblem> {
    let mut problems = Vec::new();
    if labels.len() > MAX_USER_LABELS {
        problems.push(LabelProblem {
            key: None,
            summary: format!("Too many labels ({})", labels.len()),
            detail: format!(
                "GCE allows {MAX_LABELS_PER_OBJECT} labels on an object and the provider keeps {PROVIDER_ROOM} of them for its own, so set at most {MAX_USER_LABELS}.",
            ),
        });
    }
    for (key, value) in labels {
        let bad = |summary: String, detail: String| LabelProblem {
            key: Some(key.clone()),
            summary,
            detail,
        };
        if let Some(why) = key_problem(key) {
            problems.push(bad(
                format!("Invalid label key {key:?}"),
                format!("{why}. {RULE}"),
            ));
        } else if is_provider_label(key) {
            problems.push(bad(
                format!("Label {key:?} is the provider's own"),
                format!(
                    "The provider writes the labels starting with {} itself (e.g. `{CLUSTER_LABEL}`, which is how a cluster finds its replicas) and would overwrite this one. Remove it, or use another key.",
                    PROVIDER_PREFIXES.map(|p| format!("`{p}`")).join(" or ")
                ),
            ));
        }
        if let Some(why) = value_problem(value) {
            problems.push(bad(
                format!("Invalid value {value:?} of label {key:?}"),
                format!("{why}. {RULE}"),
            ));
        }
    }
    problems
}

/// The labels a cluster's objects carry: the provider's `default_labels` with the cluster's own `labels` over
/// them, so the cluster wins on a key both set (as with Google's provider's `default_labels`).
pub fn effective(
    defaults: &BTreeMap<String, String>,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut all = defaults.clone();
    all.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_labels_are_the_defaults_with_the_clusters_own_over_them() {
        let m = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        // (provider defaults, cluster labels, expected)
        let cases = [
            (m(&[]), m(&[]), m(&[])),
            (m(&[("env", "prod")]), m(&[]), m(&[("env", "prod")])),
            (m(&[]), m(&[("team", "a")]), m(&[("team", "a")])),
            (
                m(&[("env", "prod"), ("team", "infra")]),
                m(&[("team", "a")]),
                m(&[("env", "prod"), ("team", "a")]),
            ),
        ];
        for (defaults, own, want) in cases {
            assert_eq!(effective(&defaults, &own), want, "{defaults:?} {own:?}");
        }
    }

    fn one(key: &str, value: &str) -> Vec<LabelProblem> {
        check_labels(&[(key.to_string(), value.to_string())].into())
    }

    #[test]
    fn accepts_what_gce_accepts() {
        let long = "a".repeat(63);
        for (key, value) in [
            ("team", "x-y_1"),
            ("env", ""),
            ("a", "0"),
            (long.as_str(), long.as_str()),
            ("équipe", "données"),
            ("チーム", "開発"),
            ("ha-other", "x"),
        ] {
            assert_eq!(one(key, value), [], "{key:?}={value:?}");
        }
    }

    #[test]
    fn refuses_what_gce_refuses_with_the_key_and_the_reason() {
        let long = "a".repeat(64);
        let cases = [
            ("Team", "x", "The key starts with 'T'"),
            ("", "x", "The key is empty"),
            ("1team", "x", "The key starts with '1'"),
            ("_team", "x", "The key starts with '_'"),
            ("team.name", "x", "The key contains '.'"),
            (long.as_str(), "x", "The key is 64 characters long"),
            ("team", "X Y", "The value contains 'X'"),
            ("team", "a b", "The value contains ' '"),
            ("team", long.as_str(), "The value is 64 characters long"),
            ("Équipe", "x", "The key starts with 'É'"),
        ];
        for (key, value, why) in cases {
            let problems = one(key, value);
            assert_eq!(problems.len(), 1, "{key:?}={value:?}: {problems:?}");
            assert_eq!(problems[0].key.as_deref(), Some(key));
            assert!(
                problems[0].detail.starts_with(why),
                "{key:?}: {}",
                problems[0].detail
            );
            assert!(
                problems[0].detail.contains("1-63 characters"),
                "{}",
                problems[0].detail
            );
        }
    }

    #[test]
    fn refuses_the_provider_s_own_labels() {
        for key in PROVIDER_LABELS
            .iter()
            .chain(&["ha-master-future", "ha-lock-x"])
        {
            let problems = one(key, "x");
            assert_eq!(problems.len(), 1, "{key}: {problems:?}");
            assert_eq!(problems[0].key.as_deref(), Some(*key));
            assert!(
                problems[0].summary.contains("the provider's own"),
                "{problems:?}"
            );
        }
    }

    #[test]
    fn every_label_the_provider_writes_is_reserved() {
        for key in PROVIDER_LABELS {
            assert!(is_provider_label(key), "{key}");
            assert!(
                one(key, "x")
                    .iter()
                    .all(|p| !p.summary.starts_with("Invalid")),
                "{key} breaks GCE's own rules"
            );
        }
    }

    #[test]
    fn no_object_carries_more_provider_labels_than_their_room() {
        let on_address = 1 + [
            lock::TOKEN,
            lock::HOLDER,
            lock::DOING,
            lock::SINCE,
            lock::RENEWED,
        ]
        .len();
        assert!(VM_LABELS.len() <= PROVIDER_ROOM);
        assert!(on_address <= PROVIDER_ROOM, "{on_address}");
        for key in VM_LABELS {
            assert!(PROVIDER_LABELS.contains(&key), "{key}");
        }
    }

    #[test]
    fn counts_against_the_room_the_provider_leaves() {
        let labels = |n: usize| -> BTreeMap<String, String> {
            (0..n).map(|i| (format!("l{i}"), String::new())).collect()
        };
        assert_eq!(check_labels(&labels(MAX_USER_LABELS)), []);
        let problems = check_labels(&labels(MAX_USER_LABELS + 1));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, None);
        assert!(
            problems[0].detail.contains("at most 56"),
            "{}",
            problems[0].detail
        );
    }
}
