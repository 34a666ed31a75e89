//! Mending a replica in place: what an update that rolls nothing does to the VM (`ops::mend::mend_replica`).
//! The world moved behind Terraform's back without changing what the master is made of: the VM was stopped or
//! crashed, its metadata or labels were edited by hand, or the replica's own labels changed. Each is put back
//! with no rebuild, in the order a VM needs: its metadata before it boots, and its labels last, as a join's and
//! a roll's are ([`step::labelled_last`]).

use std::collections::BTreeMap;

use super::metadata::metadata_drift;
use super::step::{self, MetadataItems, ReplicaStep, Step};
use super::topology::{Observed, Refusal};

/// The steps that mend replica `name`: write back `wrote` (the metadata the provider set, if it kept it) where
/// the VM's own (`carries`) differs, start the VM if it is not running and await its member, then label it.
/// `LabelVm` calls nothing when the labels are already right, so a replica in order gets a list that does nothing.
pub fn mend_steps(
    world: &Observed,
    name: &str,
    wrote: Option<&BTreeMap<String, String>>,
    carries: &[(String, String)],
) -> Result<Vec<Step>, Refusal> {
    if !world.instances.contains(name) {
        return Err((
            format!("The VM of replica {name} is gone"),
            "It was deleted after the plan was made, so there is nothing to start or label. Run `terraform apply` \
             again: its plan creates the VM again on its etcd data disk."
                .to_string(),
        ));
    }
    let mut steps = Vec::new();
    if let Some(wrote) = wrote.filter(|w| !w.is_empty())
        && !metadata_drift(wrote, carries).is_empty()
    {
        steps.push(
            ReplicaStep::WriteMetadata {
                items: MetadataItems(wrote.clone()),
            }
            .into(),
        );
    }
    if world.stopped.contains(name) {
        steps.push(ReplicaStep::StartInstance.into());
        steps.push(ReplicaStep::AwaitRestarted.into());
    }
    Ok(step::labelled_last(steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(running: &[&str], stopped: &[&str]) -> Observed {
        Observed {
            instances: running
                .iter()
                .chain(stopped)
                .map(|n| n.to_string())
                .collect(),
            stopped: stopped.iter().map(|n| n.to_string()).collect(),
            ..Observed::default()
        }
    }

    type Metadata = BTreeMap<String, String>;

    fn wrote() -> Metadata {
        [("cluster-name", "walk"), ("user-data", "#cloud-config")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn carries(m: &BTreeMap<String, String>) -> Vec<(String, String)> {
        m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    #[test]
    fn each_thing_out_of_order_gets_its_step_and_nothing_else_does() {
        let write = || -> Step {
            ReplicaStep::WriteMetadata {
                items: MetadataItems(wrote()),
            }
            .into()
        };
        let mut edited = wrote();
        edited.insert("startup-script".into(), "curl evil".into());
        // (case, the world, the metadata the state kept, the metadata the VM carries, the steps)
        type Case = (
            &'static str,
            Observed,
            Option<Metadata>,
            Vec<(String, String)>,
            Vec<Step>,
        );
        let cases: Vec<Case> = vec![
            (
                "in order: only the label check, which calls nothing when they are right",
                world(&["a", "b"], &[]),
                Some(wrote()),
                carries(&wrote()),
                vec![ReplicaStep::LabelVm.into()],
            ),
            (
                "stopped: started, awaited, labelled",
                world(&["b"], &["a"]),
                Some(wrote()),
                carries(&wrote()),
                vec![
                    ReplicaStep::StartInstance.into(),
                    ReplicaStep::AwaitRestarted.into(),
                    ReplicaStep::LabelVm.into(),
                ],
            ),
            (
                "an item added by hand: the whole set written back",
                world(&["a"], &[]),
                Some(wrote()),
                carries(&edited),
                vec![write(), ReplicaStep::LabelVm.into()],
            ),
            (
                "edited and stopped: the metadata first, since the VM boots from it",
                world(&[], &["a"]),
                Some(wrote()),
                carries(&edited),
                vec![
                    write(),
                    ReplicaStep::StartInstance.into(),
                    ReplicaStep::AwaitRestarted.into(),
                    ReplicaStep::LabelVm.into(),
                ],
            ),
            (
                "no metadata kept (an imported replica): none written",
                world(&["a"], &[]),
                None,
                carries(&edited),
                vec![ReplicaStep::LabelVm.into()],
            ),
            (
                "an empty set kept: none written",
                world(&["a"], &[]),
                Some(BTreeMap::new()),
                carries(&edited),
                vec![ReplicaStep::LabelVm.into()],
            ),
        ];
        for (case, world, wrote, carries, want) in cases {
            assert_eq!(
                mend_steps(&world, "a", wrote.as_ref(), &carries).unwrap(),
                want,
                "{case}"
            );
        }
    }

    #[test]
    fn a_vm_deleted_since_the_plan_is_refused_with_the_way_on() {
        let (summary, detail) =
            mend_steps(&world(&["b"], &[]), "a", Some(&wrote()), &[]).unwrap_err();
        assert_eq!(summary, "The VM of replica a is gone");
        assert!(detail.contains("creates the VM again"), "{detail}");
    }
}
