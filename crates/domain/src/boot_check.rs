//! What a roll asks Compute Engine again, under the cluster's lock, just before it stops or deletes a master: the
//! image a rebuilt VM boots and the machine type a rebuilt or resized VM runs on. Plan asked both already
//! (`ops::placement`), but a roll may start long after its plan: a saved plan applied the next morning, or the
//! fifth replica of an apply that waited for four rolls. An image deleted or a type withdrawn meanwhile would
//! otherwise be found by the call that creates or starts the VM again, after the master was taken down.

use super::Problem;
use super::step::{ReplicaStep, Step};

/// What a roll's steps will ask Compute Engine to boot again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BootAsks {
    /// The VM is created again (`RebuildInstance`): its image must exist.
    pub image: bool,
    /// The VM is created again or resized (`SetMachineType`): its zone must offer the machine type.
    pub machine_type: bool,
}

impl BootAsks {
    pub fn any(&self) -> bool {
        self.image || self.machine_type
    }
}

/// What `steps` boot again, so what must be asked before the first of them runs.
pub fn boot_asks(steps: &[Step]) -> BootAsks {
    let has = |want: &ReplicaStep| {
        steps
            .iter()
            .any(|s| matches!(s, Step::Replica(r) if r == want))
    };
    let rebuilds = has(&ReplicaStep::RebuildInstance);
    BootAsks {
        image: rebuilds,
        machine_type: rebuilds || has(&ReplicaStep::SetMachineType),
    }
}

/// The refusal of replica `me`'s roll when Compute Engine no longer has what it would boot: `gone` is the plan's
/// own refusal of that image or type (`image::ImageRef::not_found`, `machine_type::not_offered`), whose summary
/// names it. Said before any step ran; `down` says whether the master was down already (a roll stopped part way
/// by an earlier apply), so the sentence says what state it is in.
pub fn withdrawn(me: &str, gone: Problem, attribute: &str, down: bool) -> Problem {
    let (what, _) = gone;
    let state = if down {
        format!(
            "Replica {me}'s VM is stopped or deleted already (a roll an earlier apply did not finish), so this \
             roll was to bring it back: it stays down until it can boot."
        )
    } else {
        format!("Nothing was stopped or deleted: replica {me} still runs as it did.")
    };
    (
        format!("The roll of replica {me} did not start: {what}"),
        format!(
            "Compute Engine was asked again under the cluster's lock, before the roll would stop or delete the \
             master or create it again, and no longer has it, so the master would not have come back. {state} \
             Set the cluster's `{attribute}` to one that exists (plan asks Compute Engine again) and apply; the \
             replicas not rolled yet roll then."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::ClusterStep;

    #[test]
    fn asks_what_the_steps_boot_again() {
        let rebuild: Vec<Step> = vec![
            ClusterStep::TakeBackup {
                change: "roll".into(),
            }
            .into(),
            ReplicaStep::RemoveFromPool.into(),
            ReplicaStep::DeleteInstance.into(),
            ReplicaStep::RebuildInstance.into(),
            ReplicaStep::AwaitMember.into(),
        ];
        let resize: Vec<Step> = vec![
            ReplicaStep::StopInstance.into(),
            ReplicaStep::SetMachineType.into(),
            ReplicaStep::StartInstance.into(),
        ];
        let relabel: Vec<Step> = vec![ReplicaStep::LabelVm.into()];
        let restart: Vec<Step> = vec![
            ReplicaStep::StartInstance.into(),
            ReplicaStep::AwaitRestarted.into(),
        ];
        let cases: [(&[Step], BootAsks); 5] = [
            (
                &rebuild,
                BootAsks {
                    image: true,
                    machine_type: true,
                },
            ),
            (
                &resize,
                BootAsks {
                    image: false,
                    machine_type: true,
                },
            ),
            (&relabel, BootAsks::default()),
            (&restart, BootAsks::default()),
            (&[], BootAsks::default()),
        ];
        for (steps, want) in cases {
            assert_eq!(boot_asks(steps), want, "{steps:?}");
            assert_eq!(boot_asks(steps).any(), want != BootAsks::default());
        }
    }

    #[test]
    fn the_refusal_names_the_replica_what_is_gone_and_the_attribute() {
        let gone = crate::machine_type::not_offered("e2-standard-8", "europe-west1-b");
        let (summary, detail) = withdrawn("prod-b", gone.clone(), "machine_type", false);
        assert_eq!(
            summary,
            "The roll of replica prod-b did not start: Machine type e2-standard-8 does not exist in zone europe-west1-b"
        );
        assert!(
            detail.contains("Nothing was stopped or deleted"),
            "{detail}"
        );
        assert!(detail.contains("`machine_type`"), "{detail}");
        assert!(!detail.contains("Nothing was planned"), "{detail}");
        // A master an earlier apply left down is not said to run.
        let (_, detail) = withdrawn("prod-b", gone, "machine_type", true);
        assert!(!detail.contains("still runs"), "{detail}");
        assert!(detail.contains("stays down until it can boot"), "{detail}");
    }
}
