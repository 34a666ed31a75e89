//! A join that would found a new, empty etcd where the cluster had data is refused, at plan and at apply, unless
//! the cluster says starting empty is intended (`restore { source = "empty" }` with a raised generation).
//!
//! Why refuse rather than warn: a pipeline that applies on a green plan never reads a warning, and the empty etcd
//! it founds is then backed up by the joins that follow, so "restore the newest snapshot" would restore the empty
//! one. The evidence that a cluster had data, any one of which is enough:
//! - its load balancer exists (it is there only while the cluster has two replicas or more);
//! - a replica's state holds an etcd member while no VM and no data disk are left (the one-replica case, which has
//!   no load balancer);
//! - the cluster's backup location holds snapshots of it.

use super::Problem;
use super::topology::{Observed, Refusal};

/// The `restore.source` that founds a new, empty etcd on purpose.
pub const EMPTY: &str = "empty";

/// What says the cluster had data, besides its load balancer (which the observed world shows).
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence<'a> {
    /// A replica whose state holds an etcd member, although its VM and data disk are gone.
    pub had_member: Option<&'a str>,
    /// The newest snapshot of the cluster in its backup location (`gs://…`).
    pub newest_snapshot: Option<&'a str>,
    /// The cluster's `restore` block asks for a snapshot: a replica's create restores it only into a cluster with
    /// no data of its own, so the refusal says that rather than "would start it empty".
    pub create_restore: bool,
}

/// A join founds etcd when no replica has a VM (a replica whose VM is gone and whose disk is not is rebuilt on
/// that disk instead of joining) and no voting member answers.
pub fn founds(world: &Observed) -> bool {
    world.instances.is_empty() && world.voters().next().is_none()
}

/// The refusal of a founding join over a cluster that had data; `None` when the join does not found, or nothing
/// says there was data (a new cluster).
pub fn check(world: &Observed, cluster: &str, evidence: &Evidence) -> Option<Refusal> {
    if !founds(world) {
        return None;
    }
    let mut why = Vec::new();
    if world.forwarding_rule || world.pool.is_some() {
        why.push("its load balancer exists, so it had two replicas or more".to_string());
    }
    if let Some(replica) = evidence.had_member {
        why.push(format!(
            "the state of replica {replica} holds an etcd member"
        ));
    }
    if let Some(url) = evidence.newest_snapshot {
        why.push(format!("its newest snapshot is {url}"));
    }
    if why.is_empty() {
        return None;
    }
    let restore_newest = match evidence.newest_snapshot {
        Some(url) => format!("restore {url}"),
        None => "restore a snapshot".to_string(),
    };
    if evidence.create_restore {
        return Some((
            format!(
                "Cluster {cluster} had data of its own, so its `restore` block does not apply to this create: refused"
            ),
            format!(
                "No replica of cluster {cluster} has a VM or a data disk left, so the first replica to apply would found etcd anew. A `restore` block restores at a replica's create only into a cluster that shows no data of its own (a new cluster started from another's snapshot), so that no create puts an older snapshot in place of a cluster's own data unasked. The cluster had data: {}. To restore into it on purpose, raise `restore.generation` by one: the snapshot the block names is restored (without one, the newest: {restore_newest}). To start empty on purpose, keeping the snapshots, raise it with `source = \"{EMPTY}\"` instead. See docs/guides/disaster-recovery.md.",
                why.join("; ")
            ),
        ));
    }
    Some((
        format!("Cluster {cluster} had data, and this apply would start it empty: refused"),
        format!(
            "No replica of cluster {cluster} has a VM or a data disk left, so the first replica to apply would found a new, empty etcd, and every Kubernetes object the old masters held would be gone. The cluster had data: {}. To {restore_newest}, add `restore {{ source = \"snapshot\", generation = 1 }}` to the ha_master_cluster (or raise its generation by one). To start empty on purpose, keeping the snapshots, raise it with `source = \"{EMPTY}\"` instead. See docs/guides/disaster-recovery.md.",
            why.join("; ")
        ),
    ))
}

/// At a new cluster's plan, with a `restore` block naming a snapshot: its own backup location (`location`) holds
/// snapshots under its name already, the newest `newest_own`, left by an earlier cluster of that name. To the
/// founding rules that is data of its own (`check`), so the first replica's create would be refused at apply; the
/// plan refuses instead, with the way that works. `None` when the location holds none.
pub fn check_new_cluster(
    cluster: &str,
    location: &str,
    newest_own: Option<&str>,
) -> Option<Refusal> {
    let newest = newest_own?;
    Some((
        format!(
            "Cluster {cluster}'s backup location already holds snapshots of a cluster of that name: its `restore` block cannot apply"
        ),
        format!(
            "{location} holds snapshots of a cluster named {cluster}, the newest {newest}, so to the founding rules the cluster had data, and a replica's create never restores over data of its own: the apply would stop at the first replica. To start this cluster from a snapshot, give its `backup` block a `prefix` that no cluster named {cluster} used (or give the cluster another name), and name the snapshot in `restore.snapshot` (it may be {newest}). See docs/guides/disaster-recovery.md."
        ),
    ))
}

/// At plan, a raised `restore.generation` with `source = "empty"`: what the apply does, or why it may not. Refused
/// while replica VMs exist: their members may hold the data (a plain apply restarts a stopped VM), and a join
/// among them founds nothing anyway.
pub fn decide(
    world: &Observed,
    cluster: &str,
    newest_snapshot: Option<&str>,
) -> Result<Problem, Refusal> {
    if !world.instances.is_empty() {
        let vms: Vec<&str> = world.instances.iter().map(String::as_str).collect();
        return Err((
            format!("Replica VMs of cluster {cluster} still exist: starting empty refused"),
            format!(
                "The VMs of {} exist, so their etcd members may come back with their data. `source = \"{EMPTY}\"` is for a cluster with no replica VM or data disk left. If their data is lost for good, delete those VMs and their data disks, then plan again; otherwise set `restore.generation` back to what it was.",
                vms.join(", ")
            ),
        ));
    }
    let kept = match newest_snapshot {
        Some(url) => format!(
            " The snapshots in the backup location are kept; the newest, {url}, can still be restored later (`source = \"snapshot\"`, `snapshot = \"{url}\"`)."
        ),
        None => String::new(),
    };
    Ok((
        format!("Cluster {cluster} starts with a new, empty etcd"),
        format!(
            "No replica of the cluster has a VM, and `restore.source = \"{EMPTY}\"` asks for a new etcd with no data: the first replica to apply founds it and the others join it. Every Kubernetes object the old masters held is gone from the new cluster.{kept}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MemberView;

    fn gone() -> Observed {
        Observed::default()
    }

    #[test]
    fn a_founding_join_over_any_evidence_of_data_is_refused_naming_it() {
        let mut lb = gone();
        lb.forwarding_rule = true;
        let snapshot = "gs://b/clusters/prod/etcd-20261126T101500Z-rev42.db";
        let cases: [(Observed, Evidence, &str); 3] = [
            (lb, Evidence::default(), "its load balancer exists"),
            (
                gone(),
                Evidence {
                    had_member: Some("prod-b"),
                    ..Evidence::default()
                },
                "the state of replica prod-b holds an etcd member",
            ),
            (
                gone(),
                Evidence {
                    newest_snapshot: Some(snapshot),
                    ..Evidence::default()
                },
                "its newest snapshot is gs://b/clusters/prod/etcd-20261126T101500Z-rev42.db",
            ),
        ];
        for (world, evidence, why) in cases {
            let (summary, detail) = check(&world, "prod", &evidence).expect(why);
            assert!(summary.contains("refused"), "{summary}");
            for part in [why, "source = \"snapshot\"", "source = \"empty\""] {
                assert!(detail.contains(part), "{part}: {detail}");
            }
        }
    }

    #[test]
    fn a_create_with_a_restore_block_is_told_why_its_block_does_not_apply_and_how_to_restore() {
        let snapshot = "gs://b/clusters/prod/etcd-20261126T101500Z-rev42.db";
        let evidence = Evidence {
            newest_snapshot: Some(snapshot),
            create_restore: true,
            ..Evidence::default()
        };
        let (summary, detail) = check(&gone(), "prod", &evidence).unwrap();
        assert!(
            summary.contains("its `restore` block does not apply")
                && !summary.contains("start it empty"),
            "{summary}"
        );
        for part in [
            "its newest snapshot is gs://b/clusters/prod/",
            "raise `restore.generation` by one",
            "source = \"empty\"",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
        // Without evidence of data, the block applies: nothing to refuse.
        let create = Evidence {
            create_restore: true,
            ..Evidence::default()
        };
        assert_eq!(check(&gone(), "prod", &create), None);
    }

    #[test]
    fn a_new_cluster_whose_location_holds_its_names_snapshots_is_refused_with_the_way_that_works() {
        let location = "gs://b/clusters/prod/";
        assert_eq!(check_new_cluster("prod", location, None), None);
        let newest = "gs://b/clusters/prod/etcd-20261126T101500Z-rev42.db";
        let (summary, detail) = check_new_cluster("prod", location, Some(newest)).unwrap();
        assert!(summary.contains("cannot apply"), "{summary}");
        for part in [location, newest, "`prefix`", "`restore.snapshot`"] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
    }

    #[test]
    fn a_new_cluster_or_a_join_among_members_is_not_refused() {
        // Nothing says there was data: a new cluster founds.
        assert_eq!(check(&gone(), "prod", &Evidence::default()), None);
        // A VM left, or a voter answering: the join does not found.
        let mut vm = gone();
        vm.instances.insert("prod-b".into());
        vm.forwarding_rule = true;
        assert_eq!(check(&vm, "prod", &Evidence::default()), None);
        let mut voter = gone();
        voter.forwarding_rule = true;
        voter.members = Some(vec![MemberView {
            name: "prod-c".into(),
            id: 1,
            is_learner: false,
            healthy: true,
            answered: true,
        }]);
        assert_eq!(check(&voter, "prod", &Evidence::default()), None);
    }

    #[test]
    fn starting_empty_on_purpose_needs_every_vm_gone_and_keeps_the_snapshots() {
        let mut vm = gone();
        vm.instances.insert("prod-b".into());
        let (summary, detail) = decide(&vm, "prod", None).unwrap_err();
        assert!(summary.contains("still exist"), "{summary}");
        assert!(detail.contains("prod-b"), "{detail}");
        let (summary, detail) = decide(&gone(), "prod", Some("gs://b/x.db")).unwrap();
        assert!(summary.contains("new, empty etcd"), "{summary}");
        assert!(detail.contains("gs://b/x.db"), "{detail}");
    }
}
