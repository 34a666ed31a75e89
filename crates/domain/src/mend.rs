//! Mending a replica in place: what an update that rolls nothing does to the VM (`ops::mend::mend_replica`).
//! The world moved behind Terraform's back without changing what the master is made of: the VM was stopped or
//! crashed, its metadata or labels were edited by hand, or the replica's own labels changed. Each is put back
//! with no rebuild, in the order a VM needs: its metadata before it boots, and its labels last, as a join's and
//! a roll's are ([`step::labelled_last`]).

use std::collections::BTreeMap;

use super::metadata::{item_drift, restored};
use super::step::{self, MetadataItems, ReplicaStep, Step};
use super::topology::{Observed, Refusal};

/// The steps that mend replica `name`: write back the metadata the provider set (`wrote`, its digests, if the
/// state kept them) where the VM's own (`carries`) differs, with the values `metadata::restored` finds (the VM's
/// own, or those the settings make: `remade`), start the VM if it is not running and await its member, then
/// label it. `LabelVm` calls nothing when the labels are already right, so a replica in order gets a list that
/// does nothing.
pub fn mend_steps(
    world: &Observed,
    name: &str,
    wrote: Option<&BTreeMap<String, String>>,
    carries: &[(String, String)],
    remade: &BTreeMap<String, String>,
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
        && !item_drift(wrote, carries).is_empty()
    {
        let items = restored(wrote, carries, remade).map_err(|key| lost(name, &key))?;
        steps.push(
            ReplicaStep::WriteMetadata {
                items: MetadataItems(items),
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

/// An item the VM no longer carries as the provider wrote it, edited after the plan (whose refresh saw it
/// untouched, or it would have planned a rebuild).
fn lost(name: &str, key: &str) -> Refusal {
    (
        format!("The metadata item {key} of replica {name} was edited after the plan"),
        format!(
            "The state keeps only a digest of the {key} the provider wrote, and the VM no longer carries it, so \
             it cannot be written back in place. Nothing was changed. Run `terraform apply` again: its plan \
             rebuilds the VM with a fresh startup configuration."
        ),
    )
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

    /// What the provider wrote on the VM.
    fn values() -> Metadata {
        [("cluster-name", "walk"), ("user-data", "#cloud-config")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// What the state keeps of it.
    fn kept() -> Metadata {
        crate::metadata::digests(&values())
    }

    fn remade() -> Metadata {
        BTreeMap::from([("cluster-name".to_string(), "walk".to_string())])
    }

    fn carries(m: &BTreeMap<String, String>) -> Vec<(String, String)> {
        m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    #[test]
    fn each_thing_out_of_order_gets_its_step_and_nothing_else_does() {
        let write = || -> Step {
            ReplicaStep::WriteMetadata {
                items: MetadataItems(values()),
            }
            .into()
        };
        let mut edited = values();
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
                Some(kept()),
                carries(&values()),
                vec![ReplicaStep::LabelVm.into()],
            ),
            (
                "stopped: started, awaited, labelled",
                world(&["b"], &["a"]),
                Some(kept()),
                carries(&values()),
                vec![
                    ReplicaStep::StartInstance.into(),
                    ReplicaStep::AwaitRestarted.into(),
                    ReplicaStep::LabelVm.into(),
                ],
            ),
            (
                "an item added by hand: the whole set written back",
                world(&["a"], &[]),
                Some(kept()),
                carries(&edited),
                vec![write(), ReplicaStep::LabelVm.into()],
            ),
            (
                "edited and stopped: the metadata first, since the VM boots from it",
                world(&[], &["a"]),
                Some(kept()),
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
                mend_steps(&world, "a", wrote.as_ref(), &carries, &remade()).unwrap(),
                want,
                "{case}"
            );
        }
    }

    #[test]
    fn a_vm_deleted_since_the_plan_is_refused_with_the_way_on() {
        let (summary, detail) =
            mend_steps(&world(&["b"], &[]), "a", Some(&kept()), &[], &remade()).unwrap_err();
        assert_eq!(summary, "The VM of replica a is gone");
        assert!(detail.contains("creates the VM again"), "{detail}");
    }

    /// The cluster's name is made again from the settings; a startup configuration edited after the plan (which
    /// would have planned a rebuild) is refused, with nothing written.
    #[test]
    fn only_what_a_value_is_held_for_is_written_back() {
        let mut renamed = values();
        renamed.insert("cluster-name".into(), "x".into());
        let steps = mend_steps(
            &world(&["a"], &[]),
            "a",
            Some(&kept()),
            &carries(&renamed),
            &remade(),
        );
        assert_eq!(
            steps.unwrap(),
            vec![
                ReplicaStep::WriteMetadata {
                    items: MetadataItems(values())
                }
                .into(),
                ReplicaStep::LabelVm.into()
            ]
        );
        let mut edited = values();
        edited.insert("user-data".into(), "#cloud-config\nruncmd: [evil]".into());
        let (summary, detail) = mend_steps(
            &world(&["a"], &[]),
            "a",
            Some(&kept()),
            &carries(&edited),
            &remade(),
        )
        .unwrap_err();
        assert_eq!(
            summary,
            "The metadata item user-data of replica a was edited after the plan"
        );
        assert!(detail.contains("rebuilds the VM"), "{detail}");
    }
}
