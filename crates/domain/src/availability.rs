//! What a replica's join or removal does to the control plane's availability, said at plan so nobody learns it
//! from an outage: how many failures etcd tolerates before and after, and whether the static IP moves between a
//! VM and the load balancer (`topology::join_steps` / `leave_steps` move it; the API at that IP does not answer
//! in between).
//!
//! Terraform plans each replica on its own, so a removal speaks for itself: when others leave in the same apply,
//! the cluster ends smaller than one replica's plan can see, and the warning says so.

use super::Problem;
use super::topology::{IpHolder, Observed};

/// How many of `voters` members may fail while the rest keep etcd's majority (`quorum::fault_tolerance`).
fn fault_tolerance(voters: usize) -> u64 {
    super::quorum::fault_tolerance(voters as u64)
}

fn voters(world: &Observed) -> Vec<&str> {
    world.voters().map(|m| m.name.as_str()).collect()
}

fn failures(n: u64) -> String {
    match n {
        0 => "no failure".into(),
        1 => "one failure".into(),
        n => format!("{n} failures"),
    }
}

/// What the API at the static IP goes through while the address moves: nothing serves it between the two
/// operations.
const IP_MOVE_OUTAGE: &str = "The Kubernetes API at the static IP does not answer from the moment the address leaves its holder until the new holder serves it: the time Compute Engine takes for the two operations (seconds on ha-sim; on GCE usually under a minute). Clients retry; a pipeline that must not see it should run this change in a maintenance window.";

/// The join of a replica into a cluster of `world`: the static IP leaves the sole VM for a load balancer when
/// this is the second replica.
pub fn join_notes(world: &Observed, joining: &str) -> Vec<Problem> {
    let voters = voters(world);
    let mut out = Vec::new();
    if let (1, Some(IpHolder::Instance(holder))) = (voters.len(), &world.ip_holder)
        && !world.forwarding_rule
    {
        out.push((
            format!("The static IP moves from {holder} to a load balancer"),
            format!(
                "{joining} is the cluster's second replica: the static IP moves from the VM of {holder} to a load balancer in front of both (a target pool and a forwarding rule). {IP_MOVE_OUTAGE}"
            ),
        ));
    }
    out
}

/// The removal of `leaving` from a cluster of `world`: the drop in fault tolerance, and the static IP's move back
/// to the last VM when one replica remains.
pub fn leave_notes(world: &Observed, leaving: &str) -> Vec<Problem> {
    let voters = voters(world);
    if !voters.contains(&leaving) {
        return Vec::new();
    }
    let (before, after) = (voters.len(), voters.len() - 1);
    let mut out = Vec::new();
    let (was, will) = (fault_tolerance(before), fault_tolerance(after));
    let others_note = if after >= 2 {
        " If other replicas leave in the same apply, the cluster ends smaller and tolerates fewer; down to one replica, the static IP also moves from the load balancer to the last VM, with a short outage of the API."
    } else {
        ""
    };
    if will < was {
        out.push((
            format!("Fault tolerance drops from {was} to {will} when {leaving} leaves"),
            format!(
                "With {before} voting members etcd tolerates {}; with {after} it tolerates {}{}.{others_note}",
                failures(was),
                failures(will),
                if will == 0 {
                    ": losing any replica (a VM, a zone) stops the control plane"
                } else {
                    ""
                }
            ),
        ));
    } else if !others_note.is_empty() {
        out.push((
            format!("{leaving} leaves; {after} replicas remain"),
            others_note.trim_start().to_string(),
        ));
    }
    if after == 1
        && world.forwarding_rule
        && let Some(last) = voters.iter().find(|v| **v != leaving)
    {
        out.push((
            format!("The static IP moves from the load balancer to {last}"),
            format!(
                "{leaving} leaves and {last} is the last replica: the load balancer is deleted and the static IP is attached to the VM of {last}. {IP_MOVE_OUTAGE}"
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MemberView;

    fn world(voters: &[&str], holder: Option<IpHolder>, rule: bool) -> Observed {
        Observed {
            instances: voters.iter().map(|s| s.to_string()).collect(),
            ip_holder: holder,
            forwarding_rule: rule,
            pool: rule.then(|| voters.iter().map(|s| s.to_string()).collect()),
            members: Some(
                voters
                    .iter()
                    .enumerate()
                    .map(|(i, n)| MemberView {
                        name: n.to_string(),
                        id: i as u64 + 1,
                        is_learner: false,
                        healthy: true,
                        answered: true,
                    })
                    .collect(),
            ),
            ..Observed::default()
        }
    }

    fn summaries(notes: &[Problem]) -> Vec<&str> {
        notes.iter().map(|(s, _)| s.as_str()).collect()
    }

    #[test]
    fn a_second_replica_moves_the_static_ip_to_a_load_balancer_and_later_ones_do_not() {
        let one = world(&["a"], Some(IpHolder::Instance("a".into())), false);
        let notes = join_notes(&one, "b");
        assert_eq!(
            summaries(&notes),
            ["The static IP moves from a to a load balancer"]
        );
        assert!(notes[0].1.contains("does not answer"), "{}", notes[0].1);
        let two = world(&["a", "b"], Some(IpHolder::ForwardingRule), true);
        assert!(join_notes(&two, "c").is_empty());
        // Founding: nothing to move from.
        let none = world(&[], None, false);
        assert!(join_notes(&none, "a").is_empty());
    }

    #[test]
    fn a_removal_says_what_fault_tolerance_it_leaves_and_when_the_ip_moves_back() {
        let lb = Some(IpHolder::ForwardingRule);
        let cases: &[(&[&str], &str, &[&str])] = &[
            // 3 → 2: one failure tolerated → none; others leaving would go further.
            (
                &["a", "b", "c"],
                "c",
                &["Fault tolerance drops from 1 to 0 when c leaves"],
            ),
            // 2 → 1: no tolerance to lose, but the static IP moves back.
            (
                &["a", "b"],
                "b",
                &["The static IP moves from the load balancer to a"],
            ),
            // 5 → 4: 2 → 1.
            (
                &["a", "b", "c", "d", "e"],
                "e",
                &["Fault tolerance drops from 2 to 1 when e leaves"],
            ),
            // 4 → 3: the same tolerance; a note only because others may leave too.
            (&["a", "b", "c", "d"], "d", &["d leaves; 3 replicas remain"]),
            // Not a voter (a learner, or gone already): nothing to say.
            (&["a", "b", "c"], "x", &[]),
        ];
        for (voters, leaving, want) in cases {
            let notes = leave_notes(&world(voters, lb.clone(), true), leaving);
            assert_eq!(summaries(&notes), *want, "{voters:?} - {leaving}");
        }
        let three = leave_notes(&world(&["a", "b", "c"], lb.clone(), true), "c");
        assert!(
            three[0].1.contains("losing any replica")
                && three[0].1.contains("static IP also moves"),
            "{}",
            three[0].1
        );
        let two = leave_notes(&world(&["a", "b"], lb, true), "b");
        assert!(
            !two.iter().any(|(_, d)| d.contains("other replicas leave")),
            "{two:?}"
        );
    }
}
