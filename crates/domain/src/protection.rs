//! Deletion protection: the last copy of a control plane's data is never removed by accident. While the
//! cluster's `deletion_protection` is on, a leave that would remove the last voting etcd member is refused,
//! whatever the plan says (`-replace` of every replica plans every delete; the last one stops here). Removing
//! replicas down to one stays allowed: the data lives on in the survivors.
//!
//! Terraform plans each replica on its own, but one plan's removals run in one apply, so plan judges them
//! together (`check_leaves`, on the set `ops::plan_leaves` gathers): a plan whose removals take every voter is
//! refused before anything is touched, instead of deleting all but one and then stopping.

use std::collections::BTreeSet;

use super::guard::Verdict;
use super::topology::{Observed, Refusal};

/// The replicas one plan takes out of a cluster: removed for good, or replaced (destroyed, then created again,
/// as a rename or a zone move does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leaving {
    pub removed: BTreeSet<String>,
    pub replaced: BTreeSet<String>,
}

impl Leaving {
    fn leaves(&self, name: &str) -> bool {
        self.removed.contains(name) || self.replaced.contains(name)
    }

    fn count(&self) -> usize {
        self.removed.len() + self.replaced.len()
    }
}

/// "a", "a and b", "a, b and c".
pub fn listed<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    let names: Vec<S> = names.into_iter().collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.as_ref().to_string(),
        Some((last, rest)) => {
            let rest: Vec<&str> = rest.iter().map(AsRef::as_ref).collect();
            format!("{} and {}", rest.join(", "), last.as_ref())
        }
    }
}

/// What deletion protection says of one plan's leaves together. Replicas apply one at a time under the cluster's
/// lock, in whatever order Terraform starts them, and the last voter's delete is refused (`check_leave`), so:
/// - a voter that neither leaves nor is replaced holds the data, and every leave is fine;
/// - when every voter leaves and none of them comes back (only removals), or the one voter leaves or is replaced
///   (its new VM can join only after its delete), the apply would certainly stop at the last voter: refused;
/// - when every voter leaves but some are replaced, the apply finishes if a replacement joins before the last
///   voter's turn and stops at it otherwise, for a second apply to finish: said as a warning.
pub fn check_leaves(world: &Observed, leaving: &Leaving, protected: bool) -> Verdict {
    if !protected || leaving.count() == 0 {
        return Verdict::Fine;
    }
    // Who holds a committed copy: the voters, or with unknown membership every VM (`check_leave`).
    let mut holders: Vec<&str> = match &world.members {
        Some(members) => members
            .iter()
            .filter(|m| !m.is_learner)
            .map(|m| m.name.as_str())
            .collect(),
        None => world.instances.iter().map(String::as_str).collect(),
    };
    holders.sort_unstable();
    if holders.iter().any(|h| !leaving.leaves(h)) {
        return Verdict::Fine;
    }
    // One leave, or one holder (or none): each leave as apply judges it alone, which names the last voter.
    if leaving.count() == 1 || holders.len() <= 1 {
        let refusal = leaving
            .removed
            .iter()
            .chain(&leaving.replaced)
            .find_map(|me| check_leave(world, me, true).err());
        return refusal.map_or(Verdict::Fine, Verdict::Refuse);
    }
    let replaced_holders: Vec<&str> = holders
        .iter()
        .copied()
        .filter(|h| leaving.replaced.contains(*h))
        .collect();
    let all = listed(holders.iter().copied());
    let keep = holders.len().saturating_sub(1);
    if replaced_holders.is_empty() {
        return Verdict::Refuse((
            format!(
                "This plan removes every voting etcd member ({all}), and the cluster has deletion protection"
            ),
            format!(
                "Replicas are removed one at a time, and deletion protection keeps the last voter: the apply would remove {} and then stop with an error at the last one, a plan that cannot finish. Nothing was planned. Remove at most {keep} of these replicas in one apply (the last stays while `deletion_protection` is on), or, to delete the data on purpose, set `deletion_protection = false` on the ha_master_cluster and apply that first.",
                if keep == 1 {
                    "one".to_string()
                } else {
                    format!("{keep} of them")
                }
            ),
        ));
    }
    Verdict::Warn((
        format!(
            "Every voting etcd member ({all}) leaves or is replaced in this apply, and the cluster has deletion protection"
        ),
        format!(
            "Replicas change one at a time under the cluster's lock, in the order Terraform starts them. If a replacement ({}) joins before the last voter's turn, every change finishes; if every delete comes first, deletion protection keeps the last voter, the apply stops there with an error, and a second `terraform apply` finishes once the new replicas have joined. To finish in one apply for certain, replace or remove at most {keep} of them now.",
            listed(replaced_holders)
        ),
    ))
}

/// A replacement of the cluster itself, as a changed `name`, `project`, `region` or `zone` plans (`changed` names
/// them): a new static IP, new CAs and firewall rules, and every replica destroyed and created again, empty,
/// under the new cluster. With replicas that loses the control plane's data and every client's trust, whatever
/// the protection, so it is refused; without any, it is a destroy, which deletion protection refuses as a destroy.
/// The refusal is said at the first changed attribute.
pub fn check_cluster_replacement<'a>(
    name: &str,
    changed: &[&'a str],
    replicas: &[String],
    protected: bool,
) -> Option<(&'a str, Refusal)> {
    let at = *changed.first()?;
    let attributes = listed(changed.iter().map(|a| format!("`{a}`")));
    // Within one network the masters can move: to another subnetwork, one at a time.
    let network = if changed.contains(&"network") {
        " Members on two VPC networks cannot reach each other's etcd peer port, so the masters cannot move network one at a time; another subnetwork of the same network can be set instead, and the replicas roll onto it keeping their etcd members and data."
    } else {
        ""
    };
    if !replicas.is_empty() {
        return Some((
            at,
            (
                format!(
                    "Cluster {name} cannot be replaced while it has replicas ({})",
                    listed(replicas)
                ),
                format!(
                    "Changing {attributes} replaces ha_master_cluster {name}: a new static IP, new CAs and new firewall rules, and every replica destroyed and created again under the new cluster with an empty etcd, so the control plane's data (every Kubernetes object) and every client's credentials would be lost. Nothing was planned. Set {attributes} back to what the cluster has. To run the control plane under another name or in another place, create a second ha_master_cluster started from a snapshot of this one (`restore {{ source = \"snapshot\", snapshot = \"gs://...\" }}`, docs/guides/disaster-recovery.md), move clients to it, then remove this cluster's replicas and the cluster.{network}"
                ),
            ),
        ));
    }
    protected.then(|| {
        (
            at,
            (
                format!("Cluster {name} is protected from deletion, and this plan replaces it"),
                format!(
                    "Changing {attributes} replaces ha_master_cluster {name}: its static IP, CAs and firewall rules are deleted and made again, and the cluster's `deletion_protection` is on. Nothing was planned. Set {attributes} back, or set `deletion_protection = false` on the cluster and apply that first."
                ),
            ),
        )
    })
}

/// Whether replica `me` may leave. `protected` is the cluster's `deletion_protection`.
pub fn check_leave(world: &Observed, me: &str, protected: bool) -> Result<(), Refusal> {
    if !protected {
        return Ok(());
    }
    let other_voters = world
        .members
        .iter()
        .flatten()
        .filter(|m| !m.is_learner && m.name != me)
        .count();
    // Unknown membership with other VMs is refused on its own (`topology::unknown_membership`); with no other
    // VM, nobody else can hold the data.
    let others_hold_data =
        other_voters > 0 || (world.members.is_none() && world.instances.iter().any(|n| n != me));
    if others_hold_data {
        return Ok(());
    }
    Err((
        format!(
            "Replica {me} holds the cluster's last voting etcd member, and the cluster has deletion protection"
        ),
        format!(
            "Deleting {me} now would delete the last copy of the control plane's data (every Kubernetes object). The cluster's `deletion_protection` is on, so {me} was left in place. If other replicas are being replaced in the same apply, apply again once they have joined: each replacement is then one of several voters. To delete the data on purpose, set `deletion_protection = false` on the ha_master_cluster and apply first."
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MemberView;

    fn world(instances: &[&str], voters: &[&str], learners: &[&str]) -> Observed {
        let member = |(i, name): (usize, &&str), is_learner| MemberView {
            name: name.to_string(),
            id: i as u64 + 1,
            is_learner,
            healthy: true,
            answered: true,
        };
        Observed {
            instances: instances.iter().map(|s| s.to_string()).collect(),
            members: Some(
                voters
                    .iter()
                    .enumerate()
                    .map(|m| member(m, false))
                    .chain(learners.iter().enumerate().map(|m| member(m, true)))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// (instances, voters, learners, me, protected, allowed)
    type Case<'a> = (
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        &'a str,
        bool,
        bool,
    );

    #[test]
    fn only_the_last_voter_is_kept_and_only_while_protected() {
        let cases: &[Case] = &[
            (&["a", "b", "c"], &["a", "b", "c"], &[], "a", true, true),
            (&["a", "b"], &["a", "b"], &[], "a", true, true),
            // Down to one is allowed; the one is kept.
            (&["a"], &["a"], &[], "a", true, false),
            (&["a"], &["a"], &[], "a", false, true),
            // A learner still catching up holds no committed copy: the voter stays.
            (&["a", "b"], &["a"], &["b"], "a", true, false),
            // The learner itself may go.
            (&["a", "b"], &["a"], &["b"], "b", true, true),
            // A VM-less replica whose member is already gone leaves nothing behind but the others.
            (&["b"], &["b"], &[], "a", true, true),
        ];
        for &(instances, voters, learners, me, protected, allowed) in cases {
            let got = check_leave(&world(instances, voters, learners), me, protected);
            assert_eq!(
                got.is_ok(),
                allowed,
                "{instances:?} {voters:?} {learners:?} {me} {protected}: {got:?}"
            );
            if let Err((summary, detail)) = got {
                assert!(summary.contains(&format!(
                    "Replica {me} holds the cluster's last voting etcd member"
                )));
                assert!(detail.contains("deletion_protection = false"), "{detail}");
            }
        }
    }

    #[test]
    fn unknown_membership_counts_other_vms_as_holders_and_a_sole_vm_as_the_last() {
        let mut w = world(&["a", "b"], &[], &[]);
        w.members = None;
        assert!(check_leave(&w, "a", true).is_ok());
        w.instances.remove("b");
        assert!(check_leave(&w, "a", true).is_err());
    }

    fn leaving(removed: &[&str], replaced: &[&str]) -> Leaving {
        Leaving {
            removed: removed.iter().map(|s| s.to_string()).collect(),
            replaced: replaced.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// (voters, learners, removed, replaced, protected, verdict, words its summary or detail must contain)
    type Joint<'a> = (
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        bool,
        &'a str,
        &'a str,
    );

    #[test]
    fn one_plans_leaves_are_judged_together() {
        let abc: &[&str] = &["a", "b", "c"];
        let cases: &[Joint] = &[
            // Two of three removed: one voter stays.
            (abc, &[], &["a", "b"], &[], true, "fine", ""),
            // Every voter removed: apply would delete two and stop at the third.
            (
                abc,
                &[],
                &["a", "b", "c"],
                &[],
                true,
                "refuse",
                "(a, b and c)",
            ),
            (abc, &[], &["a", "b", "c"], &[], true, "refuse", "at most 2"),
            (
                &["a", "b"],
                &[],
                &["a", "b"],
                &[],
                true,
                "refuse",
                "at most 1",
            ),
            // Unprotected: the user may delete the data.
            (abc, &[], &["a", "b", "c"], &[], false, "fine", ""),
            // Every voter replaced: finishes if a replacement joins first, else stops for a second apply.
            (
                abc,
                &[],
                &[],
                &["a", "b", "c"],
                true,
                "warn",
                "a second `terraform apply`",
            ),
            (abc, &[], &["a"], &["b", "c"], true, "warn", "(b and c)"),
            // Two replaced, one kept: nothing in the way.
            (abc, &[], &[], &["a", "b"], true, "fine", ""),
            // The one voter replaced: its new VM can join only after its delete.
            (
                &["a"],
                &[],
                &[],
                &["a"],
                true,
                "refuse",
                "Replica a holds the cluster's last voting",
            ),
            (
                &["a"],
                &[],
                &["a"],
                &[],
                true,
                "refuse",
                "Replica a holds the cluster's last voting",
            ),
            // A learner holds no committed copy: removing the voter beside it is still the last voter's removal.
            (
                &["a"],
                &["b"],
                &["a", "b"],
                &[],
                true,
                "refuse",
                "Replica a holds",
            ),
            (&["a"], &["b"], &["b"], &[], true, "fine", ""),
            // Nothing leaves.
            (abc, &[], &[], &[], true, "fine", ""),
        ];
        for &(voters, learners, removed, replaced, protected, kind, words) in cases {
            let mut instances: Vec<&str> = voters.to_vec();
            instances.extend(learners);
            let w = world(&instances, voters, learners);
            let got = check_leaves(&w, &leaving(removed, replaced), protected);
            let (k, text) = match &got {
                Verdict::Fine => ("fine", String::new()),
                Verdict::Warn((s, d)) => ("warn", format!("{s} {d}")),
                Verdict::Refuse((s, d)) => ("refuse", format!("{s} {d}")),
            };
            assert_eq!(k, kind, "{voters:?} -{removed:?} ~{replaced:?}: {got:?}");
            assert!(
                text.contains(words),
                "{voters:?} -{removed:?} ~{replaced:?}: {text}"
            );
        }
    }

    #[test]
    fn unknown_membership_counts_every_vm_that_stays_as_a_holder() {
        let mut w = world(&["a", "b"], &[], &[]);
        w.members = None;
        assert_eq!(check_leaves(&w, &leaving(&["a"], &[]), true), Verdict::Fine);
        assert!(matches!(
            check_leaves(&w, &leaving(&["a", "b"], &[]), true),
            Verdict::Refuse(_)
        ));
    }

    #[test]
    fn names_are_listed_as_a_sentence_says_them() {
        assert_eq!(listed::<&str>([]), "");
        assert_eq!(listed(["a"]), "a");
        assert_eq!(listed(["a", "b"]), "a and b");
        assert_eq!(listed(["a", "b", "c"]), "a, b and c");
    }

    #[test]
    fn a_cluster_with_replicas_is_never_replaced_and_one_without_only_unprotected() {
        let replicas = vec!["walk-a".to_string(), "walk-b".to_string()];
        // (changed, replicas, protected, refused at, words)
        type Case<'a> = (&'a [&'a str], &'a [String], bool, Option<&'a str>, &'a str);
        let cases: &[Case] = &[
            (
                &["name"],
                &replicas,
                false,
                Some("name"),
                "while it has replicas (walk-a and walk-b)",
            ),
            (
                &["zone", "region"],
                &replicas,
                true,
                Some("zone"),
                "Changing `zone` and `region`",
            ),
            (
                &["project"],
                &replicas,
                true,
                Some("project"),
                "restore { source = \"snapshot\"",
            ),
            (
                &["network"],
                &replicas,
                true,
                Some("network"),
                "another subnetwork of the same network can be set instead",
            ),
            (
                &["name"],
                &[],
                true,
                Some("name"),
                "protected from deletion",
            ),
            (&["name"], &[], false, None, ""),
            (&[], &replicas, true, None, ""),
        ];
        for &(changed, replicas, protected, at, words) in cases {
            let got = check_cluster_replacement("walk", changed, replicas, protected);
            assert_eq!(
                got.as_ref().map(|(a, _)| *a),
                at,
                "{changed:?} {replicas:?} {protected}"
            );
            if let Some((_, (summary, detail))) = got {
                let text = format!("{summary} {detail}");
                assert!(text.contains(words), "{text}");
                assert!(text.contains("Nothing was planned"), "{text}");
            }
        }
    }
}
