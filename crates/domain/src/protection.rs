//! Deletion protection: the last copy of a control plane's data is never removed by accident. While the
//! cluster's `deletion_protection` is on, a leave that would remove the last voting etcd member is refused,
//! whatever the plan says (`-replace` of every replica plans every delete; the last one stops here). Removing
//! replicas down to one stays allowed: the data lives on in the survivors.

use super::topology::{Observed, Refusal};

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
}
