//! The time a change takes a master out of service, and whether the change has it. A roll's window opens at the
//! step that takes a running master down (out of the load balancer, stopped or deleted) and closes when the master
//! is back in the load balancer (a cluster's only master: when the static IP serves again); a timeout that runs out in between leaves the master stopped or out of the pool
//! until the next apply. So a roll takes a master down only with the time to bring it back: the longest window
//! measured on the cluster's masters, and a quarter more.
//!
//! Every window is measured where it happens (`ops::execute`): a join's from its VM's create (the first boot,
//! which a rebuild repeats) and a roll's, each written on the master's VM as the label [`WINDOW_LABEL`] by the
//! change's last step. A cluster none of whose VMs carries it (made by a release before this one) is not judged
//! until one does: its first roll measures.

use std::time::Duration;

use super::Problem;
use super::step::{ClusterStep, ReplicaStep, Step};

/// The seconds the VM's last window took: its join's first boot, or its last roll.
pub const WINDOW_LABEL: &str = "ha-master-window";

/// Where the out-of-service window is in a change's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The step that opens it.
    pub opens: usize,
    /// The step whose end closes it: the master is back in the load balancer (or in the pool the second
    /// replica's join creates; or, the cluster's only master, the static IP serves again, or the founding
    /// master's API serves its admin binding).
    pub closes: usize,
    /// Whether it opens by taking a running master down (a roll), rather than by building a new one (a join):
    /// only then is the time judged before it opens.
    pub takes_down: bool,
}

fn takes_down(r: &ReplicaStep) -> bool {
    matches!(
        r,
        ReplicaStep::RemoveFromPool | ReplicaStep::StopInstance | ReplicaStep::DeleteInstance
    )
}

/// The window of `steps`, if they take a master out of service or build one, bring it back (start or build its
/// VM) and then put it in the load balancer. A leave's steps take a master down for good and have none, even when
/// they move the static IP and await it.
pub fn window(steps: &[Step]) -> Option<Window> {
    let opens = steps
        .iter()
        .position(|s| matches!(s, Step::Replica(r) if takes_down(r) || r.builds_vm()))?;
    let closes = opens
        + steps[opens..].iter().position(|s| {
            matches!(
                s,
                Step::Replica(ReplicaStep::AddToPool | ReplicaStep::AwaitAdminBinding)
                    | Step::Cluster(ClusterStep::AwaitEndpoint | ClusterStep::CreatePool { .. })
            )
        })?;
    let brings_back = steps[opens..=closes].iter().any(
        |s| matches!(s, Step::Replica(r) if *r == ReplicaStep::StartInstance || r.builds_vm()),
    );
    if !brings_back {
        return None;
    }
    let takes_down = matches!(&steps[opens], Step::Replica(r) if takes_down(r));
    Some(Window {
        opens,
        closes,
        takes_down,
    })
}

/// The label value of a window that took `took` (whole seconds, at least one).
pub fn label_value(took: Duration) -> String {
    took.as_secs().max(1).to_string()
}

/// The longest window the cluster's VMs carry, with the VM it was measured on; `None` when none carries one.
pub fn longest<'a>(
    vms: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Option<(&'a str, Duration)> {
    vms.into_iter()
        .filter_map(|(vm, label)| Some((vm, Duration::from_secs(label?.parse().ok()?))))
        .max_by_key(|(_, took)| *took)
}

/// The time a window is given: the longest measured, and a quarter more.
pub fn needed(longest: Duration) -> Duration {
    longest + longest / 4
}

/// The refusal of replica `me`'s roll when `left` of its timeout is less than a window needs; `longest` is the
/// cluster's longest measured window and the VM it was measured on.
pub fn too_little_time(me: &str, longest: (&str, Duration), left: Duration) -> Option<Problem> {
    let (on, took) = longest;
    let need = needed(took);
    if left >= need {
        return None;
    }
    let short = (need - left).as_secs() + 1;
    Some((
        format!(
            "The roll of replica {me} did not start: {}s of its timeout are left, and a master of this cluster \
             takes about {}s to go out of service and come back",
            left.as_secs(),
            took.as_secs()
        ),
        format!(
            "A roll takes a master out of the load balancer and stops or deletes it only with the time to bring \
             it back: the longest such window measured on this cluster's masters ({}s, on VM {on}) and a quarter \
             more, {}s. A timeout that ran out in between would leave the master stopped or out of the load \
             balancer until the next apply. Nothing was stopped or deleted: replica {me} still runs as it did. \
             Raise the replica's `timeouts.update` by at least {short}s and apply again; the time a roll waits \
             for the cluster's lock is not taken from it.",
            took.as_secs(),
            need.as_secs()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(steps: &[ReplicaStep]) -> Vec<Step> {
        steps.iter().cloned().map(Step::from).collect()
    }

    #[test]
    fn the_window_runs_from_taking_a_master_down_or_building_one_to_the_load_balancer() {
        use ReplicaStep::*;
        let mut rebuild = vec![Step::from(ClusterStep::TakeBackup {
            change: "roll".into(),
        })];
        rebuild.extend(replica(&[
            RemoveFromPool,
            MoveLeadership,
            DeleteInstance,
            RebuildInstance,
            AwaitMember,
            AddToPool,
            Soak,
            LabelVm,
        ]));
        let resize = replica(&[
            RemoveFromPool,
            StopInstance,
            SetMachineType,
            StartInstance,
            AwaitMember,
            AddToPool,
            Soak,
        ]);
        // A roll resumed after its VM was deleted: nothing left to take down, a master to build.
        let resumed = replica(&[RebuildInstance, AwaitMember, AddToPool]);
        let join = replica(&[
            AddLearner,
            CreateJoiningInstance,
            AwaitCaughtUpAndPromote,
            AwaitApi,
            AddToPool,
            LabelVm,
        ]);
        let leave = replica(&[
            RemoveFromPool,
            MoveLeadership,
            RemoveMember { id: 7 },
            DeleteInstance,
        ]);
        let relabel = replica(&[LabelVm]);
        // A leave of the master that holds the static IP: the IP moves and is awaited, the master never returns.
        let mut leave_with_ip = replica(&[RemoveFromPool, MoveLeadership]);
        leave_with_ip.push(
            ClusterStep::DetachStaticIp {
                from: "walk-a".into(),
            }
            .into(),
        );
        leave_with_ip.push(
            ClusterStep::AttachStaticIp {
                to: "walk-b".into(),
            }
            .into(),
        );
        leave_with_ip.push(ClusterStep::AwaitEndpoint.into());
        leave_with_ip.extend(replica(&[RemoveMember { id: 7 }, DeleteInstance]));
        // The cluster's only master: no load balancer to leave, the static IP serves again at the end.
        let mut alone = replica(&[StopInstance, SetMachineType, StartInstance, AwaitMember]);
        alone.push(ClusterStep::AwaitEndpoint.into());
        alone.push(Soak.into());
        let window = |opens, closes, takes_down| {
            Some(Window {
                opens,
                closes,
                takes_down,
            })
        };
        let founding = replica(&[
            CreateFoundingInstance {
                with_static_ip: true,
            },
            AwaitAdminBinding,
            LabelVm,
        ]);
        let mut second = replica(&[AddLearner, CreateJoiningInstance, AwaitCaughtUpAndPromote]);
        second.push(ClusterStep::CreateHealthCheck.into());
        second.push(ClusterStep::CreatePool { instances: vec![] }.into());
        let cases: [(&[Step], Option<Window>); 10] = [
            (&leave_with_ip, None),
            (&founding, window(0, 1, false)),
            (&second, window(1, 4, false)),
            (&rebuild, window(1, 6, true)),
            (&alone, window(0, 4, true)),
            (&resize, window(0, 5, true)),
            (&resumed, window(0, 2, false)),
            (&join, window(1, 4, false)),
            (&leave, None),
            (&relabel, None),
        ];
        for (steps, want) in cases {
            assert_eq!(super::window(steps), want, "{steps:?}");
        }
    }

    #[test]
    fn the_longest_window_any_vm_carries_is_the_one_judged() {
        let vms = [
            ("a", Some("40")),
            ("b", Some("95")),
            ("c", None),
            ("d", Some("not-a-number")),
        ];
        assert_eq!(longest(vms), Some(("b", Duration::from_secs(95))));
        assert_eq!(longest([("a", None), ("b", Some("x"))]), None);
        assert_eq!(longest([]), None);
        assert_eq!(label_value(Duration::from_millis(300)), "1");
        assert_eq!(label_value(Duration::from_millis(95_900)), "95");
    }

    #[test]
    fn a_roll_starts_only_with_the_longest_window_and_a_quarter_left() {
        let secs = Duration::from_secs;
        let cases = [
            // (longest, left, refused)
            (secs(100), secs(125), false),
            (secs(100), secs(124), true),
            (secs(100), secs(600), false),
            (secs(4), secs(5), false),
            (secs(4), secs(4), true),
        ];
        for (took, left, refused) in cases {
            let said = too_little_time("prod-b", ("prod-a", took), left);
            assert_eq!(said.is_some(), refused, "{took:?} {left:?}");
        }
        let (summary, detail) = too_little_time("prod-b", ("prod-a", secs(100)), secs(60)).unwrap();
        assert_eq!(
            summary,
            "The roll of replica prod-b did not start: 60s of its timeout are left, and a master of this \
             cluster takes about 100s to go out of service and come back"
        );
        assert!(detail.contains("on VM prod-a"), "{detail}");
        assert!(detail.contains("125s"), "{detail}");
        assert!(detail.contains("by at least 66s"), "{detail}");
        assert!(
            detail.contains("Nothing was stopped or deleted"),
            "{detail}"
        );
    }
}
