//! What a replica's join or removal does to the control plane's availability, said at plan so nobody learns it
//! from an outage: how many failures etcd tolerates before and after, and whether the static IP moves between a
//! VM and the load balancer (`topology::join_steps` / `leave_steps` move it; the API at that IP does not answer
//! in between).
//!
//! Terraform plans each replica on its own, but one plan's removals and replacements are counted together
//! (`protection::Leaving`, gathered by `ops::plan_leaves`), so the numbers are those of the whole apply.

use super::Problem;
use super::protection::{Leaving, listed};
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

fn is_are(n: usize) -> &'static str {
    if n == 1 { "is" } else { "are" }
}

/// What one plan's leaves do to a cluster of `world`: the drop in fault tolerance once the removed replicas are
/// gone, the dip while replaced ones are rebuilt (a replacement deletes the member before its new VM joins), and
/// the static IP's move back to the last VM when one replica remains.
pub fn leave_notes(world: &Observed, leaving: &Leaving) -> Vec<Problem> {
    let voters = voters(world);
    // In name order, as the sets hold them.
    let of = |set: &'_ std::collections::BTreeSet<String>| -> Vec<String> {
        set.iter()
            .filter(|n| voters.contains(&n.as_str()))
            .cloned()
            .collect()
    };
    let (removed, replaced) = (of(&leaving.removed), of(&leaving.replaced));
    let before = voters.len();
    let after = before - removed.len();
    let was = fault_tolerance(before);
    let mut out = Vec::new();
    if !removed.is_empty() {
        let will = fault_tolerance(after);
        let who = listed(&removed);
        let verb = if removed.len() == 1 {
            "leaves"
        } else {
            "leave"
        };
        if after == 0 {
            out.push((
                format!("Every voting etcd member leaves: {who} {verb}"),
                "With no member left, etcd's data (every Kubernetes object) is deleted with the last replica."
                    .to_string(),
            ));
        } else if will < was {
            out.push((
                format!("Fault tolerance drops from {was} to {will} when {who} {verb}"),
                format!(
                    "With {before} voting members etcd tolerates {}; with {after} it tolerates {}{}.",
                    failures(was),
                    failures(will),
                    if will == 0 {
                        ": losing any replica (a VM, a zone) stops the control plane"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    // Replacements run after or between the removals: at worst every replaced member is gone at once.
    let fewest = after - replaced.len().min(after);
    if !replaced.is_empty() && fewest > 0 && fault_tolerance(fewest) < fault_tolerance(after) {
        let who = listed(&replaced);
        out.push((
            format!(
                "Fault tolerance drops from {} to {} while {who} {} replaced",
                fault_tolerance(after),
                fault_tolerance(fewest),
                is_are(replaced.len())
            ),
            format!(
                "A replacement deletes the replica's etcd member before its new VM joins: until the new member has joined, etcd may have as few as {fewest} voting members and tolerates {}.",
                failures(fault_tolerance(fewest))
            ),
        ));
    }
    if after == 1
        && !removed.is_empty()
        && world.forwarding_rule
        && let Some(last) = voters.iter().find(|v| !leaving.removed.contains(**v))
    {
        out.push((
            format!("The static IP moves from the load balancer to {last}"),
            format!(
                "{} and {last} is the last replica: the load balancer is deleted and the static IP is attached to the VM of {last}. {IP_MOVE_OUTAGE}",
                if removed.len() == 1 {
                    format!("{} leaves", removed[0])
                } else {
                    format!("{} leave", listed(&removed))
                }
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

    fn leaving(removed: &[&str], replaced: &[&str]) -> Leaving {
        Leaving {
            removed: removed.iter().map(|s| s.to_string()).collect(),
            replaced: replaced.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn one_plans_leaves_say_together_what_fault_tolerance_is_left_and_when_the_ip_moves_back() {
        let lb = Some(IpHolder::ForwardingRule);
        let abc: &[&str] = &["a", "b", "c"];
        let abcde: &[&str] = &["a", "b", "c", "d", "e"];
        // (voters, removed, replaced, summaries)
        type Case<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let cases: &[Case] = &[
            // 3 → 2: one failure tolerated → none.
            (
                abc,
                &["c"],
                &[],
                &["Fault tolerance drops from 1 to 0 when c leaves"],
            ),
            // 3 → 1: counted together, and the static IP moves back to the last VM.
            (
                abc,
                &["b", "c"],
                &[],
                &[
                    "Fault tolerance drops from 1 to 0 when b and c leave",
                    "The static IP moves from the load balancer to a",
                ],
            ),
            // 2 → 1: no tolerance to lose, but the static IP moves back.
            (
                &["a", "b"],
                &["b"],
                &[],
                &["The static IP moves from the load balancer to a"],
            ),
            // 5 → 4 and 5 → 3.
            (
                abcde,
                &["e"],
                &[],
                &["Fault tolerance drops from 2 to 1 when e leaves"],
            ),
            (
                abcde,
                &["d", "e"],
                &[],
                &["Fault tolerance drops from 2 to 1 when d and e leave"],
            ),
            // 4 → 3: the same tolerance, nothing to say.
            (&["a", "b", "c", "d"], &["d"], &[], &[]),
            // Every member removed (an unprotected cluster's teardown).
            (
                abc,
                &["a", "b", "c"],
                &[],
                &["Every voting etcd member leaves: a, b and c leave"],
            ),
            // A zone move: the member leaves before its replacement joins.
            (
                abc,
                &[],
                &["a"],
                &["Fault tolerance drops from 1 to 0 while a is replaced"],
            ),
            (
                abcde,
                &["e"],
                &["a", "b"],
                &[
                    "Fault tolerance drops from 2 to 1 when e leaves",
                    "Fault tolerance drops from 1 to 0 while a and b are replaced",
                ],
            ),
            // Not a voter (a learner, or gone already): nothing to say.
            (abc, &["x"], &["y"], &[]),
        ];
        for (voters, removed, replaced, want) in cases {
            let notes = leave_notes(
                &world(voters, lb.clone(), true),
                &leaving(removed, replaced),
            );
            assert_eq!(
                summaries(&notes),
                *want,
                "{voters:?} -{removed:?} ~{replaced:?}"
            );
        }
        let three = leave_notes(&world(abc, lb.clone(), true), &leaving(&["c"], &[]));
        assert!(three[0].1.contains("losing any replica"), "{}", three[0].1);
        let moved = leave_notes(&world(abc, lb, true), &leaving(&[], &["a"]));
        assert!(moved[0].1.contains("as few as 2"), "{}", moved[0].1);
    }
}
