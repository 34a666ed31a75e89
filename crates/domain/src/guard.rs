//! The quorum guard at plan time: what `plan` can already say about a replica's create or destroy from the
//! cluster's observed snapshot, before anything is touched. Apply checks again from a fresh snapshot
//! (`topology::join_steps` / `leave_steps`), so this only ever refuses what apply would refuse too, and warns
//! where the verdict depends on what else the same apply does.

use super::Problem;
use super::quorum;
use super::topology::{MemberView, Observed, leave_steps};

/// What plan says about a change: nothing, a warning, or a refusal (each a summary and what to do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    Warn(Problem),
    Refuse(Problem),
}

fn voting(world: &Observed) -> Vec<&MemberView> {
    world.voters().collect()
}

fn unhealthy_names(members: &[&MemberView]) -> String {
    let down: Vec<&str> = members
        .iter()
        .filter(|m| !m.healthy)
        .map(|m| m.name.as_str())
        .collect();
    down.join(", ")
}

/// Adding a replica. A cluster that has lost quorum cannot admit a member at all, so that is refused. A cluster
/// with an unhealthy member but a healthy majority is refused at apply unless the unhealthy replicas are replaced
/// first, which this same apply may do (a `-replace` plans the delete before the create), so plan warns.
pub fn check_join(world: &Observed) -> Verdict {
    let voters = voting(world);
    let n = voters.len() as u64;
    if n == 0 {
        // Unknown is not empty: a running replica's etcd that does not answer from here is refused as apply
        // refuses it (`topology::unknown_membership`).
        if let Some(refusal) = super::topology::unknown_membership(world, "add a replica") {
            return Verdict::Refuse(refusal);
        }
        // Founding, or every VM stopped: with VMs and no answer from any, quorum is likely lost.
        return match world.members {
            None if !world.instances.is_empty() => Verdict::Warn((
                "etcd did not answer through any replica".into(),
                format!(
                    "The cluster's VMs ({}) exist but none of their etcd members answered, so quorum may be lost and the new replica would not be admitted. Check the replicas (`terraform plan` shows TERMINATED ones) before applying.",
                    world
                        .instances
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            _ => Verdict::Fine,
        };
    }
    if let Some(v) = cannot_judge(world, &voters) {
        return v;
    }
    let healthy = voters.iter().filter(|m| m.healthy).count() as u64;
    if healthy < quorum::quorum(n) {
        return Verdict::Refuse((
            "etcd has lost quorum: a new replica cannot join".into(),
            format!(
                "{healthy} of {n} etcd members are healthy (unhealthy: {}); a majority of {} is needed to admit a member. Bring the unhealthy replicas back first (a plain `terraform apply` restarts a TERMINATED VM, and rebuilds a deleted one on its surviving data disk). If their VMs and disks are gone for good while one member still runs with its data, recover from it: add `restore {{ source = \"surviving_member\", generation = 1 }}` to the ha_master_cluster (or raise its generation by one) and apply; plan then says what the recovery does (docs/guides/disaster-recovery.md).",
                unhealthy_names(&voters),
                quorum::quorum(n)
            ),
        ));
    }
    // A dead member whose VM is gone belongs to a replica this plan replaces (refresh marks it), and the
    // replacement removes the member before anything joins: only dead members with a VM are in the way.
    let in_the_way = voters
        .iter()
        .filter(|m| !m.healthy && world.instances.contains(&m.name))
        .count() as u64;
    if in_the_way > 0 && !quorum::can_add_member(n, healthy) {
        return Verdict::Warn((
            "A replica is planned while an etcd member is unhealthy".into(),
            format!(
                "{healthy} of {n} etcd members are healthy (unhealthy: {}). A member is added only next to healthy ones, so apply refuses this replica unless the same apply replaces the unhealthy replicas first (`terraform apply -replace=...`).",
                unhealthy_names(&voters)
            ),
        ));
    }
    Verdict::Fine
}

/// Members that did not answer only because their VM has no external IP (an IP move stopped half way) are not
/// known to be down: the cluster's update in the same apply gives the VM an IP back (`shape`), and apply judges
/// quorum again from its own snapshot. Plan says so instead of refusing on a guess.
fn cannot_judge(world: &Observed, voters: &[&MemberView]) -> Option<Verdict> {
    let unasked: Vec<&str> = voters
        .iter()
        .filter(|m| !m.healthy && world.without_external_ip.contains(&m.name))
        .map(|m| m.name.as_str())
        .collect();
    if unasked.is_empty() {
        return None;
    }
    Some(Verdict::Warn((
        "Could not check etcd's quorum while planning".into(),
        format!(
            "The etcd members of {} could not be asked: their VMs have no external IP (an IP move stopped half way). The cluster's update in this apply gives them one back, and apply checks quorum again before it changes membership.",
            unasked.join(", ")
        ),
    )))
}

/// Removing replica `me`: exactly the refusal apply would make from this snapshot.
pub fn check_leave(world: &Observed, me: &str) -> Verdict {
    let voters = voting(world);
    if let Some(v) = cannot_judge(world, &voters) {
        return v;
    }
    match leave_steps(world, me) {
        Ok(_) => Verdict::Fine,
        Err(refusal) => Verdict::Refuse(refusal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::IpHolder;

    fn world(members: &[(&str, bool)]) -> Observed {
        Observed {
            instances: members.iter().map(|(n, _)| n.to_string()).collect(),
            ip_holder: Some(IpHolder::ForwardingRule),
            health_check: true,
            pool: Some(members.iter().map(|(n, _)| n.to_string()).collect()),
            forwarding_rule: true,
            members: Some(
                members
                    .iter()
                    .enumerate()
                    .map(|(i, (n, healthy))| MemberView {
                        name: n.to_string(),
                        id: i as u64 + 1,
                        is_learner: false,
                        healthy: *healthy,
                        answered: *healthy,
                    })
                    .collect(),
            ),
            stopped: Default::default(),
            without_external_ip: Default::default(),
            keys_in_metadata: Default::default(),
            etcd_unreachable: None,
        }
    }

    fn summary(v: &Verdict) -> &str {
        match v {
            Verdict::Fine => "",
            Verdict::Warn((s, _)) | Verdict::Refuse((s, _)) => s,
        }
    }

    /// (members with their health, verdict kind, words the detail must contain)
    type JoinCase<'a> = (&'a [(&'a str, bool)], &'a str, &'a str);

    #[test]
    fn joins() {
        let cases: &[JoinCase] = &[
            // No member at all: founding, which `start_empty` judges with the evidence of data.
            (&[], "fine", ""),
            (&[("a", true)], "fine", ""),
            (&[("a", true), ("b", true), ("c", true)], "fine", ""),
            // One down, majority healthy: apply refuses unless the same apply replaces it first.
            (
                &[("a", true), ("b", false), ("c", true)],
                "warn",
                "unhealthy: b",
            ),
            // Two of three down: quorum is lost, nothing can join.
            (
                &[("a", true), ("b", false), ("c", false)],
                "refuse",
                "1 of 3 etcd members are healthy (unhealthy: b, c)",
            ),
            (&[("a", false)], "refuse", "0 of 1"),
        ];
        // A dead member whose VM vanished is being replaced: no warning for a join beside it.
        let mut vanished = world(&[("a", true), ("b", false), ("c", true)]);
        vanished.instances.remove("b");
        assert_eq!(check_join(&vanished), Verdict::Fine);
        for (members, kind, words) in cases {
            let v = check_join(&world(members));
            let (got, detail) = match &v {
                Verdict::Fine => ("fine", ""),
                Verdict::Warn((_, d)) => ("warn", d.as_str()),
                Verdict::Refuse((_, d)) => ("refuse", d.as_str()),
            };
            assert_eq!(got, *kind, "{members:?}: {v:?}");
            assert!(detail.contains(words), "{members:?}: {detail}");
        }
    }

    #[test]
    fn a_join_next_to_silent_vms_warns() {
        let mut w = world(&[("a", true), ("b", true)]);
        w.members = None;
        let v = check_join(&w);
        assert!(matches!(v, Verdict::Warn(_)), "{v:?}");
        assert!(summary(&v).contains("did not answer"));
        // No VM at all: the first replica founds etcd.
        assert_eq!(check_join(&Observed::default()), Verdict::Fine);
    }

    #[test]
    fn unknown_membership_refuses_every_change_but_the_last_replicas_leave() {
        // Running VMs whose etcd does not answer from here (a CI runner outside etcd_client_source_ranges):
        // guessing "no members" would skip the quorum check and the member's removal.
        let mut w = world(&[("a", true), ("b", true), ("c", true)]);
        w.members = None;
        w.etcd_unreachable = Some("tried a at 1.2.3.4:2379; connection refused".into());
        for (v, verb) in [
            (check_join(&w), "add a replica"),
            (check_leave(&w, "a"), "remove replica a"),
        ] {
            let Verdict::Refuse((summary, detail)) = &v else {
                panic!("{verb}: {v:?}")
            };
            assert!(summary.contains(&format!("Cannot {verb}")), "{summary}");
            assert!(summary.contains("could not be read"), "{summary}");
            assert!(detail.contains("connection refused"), "{detail}");
            assert!(detail.contains("etcd_client_source_ranges"), "{detail}");
            assert!(detail.contains("a, b, c"), "{detail}");
        }
        // The last replica has no member to remove: its leave takes etcd with it.
        let mut last = world(&[("a", true)]);
        last.members = None;
        last.etcd_unreachable = Some("connection refused".into());
        assert_eq!(check_leave(&last, "a"), Verdict::Fine);
    }

    #[test]
    fn leaves() {
        let healthy3 = world(&[("a", true), ("b", true), ("c", true)]);
        assert_eq!(check_leave(&healthy3, "a"), Verdict::Fine);
        // Removing a healthy replica while another is down loses quorum: refused, naming the unhealthy one.
        let one_down = world(&[("a", true), ("b", false), ("c", true)]);
        let v = check_leave(&one_down, "a");
        assert!(matches!(v, Verdict::Refuse(_)), "{v:?}");
        assert!(summary(&v).contains("would lose etcd's quorum"));
        let Verdict::Refuse((_, detail)) = v else {
            unreachable!()
        };
        assert!(detail.contains("unhealthy: b"), "{detail}");
        // Removing the dead one only helps.
        assert_eq!(check_leave(&one_down, "b"), Verdict::Fine);
    }

    #[test]
    fn members_behind_a_vm_without_external_ip_are_not_judged_at_plan() {
        // An IP move killed between removing b's access config and adding the new one: b's member is fine but
        // cannot be asked. Refusing would block the apply whose cluster update gives b its IP back.
        let mut w = world(&[("a", true), ("b", false)]);
        w.without_external_ip.insert("b".into());
        for v in [check_join(&w), check_leave(&w, "a")] {
            assert!(matches!(v, Verdict::Warn(_)), "{v:?}");
            let Verdict::Warn((summary, detail)) = v else {
                unreachable!()
            };
            assert!(
                summary.contains("Could not check etcd's quorum"),
                "{summary}"
            );
            assert!(detail.contains("b could not be asked"), "{detail}");
        }
        // Without the missing IP, b is down and the same join is refused.
        w.without_external_ip.clear();
        assert!(matches!(check_join(&w), Verdict::Refuse(_)));
    }
}
