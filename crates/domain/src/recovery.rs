//! Recovering a cluster whose etcd lost quorum for good, from the one member that survives with its data: etcd's
//! documented disaster-recovery path ("restart a member with `--force-new-cluster`": it keeps its id and every
//! key it holds, and the cluster's membership becomes just itself), after which the lost replicas rejoin as new
//! members, as learners first. Nothing is restored from a snapshot, so nothing committed on the survivor is lost.
//!
//! The user opts in with the cluster's `restore { source = "surviving_member", generation = N }`; raising the
//! generation plans one recovery. This module decides, from an observed snapshot, whether one is possible and
//! which steps it takes; `ops::recover` runs them. The survivor's VM is created on its data disk twice: once with
//! `--force-new-cluster` in its etcd manifest, labelled [`RECOVERING_BUILD`], then again with its normal build. A
//! member that kept the flag would force a new cluster again at its next restart and drop the members that had
//! rejoined since, so the second rebuild is part of the recovery, and a recovery killed between the two is
//! resumed from the label (any roll would also rebuild it, since the label is no build's digest).

use std::collections::BTreeSet;

use super::quorum;
use super::step::{ClusterStep, ReplicaStep, Step};
use super::topology::{MemberView, Observed, Refusal, unknown_membership};
use crate::steps;

/// The `restore.source` that recovers from a surviving member.
pub const SURVIVING_MEMBER: &str = "surviving_member";

/// The build label of a VM whose etcd runs with `--force-new-cluster`: not a hex digest, so no build matches it.
pub const RECOVERING_BUILD: &str = "force-new-cluster";

/// A recovery the apply will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The replica whose member becomes the one-member cluster.
    pub survivor: String,
    /// The members etcd forgets (voters and learners), by name: their replicas rejoin as new members.
    pub dropped: Vec<String>,
    pub steps: Vec<Step>,
    /// Whether the forced start already happened (a recovery killed before its second rebuild).
    pub resuming: bool,
}

/// The steps for the survivor's replica: its VM again on its data disk with `--force-new-cluster`, its member
/// awaited as the only one, then its VM again with the normal build. `forced` skips the first half.
fn steps(forced: bool) -> Vec<Step> {
    use ReplicaStep::*;
    let mut s = Vec::new();
    if !forced {
        s.extend(steps![DeleteInstance, RecoverAsSoleMember, AwaitMember]);
    }
    s.extend(steps![
        DeleteInstance,
        RebuildInstance,
        AwaitMember,
        AwaitApi,
        Soak
    ]);
    s
}

fn names<'a>(it: impl IntoIterator<Item = &'a str>) -> String {
    it.into_iter().collect::<Vec<_>>().join(", ")
}

/// Whether a recovery from a surviving member is possible now, and how.
///
/// - `lost_with_disk`: lost members (no VM) whose etcd data disk remains;
/// - `recovering`: the replica whose VM carries [`RECOVERING_BUILD`], if any.
pub fn decide(
    world: &Observed,
    lost_with_disk: &BTreeSet<String>,
    recovering: Option<&str>,
) -> Result<Recovery, Refusal> {
    let members = world.members.as_deref().unwrap_or_default();
    let others = |survivor: &str| -> Vec<String> {
        members
            .iter()
            .filter(|m| m.name != survivor)
            .map(|m| m.name.clone())
            .collect()
    };
    if let Some(survivor) = recovering {
        // The forced start is done once etcd has quorum (one of one). A recovery killed before etcd ran with the
        // flag does it again: forcing a new cluster twice is the same as once.
        let forced = members
            .iter()
            .filter(|m| !m.is_learner)
            .all(|m| m.healthy && m.name == survivor)
            && !members.is_empty();
        return Ok(Recovery {
            survivor: survivor.to_string(),
            dropped: others(survivor),
            steps: steps(forced),
            resuming: true,
        });
    }
    let Some(members) = world.members.as_deref() else {
        if let Some(refusal) = unknown_membership(world, "recover etcd from a surviving member") {
            return Err(refusal);
        }
        return Err((
            "No etcd member survives to recover from".into(),
            "No replica VM of the cluster runs an etcd member, so there is no data to recover from. Restore the newest backup instead: set `restore.source = \"snapshot\"` (with a `backup` block, or `restore.snapshot = \"gs://...\"`); otherwise set `restore.generation` back to what it was.".into(),
        ));
    };
    let voters: Vec<&MemberView> = members.iter().filter(|m| !m.is_learner).collect();
    let n = voters.len() as u64;
    let healthy = voters.iter().filter(|m| m.healthy).count() as u64;
    if healthy >= quorum::quorum(n) {
        return Err((
            "etcd has quorum: there is nothing to recover".into(),
            format!(
                "{healthy} of {n} etcd members are healthy, a majority. A recovery from a surviving member makes one member the whole cluster and drops the others, which a healthy cluster must never do. Set `restore.generation` back to what it was; replace unhealthy replicas with `terraform apply -replace=...` instead."
            ),
        ));
    }
    let alive = |m: &&MemberView| {
        m.answered && world.instances.contains(&m.name) && !world.stopped.contains(&m.name)
    };
    let survivors: Vec<&MemberView> = voters.iter().copied().filter(alive).collect();
    let Some(survivor) = survivors.first() else {
        return Err((
            "No etcd member survives to recover from".into(),
            format!(
                "None of the {n} etcd members ({}) answered from a running VM. Start the replicas' VMs if they are stopped (a plain `terraform apply` restarts a TERMINATED VM) and plan again. If their VMs are gone for good too, delete them and restore from a snapshot (`restore.source = \"snapshot\"`).",
                names(voters.iter().map(|m| m.name.as_str()))
            ),
        ));
    };
    // Only members whose VM is gone are dropped: a member that still has a VM is not lost, and forcing a new
    // cluster would cut it off with data a plain apply can bring back.
    let with_vm: Vec<&str> = voters
        .iter()
        .filter(|m| m.name != survivor.name && world.instances.contains(&m.name))
        .map(|m| m.name.as_str())
        .collect();
    if !with_vm.is_empty() {
        return Err((
            "etcd is not lost for good: other members still have their VMs".into(),
            format!(
                "{healthy} of {n} etcd members are healthy. Besides {}, the replicas {} still have VMs, so their members may come back with their data: a plain `terraform apply` restarts a TERMINATED VM, and plan shows what else is wrong with them. A recovery from a surviving member would drop them. Set `restore.generation` back to what it was, bring them back, and plan again.",
                survivor.name,
                names(with_vm.iter().copied())
            ),
        ));
    }
    let rebuildable: Vec<&str> = voters
        .iter()
        .filter(|m| !m.healthy && lost_with_disk.contains(&m.name))
        .map(|m| m.name.as_str())
        .collect();
    // Members that answer are alive (without quorum none is healthy): with the rebuildable ones, a majority?
    if (survivors.len() + rebuildable.len()) as u64 >= quorum::quorum(n) {
        return Err((
            "etcd can get quorum back without a recovery".into(),
            format!(
                "The VMs of {} are gone but their etcd data disks are not: a plain `terraform apply` creates them again on their disks, as the same members with their data, and etcd has a majority again with no member dropped. Set `restore.generation` back to what it was and apply.",
                names(rebuildable.iter().copied())
            ),
        ));
    }
    Ok(Recovery {
        survivor: survivor.name.clone(),
        dropped: others(&survivor.name),
        steps: steps(false),
        resuming: false,
    })
}

/// What the plan says of a recovery: a warning, since it is destructive by design.
pub fn describe(cluster: &str, r: &Recovery) -> (String, String) {
    let survivor = &r.survivor;
    let dropped = names(r.dropped.iter().map(String::as_str));
    if r.resuming {
        return (
            format!("Cluster {cluster}: finishing the recovery of etcd from replica {survivor}"),
            format!(
                "A recovery stopped after {survivor}'s etcd was started as a one-member cluster. The apply creates its VM again on its data disk with its normal configuration, so it never forces a new cluster again, then the replicas that lost their members ({dropped}) rejoin as new members."
            ),
        );
    }
    (
        format!(
            "Cluster {cluster}: etcd has lost quorum and will be recovered from replica {survivor}"
        ),
        format!(
            "The apply restarts {survivor}'s etcd member as a one-member cluster from its own data (etcd's `--force-new-cluster`): it keeps its id and every key it holds, and etcd forgets the members {dropped}. {survivor}'s VM is created again on its data disk twice, first with that flag, then with its normal configuration. The API was already unavailable without quorum; it serves again once {survivor} is back. Writes that only the lost members had committed, if any, are gone. Then the replicas {dropped} rejoin as new members (learners first), one at a time."
        ),
    )
}

/// The change a backup before the recovery names, in its snapshot's metadata and in the plan.
pub fn change(r: &Recovery) -> String {
    format!("recovery of etcd from replica {}", r.survivor)
}

/// Whether [`with_backup`] puts a snapshot first: not for a resumed recovery.
pub fn takes_backup(r: &Recovery) -> bool {
    !r.resuming
}

/// The recovery's steps with a snapshot of the survivor first, for a cluster with a `backup` block. The survivor's
/// member has no leader, but etcd streams a snapshot from its own store without raft, and its data is exactly
/// what the recovery keeps: if the forced start goes wrong, this snapshot is the way back
/// (`restore { source = "snapshot" }`). A resumed recovery takes none: the first attempt took it, and the
/// survivor's VM may be gone mid-rebuild, with nothing to take it from.
pub fn with_backup(r: &Recovery) -> Vec<Step> {
    if !takes_backup(r) {
        return r.steps.clone();
    }
    std::iter::once(Step::Cluster(ClusterStep::TakeBackup { change: change(r) }))
        .chain(r.steps.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::ReplicaStep::*;
    use crate::step::{ClusterStep, ReplicaStep, Step};

    /// `vms` exist and run; `members` are voters; `answering` of them answer, `healthy` of those are healthy.
    fn world(vms: &[&str], members: &[&str], answering: &[&str], healthy: &[&str]) -> Observed {
        Observed {
            instances: vms.iter().map(|s| s.to_string()).collect(),
            members: Some(
                members
                    .iter()
                    .enumerate()
                    .map(|(i, n)| MemberView {
                        name: n.to_string(),
                        id: i as u64 + 1,
                        is_learner: false,
                        healthy: healthy.contains(n),
                        answered: answering.contains(n) || healthy.contains(n),
                    })
                    .collect(),
            ),
            ..Observed::default()
        }
    }

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
    }

    #[test]
    fn one_survivor_of_three_is_recovered_and_the_others_rejoin() {
        let w = world(&["a"], &["a", "b", "c"], &["a"], &[]);
        let r = decide(&w, &none(), None).unwrap();
        assert_eq!(r.survivor, "a");
        assert_eq!(r.dropped, vec!["b".to_string(), "c".to_string()]);
        assert_eq!(
            r.steps,
            steps![
                DeleteInstance,
                RecoverAsSoleMember,
                AwaitMember,
                DeleteInstance,
                RebuildInstance,
                AwaitMember,
                AwaitApi,
                Soak
            ]
        );
        let (summary, detail) = describe("walk", &r);
        assert!(summary.contains("recovered from replica a"), "{summary}");
        assert!(detail.contains("--force-new-cluster"), "{detail}");
        assert!(detail.contains("forgets the members b, c"), "{detail}");
    }

    #[test]
    fn a_backup_of_the_survivor_comes_first_unless_the_recovery_resumes() {
        let w = world(&["a"], &["a", "b", "c"], &["a"], &[]);
        let r = decide(&w, &none(), None).unwrap();
        let steps = with_backup(&r);
        assert_eq!(
            steps[0],
            Step::Cluster(ClusterStep::TakeBackup {
                change: "recovery of etcd from replica a".into()
            })
        );
        assert_eq!(steps[1..], r.steps[..]);
        for w in [
            world(&["a"], &["a"], &["a"], &["a"]),
            world(&["a"], &["a", "b", "c"], &["a"], &[]),
        ] {
            let r = decide(&w, &none(), Some("a")).unwrap();
            assert_eq!(
                with_backup(&r),
                r.steps,
                "a resumed recovery backs up nothing"
            );
        }
    }

    #[test]
    fn a_recovery_killed_after_the_forced_start_finishes_with_the_normal_build() {
        // After the forced start etcd has quorum (one of one): only the label tells a half-done recovery.
        let w = world(&["a"], &["a"], &["a"], &["a"]);
        let r = decide(&w, &none(), Some("a")).unwrap();
        assert!(r.resuming);
        assert_eq!(
            r.steps,
            steps![DeleteInstance, RebuildInstance, AwaitMember, AwaitApi, Soak]
        );
        assert!(describe("walk", &r).0.contains("finishing"));
        // Killed before etcd ran with the flag: the members are still the old ones, without quorum (or the VM's
        // etcd does not answer yet). The forced start is done again.
        for w in [
            world(&["a"], &["a", "b", "c"], &["a"], &[]),
            Observed {
                instances: ["a".to_string()].into(),
                ..Observed::default()
            },
        ] {
            let r = decide(&w, &none(), Some("a")).unwrap();
            assert_eq!(
                r.steps[..3],
                [
                    Step::Replica(ReplicaStep::DeleteInstance),
                    Step::Replica(ReplicaStep::RecoverAsSoleMember),
                    Step::Replica(ReplicaStep::AwaitMember)
                ]
            );
        }
    }

    #[test]
    fn a_cluster_that_can_come_back_without_dropping_members_is_refused() {
        // (world, members whose disk survives, what the refusal says)
        let cases: Vec<(Observed, BTreeSet<String>, &str)> = vec![
            // Quorum: nothing to recover.
            (
                world(&["a", "b", "c"], &["a", "b", "c"], &[], &["a", "b"]),
                none(),
                "etcd has quorum",
            ),
            // A lost member's VM still exists (stopped or crashed): a plain apply restarts it.
            (
                world(&["a", "b"], &["a", "b", "c"], &["a"], &[]),
                none(),
                "still have VMs",
            ),
            // Two members answer without quorum (5 members): the second would be cut off.
            (
                world(
                    &["a", "b"],
                    &["a", "b", "c", "d", "e"],
                    &["a", "b"],
                    &["a", "b"],
                ),
                none(),
                "still have VMs",
            ),
            // The lost VMs' disks survive: they are rebuilt on them as the same members.
            (
                world(&["a"], &["a", "b", "c"], &["a"], &[]),
                ["b".to_string()].into(),
                "without a recovery",
            ),
            // No member answers from a running VM.
            (
                world(&["a"], &["a", "b", "c"], &[], &[]),
                none(),
                "No etcd member survives",
            ),
            // etcd unreachable from here: unknown is not lost.
            (
                Observed {
                    instances: ["a".to_string()].into(),
                    etcd_unreachable: Some("connection refused".into()),
                    ..Observed::default()
                },
                none(),
                "could not be read",
            ),
            // Nothing runs at all.
            (Observed::default(), none(), "No etcd member survives"),
        ];
        for (w, disks, says) in cases {
            let (summary, detail) = decide(&w, &disks, None).unwrap_err();
            assert!(
                summary.contains(says) || detail.contains(says),
                "{says}: {summary} / {detail}"
            );
        }
    }

    #[test]
    fn one_disk_among_many_lost_does_not_give_quorum_back_so_the_recovery_goes_on() {
        // Five members, one survivor, one lost VM with its disk: 2 of 5 is no majority.
        let w = world(&["a"], &["a", "b", "c", "d", "e"], &["a"], &[]);
        let r = decide(&w, &["b".to_string()].into(), None).unwrap();
        assert_eq!(r.survivor, "a");
        assert_eq!(r.dropped.len(), 4);
    }
}
