//! What refresh found wrong with one replica, and the repair the plan announces for it: the replica's twin of
//! `domain::shape`. Refresh records facts (the VM's status, whether etcd still lists the member, metadata edited
//! by hand); this module turns them into one repair and the sentence that says what the apply will do. The
//! resource only writes the repair onto its planned values.

use super::metadata::must_rebuild;

/// What refresh found of the replica's VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmSeen {
    /// GCE's status (`RUNNING`, `TERMINATED`, …); empty for a state from before the provider recorded it.
    Status(String),
    /// Gone, but its etcd data disk and member remain.
    GoneWithDataDisk,
    /// Gone, and nothing to rebuild it on.
    Gone,
}

/// Whether etcd still lists the replica's member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberSeen {
    Listed,
    /// etcd answered without it: it was removed.
    Removed,
}

/// What refresh found of one replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSeen<'a> {
    pub name: &'a str,
    pub zone: &'a str,
    pub vm: VmSeen,
    pub member: MemberSeen,
    /// The member's id as state records it (hex), when known.
    pub member_id: Option<&'a str>,
    /// One sentence per metadata item changed by hand (`domain::metadata`).
    pub metadata_drift: &'a [String],
}

/// The repair a plan announces for a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Delete the replica (its member and reserved IP with it) and let a fresh one join in its zone.
    Replace,
    /// Create the VM again on its data disk and internal IP: the same member, with its data.
    Rebuild,
    /// Start the VM again and wait for its member.
    Start,
    /// Write the provider's metadata back (before any start: the VM boots from it).
    RestoreMetadata,
}

/// Whether etcd still lists the member state records (`recorded`, hex, as `etcd_member_id`): removed only when etcd
/// answered (`listed` is its member ids) and none of them is it. An unread list says nothing about membership, and
/// a replica with no member recorded has none to lose.
pub fn member_seen(listed: Option<&[u64]>, recorded: Option<&str>) -> MemberSeen {
    match (listed, recorded) {
        (Some(ids), Some(id)) if !id.is_empty() && !ids.iter().any(|m| format!("{m:x}") == id) => {
            MemberSeen::Removed
        }
        _ => MemberSeen::Listed,
    }
}

/// Refresh found no VM for a replica: rebuild it when its data disk exists and etcd has not removed its member
/// (a VM deleted by hand, or a roll killed between delete and create); otherwise it can only be replaced.
pub fn vanished_vm(data_disk: bool, member: MemberSeen) -> VmSeen {
    if data_disk && member == MemberSeen::Listed {
        VmSeen::GoneWithDataDisk
    } else {
        VmSeen::Gone
    }
}

/// The repairs the plan announces, each with its warning (summary, what the apply will do), in the order apply
/// carries them out. A replacement or a rebuild stands alone: it makes everything else moot.
pub fn replica_repairs(seen: &ReplicaSeen<'_>) -> Vec<(Repair, (String, String))> {
    let ReplicaSeen { name, zone, .. } = *seen;
    match (&seen.vm, seen.member) {
        (VmSeen::Gone, _) => {
            return vec![(
                Repair::Replace,
                (
                    format!("The VM of replica {name} is gone"),
                    "Refresh found no VM for this replica, so the plan replaces it: its etcd member is removed first, then a fresh replica joins in the same zone.".to_string(),
                ),
            )];
        }
        (_, MemberSeen::Removed) => {
            return vec![(
                Repair::Replace,
                (
                    format!("The etcd member of replica {name} was removed out of band"),
                    format!(
                        "etcd answers without a member for {name} although its VM in {zone} still exists. A removed member cannot rejoin with its old data, so the plan replaces the replica: the old VM is deleted, then a fresh replica joins in the same zone as a new member."
                    ),
                ),
            )];
        }
        (VmSeen::GoneWithDataDisk, _) => {
            return vec![(
                Repair::Rebuild,
                (
                    format!("The VM of replica {name} is gone; its etcd data disk is not"),
                    format!(
                        "Refresh found no VM for replica {name} in {zone}, but its etcd data disk and member remain (the VM was deleted by hand, or a roll was interrupted between deleting and creating it). `terraform apply` creates the VM again on that disk and internal IP, so etcd restarts as the same member with its data, and puts it back behind the load balancer once its API answers."
                    ),
                ),
            )];
        }
        (VmSeen::Status(_), MemberSeen::Listed) => {}
    }
    if must_rebuild(seen.metadata_drift) {
        return vec![(
            Repair::Rebuild,
            (
                format!("The startup configuration of replica {name} was edited out of band"),
                format!(
                    "{}. The state keeps only a digest of each metadata item the provider wrote (`startup_metadata`), and the startup configuration (`user-data`) holds the certificates the VM was built with, so it cannot be written back in place. `terraform apply` rebuilds the VM on its etcd data disk, as a roll does: out of the load balancer, a new VM with a fresh boot disk, startup configuration and certificates, the same etcd member with its data, back in the load balancer once its API answers. Items added by hand go with the old VM.",
                    capitalize(&seen.metadata_drift.join("; "))
                ),
            ),
        )];
    }
    let mut out = Vec::new();
    if !seen.metadata_drift.is_empty() {
        out.push((
            Repair::RestoreMetadata,
            (
                format!("The metadata of replica {name} was edited out of band"),
                format!(
                    "{}. `terraform apply` writes back the items the provider set (their digests are `startup_metadata`) and removes those added by hand; the VM reads its startup configuration from them at its next boot.",
                    capitalize(&seen.metadata_drift.join("; "))
                ),
            ),
        ));
    }
    if let VmSeen::Status(status) = &seen.vm
        && !status.is_empty()
        && status != "RUNNING"
    {
        let member = seen
            .member_id
            .map(|id| format!("its etcd member {name} (id {id})"))
            .unwrap_or_else(|| "its etcd member".into());
        out.push((
            Repair::Start,
            (
                format!("Replica {name} is {status}, and {member} is unhealthy"),
                format!(
                    "The VM of replica {name} in {zone} is not running, so {member} is down and the cluster tolerates one failure less. `terraform apply` starts the VM again and waits until the member is healthy. If it cannot recover (a broken disk, a corrupt etcd), replace it instead: `terraform apply -replace='<address>'`, where the address is that of the ha_master_replica resource named {name} in {zone}; the dead member is removed before a new replica joins in the same zone."
                ),
            ),
        ));
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_removed_only_when_etcd_answered_without_it() {
        let ids: &[u64] = &[0xa1, 0xb2];
        type Case<'a> = (Option<&'a [u64]>, Option<&'a str>, MemberSeen);
        let cases: [Case; 6] = [
            (Some(ids), Some("a1"), MemberSeen::Listed),
            (Some(ids), Some("c3"), MemberSeen::Removed),
            // etcd unreachable: nothing is known.
            (None, Some("c3"), MemberSeen::Listed),
            // No member recorded (a state from before, or a join that never added one).
            (Some(ids), Some(""), MemberSeen::Listed),
            (Some(ids), None, MemberSeen::Listed),
            // etcd answered with no member at all.
            (Some(&[]), Some("a1"), MemberSeen::Removed),
        ];
        for (listed, recorded, want) in cases {
            assert_eq!(
                member_seen(listed, recorded),
                want,
                "{listed:?} {recorded:?}"
            );
        }
    }

    fn seen<'a>(vm: VmSeen, member: MemberSeen, drift: &'a [String]) -> ReplicaSeen<'a> {
        ReplicaSeen {
            name: "m1",
            zone: "europe-west1-b",
            vm,
            member,
            member_id: Some("6b48"),
            metadata_drift: drift,
        }
    }

    fn repairs(s: &ReplicaSeen<'_>) -> Vec<Repair> {
        replica_repairs(s).into_iter().map(|(r, _)| r).collect()
    }

    #[test]
    fn each_finding_has_its_repair() {
        use MemberSeen::*;
        use Repair::*;
        let none: &[String] = &[];
        let edited = ["metadata item ssh-keys was added to the VM".to_string()];
        let lost = [
            "metadata item user-data was changed on the VM".to_string(),
            "metadata item ssh-keys was added to the VM".to_string(),
        ];
        let running = || VmSeen::Status("RUNNING".into());
        let stopped = || VmSeen::Status("TERMINATED".into());
        let cases: Vec<(ReplicaSeen<'_>, Vec<Repair>)> = vec![
            (seen(running(), Listed, none), vec![]),
            (seen(VmSeen::Status(String::new()), Listed, none), vec![]),
            (seen(stopped(), Listed, none), vec![Start]),
            (seen(running(), Listed, &edited), vec![RestoreMetadata]),
            // Metadata first: the VM boots from it.
            (
                seen(stopped(), Listed, &edited),
                vec![RestoreMetadata, Start],
            ),
            // A removed member cannot rejoin with its old data, whatever else is wrong.
            (seen(stopped(), Removed, &edited), vec![Replace]),
            (seen(VmSeen::Gone, Listed, none), vec![Replace]),
            (
                seen(VmSeen::GoneWithDataDisk, Listed, &edited),
                vec![Rebuild],
            ),
            // A startup configuration only the VM held: rebuilt, which starts it too.
            (seen(running(), Listed, &lost), vec![Rebuild]),
            (seen(stopped(), Listed, &lost), vec![Rebuild]),
            (seen(stopped(), Removed, &lost), vec![Replace]),
        ];
        for (s, want) in cases {
            assert_eq!(repairs(&s), want, "{s:?}");
        }
    }

    #[test]
    fn a_vanished_vm_is_rebuilt_only_on_its_disk_and_member() {
        assert_eq!(
            vanished_vm(true, MemberSeen::Listed),
            VmSeen::GoneWithDataDisk
        );
        assert_eq!(vanished_vm(true, MemberSeen::Removed), VmSeen::Gone);
        assert_eq!(vanished_vm(false, MemberSeen::Listed), VmSeen::Gone);
    }

    #[test]
    fn the_sentences_name_the_replica_and_what_apply_does() {
        let edited = ["metadata item ssh-keys was added to the VM".to_string()];
        let (_, (summary, detail)) = replica_repairs(&seen(
            VmSeen::Status("TERMINATED".into()),
            MemberSeen::Listed,
            &edited,
        ))
        .remove(0);
        assert_eq!(summary, "The metadata of replica m1 was edited out of band");
        assert!(
            detail.starts_with("Metadata item ssh-keys was added to the VM."),
            "{detail}"
        );
        let lost = ["metadata item user-data was removed from the VM".to_string()];
        let (_, (summary, detail)) = replica_repairs(&seen(
            VmSeen::Status("RUNNING".into()),
            MemberSeen::Listed,
            &lost,
        ))
        .remove(0);
        assert_eq!(
            summary,
            "The startup configuration of replica m1 was edited out of band"
        );
        assert!(
            detail.starts_with("Metadata item user-data was removed from the VM.")
                && detail.contains("rebuilds the VM on its etcd data disk"),
            "{detail}"
        );
        let (_, (summary, detail)) =
            replica_repairs(&seen(VmSeen::GoneWithDataDisk, MemberSeen::Listed, &[])).remove(0);
        assert!(summary.contains("m1"), "{summary}");
        let (_, (summary, _)) = replica_repairs(&seen(
            VmSeen::Status("TERMINATED".into()),
            MemberSeen::Listed,
            &[],
        ))
        .remove(0);
        assert_eq!(
            summary,
            "Replica m1 is TERMINATED, and its etcd member m1 (id 6b48) is unhealthy"
        );
        assert!(detail.contains("same member with its data"), "{detail}");
    }
}
