//! Restoring etcd from a Cloud Storage snapshot, when no member survives to recover from (`domain::recovery` is
//! the path when one does). etcd's rules, encoded once:
//! - a restore always makes a new logical cluster: the snapshot is restored as a one-member cluster of one
//!   replica, and the others join it as new members (learners first), as for any join;
//! - it is only for a cluster with nothing left running: a restore next to a live member would fork the data;
//! - a snapshot of a newer etcd minor cannot be read by an older one.
//!
//! The user opts in with the cluster's `restore { source = "snapshot", generation = N }` (and `snapshot` to pick
//! one; the newest of the cluster's backups otherwise). The first replica whose join finds no member restores:
//! its VM is created on a new data disk with the restore in its etcd pod's init containers, labelled
//! [`RESTORING_BUILD`], its member awaited, then its VM created again on that disk with its normal build, so no
//! later boot restores again. The API servers cannot serve before: they read only their own etcd, which starts
//! once the restore is done.

use std::collections::BTreeMap;

use super::etcd_version;
use super::step::{ReplicaStep, Step};
use super::topology::{Observed, Refusal, unknown_membership};
use crate::steps;

/// The `restore.source` that restores from a Cloud Storage snapshot.
pub const SNAPSHOT: &str = "snapshot";

/// The build label of a VM that restores a snapshot at its boot: no build's digest, so a roll rebuilds it.
pub const RESTORING_BUILD: &str = "restore-snapshot";

/// Which snapshot the `restore` block asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotChoice {
    /// The newest snapshot of the cluster in its `backup` bucket.
    Newest,
    /// `gs://bucket/object`.
    Url(String),
}

/// A snapshot as Cloud Storage describes it (`ops::backup` wrote the metadata; a snapshot taken by hand has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// `gs://bucket/object`.
    pub url: String,
    pub size: u64,
    pub revision: Option<i64>,
    pub etcd_version: Option<String>,
    /// Unix seconds.
    pub taken_at: Option<i64>,
    pub sha256: Option<String>,
    /// The names of the keys its Secrets may be encrypted with (`ha-secrets-key`, ha-master's `SecretsKey::name`,
    /// comma-separated: every key the cluster's API servers read when it was taken, the written one first); empty
    /// when the cluster that took it stored them plain, or for a snapshot taken by hand.
    pub secrets_keys: Vec<String>,
}

impl SnapshotInfo {
    /// From an object's size and custom metadata.
    pub fn from_metadata(url: String, size: u64, metadata: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| metadata.get(k).cloned();
        SnapshotInfo {
            url,
            size,
            revision: get("ha-revision").and_then(|r| r.parse().ok()),
            etcd_version: get("ha-etcd-version"),
            taken_at: get("ha-taken-at").and_then(|t| t.parse().ok()),
            sha256: get("ha-sha256"),
            secrets_keys: get(SECRETS_KEY_METADATA)
                .map(|names| {
                    names
                        .split(',')
                        .filter(|n| !n.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// The object metadata naming the keys a snapshot's Secrets may be encrypted with, comma-separated (a snapshot
/// taken before a change of key was possible names one).
pub const SECRETS_KEY_METADATA: &str = "ha-secrets-key";

/// Whether a cluster whose API servers read keys `ours` (their names; none when they store Secrets plain) can
/// read the Secrets in `snapshot`: a snapshot taken plain restores anywhere (the `identity` provider reads it),
/// one taken under keys only where every one of them is held (a snapshot taken during a change of key may hold
/// Secrets under each). Refused at plan otherwise, as the restored API servers could not read them.
pub fn check_secrets_key(snapshot: &SnapshotInfo, ours: &[String]) -> Result<(), Refusal> {
    let missing: Vec<&String> = snapshot
        .secrets_keys
        .iter()
        .filter(|k| !ours.contains(k))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err((
        "The snapshot's Secrets are encrypted with a key this cluster does not hold".into(),
        format!(
            "{} was taken by a cluster whose Secrets were encrypted with key {}, and this cluster's API servers \
             {}: restored, they could not read those Secrets. Set `secrets_encryption_key` (or, for a key that \
             only has to be read, `secrets_decryption_keys`) to the Secret Manager version that holds key {} (the \
             one the cluster that took it named), or point `restore.snapshot` at another snapshot.",
            snapshot.url,
            names(snapshot.secrets_keys.iter()),
            if ours.is_empty() {
                "store Secrets plain".to_string()
            } else {
                format!("hold {}", names(ours.iter()))
            },
            names(missing),
        ),
    ))
}

/// Splits `gs://bucket/object`, or says what is wrong with it.
pub fn parse_url(url: &str) -> Result<(&str, &str), String> {
    let rest = url
        .strip_prefix("gs://")
        .ok_or_else(|| format!("{url:?} does not start with gs://"))?;
    match rest.split_once('/') {
        Some((bucket, object)) if !bucket.is_empty() && !object.is_empty() => Ok((bucket, object)),
        _ => Err(format!(
            "{url:?} names no object: write it as gs://<bucket>/<object>"
        )),
    }
}

fn names<'a>(it: impl IntoIterator<Item = &'a String>) -> String {
    it.into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a restore from `snapshot` may run on `world`: only when no replica VM of the cluster is left, and
/// the snapshot is one the cluster's etcd can read. `looked_in` says where the newest was looked for.
pub fn decide(
    world: &Observed,
    cluster_etcd_version: &str,
    snapshot: Option<&SnapshotInfo>,
    looked_in: &str,
) -> Result<(), Refusal> {
    if !world.instances.is_empty() {
        if let Some(refusal) = unknown_membership(world, "restore etcd from a snapshot") {
            return Err(refusal);
        }
        let answering: Vec<&String> = world
            .members
            .iter()
            .flatten()
            .filter(|m| m.answered && world.instances.contains(&m.name))
            .map(|m| &m.name)
            .collect();
        if !answering.is_empty() {
            return Err((
                "etcd members still run: restore from a snapshot refused".into(),
                format!(
                    "The members of {} answer with their data. A restore makes a new cluster from an older snapshot and would lose what they hold since. If etcd has lost quorum, recover from a surviving member instead, with no data lost: set `restore.source = \"{}\"`. Otherwise set `restore.generation` back to what it was.",
                    names(answering),
                    super::recovery::SURVIVING_MEMBER
                ),
            ));
        }
        return Err((
            "Replica VMs of the cluster still exist: restore from a snapshot refused".into(),
            format!(
                "The VMs of {} exist, so their etcd members may come back with their data: a plain `terraform apply` restarts a TERMINATED VM, and plan shows what else is wrong with them. A restore is for a cluster with no replica VM left. If their data is lost for good, delete those VMs and their data disks (`gcloud compute instances delete`), then plan again; otherwise set `restore.generation` back to what it was.",
                names(&world.instances)
            ),
        ));
    }
    let Some(snapshot) = snapshot else {
        return Err((
            "No snapshot to restore from".into(),
            format!(
                "No snapshot of this cluster is in {looked_in}. Point `restore.snapshot` at one (`gs://<bucket>/<object>`), or set `restore.generation` back to what it was."
            ),
        ));
    };
    if let (Some(taken), Some(ours)) = (
        snapshot
            .etcd_version
            .as_deref()
            .and_then(etcd_version::minor),
        etcd_version::minor(cluster_etcd_version),
    ) && minor_key(&taken) > minor_key(&ours)
    {
        return Err((
            format!("The snapshot is of etcd {taken}, newer than the cluster's {ours}"),
            format!(
                "{} was taken from etcd {taken}; etcd {ours} cannot read its data. Set the cluster's `etcd_version = \"{taken}\"` in the same change, so the restored cluster runs the etcd that wrote it.",
                snapshot.url
            ),
        ));
    }
    Ok(())
}

/// What a restored data dir holds beyond the database: etcd preallocates 64 MiB WAL segments, and the restore
/// writes one before etcd starts, which writes the next.
const WAL_ROOM: u64 = 128 << 20;

/// The recorded digest, if any, is one the restoring VM can check the bytes against: 64 lower-case hex digits,
/// as `ops::backup` writes `ha-sha256`. Anything else is metadata edited by hand, and the snapshot is not restored
/// on its word. A snapshot with no digest (taken by hand) is restored with etcd's own integrity check alone.
pub fn check_digest(snapshot: &SnapshotInfo) -> Result<(), Refusal> {
    match &snapshot.sha256 {
        Some(d) if d.len() != 64 || !d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {
            Err((
                "The snapshot's recorded SHA-256 is not a SHA-256".into(),
                format!(
                    "{} has `ha-sha256` = {d:?} in its metadata, where the backup that took it wrote 64 lower-case hex \
                 digits: the metadata was changed since. Point `restore.snapshot` at another snapshot, or, if you \
                 trust this object, set its `ha-sha256` to its real digest (`gcloud storage hash --hex`, SHA-256).",
                    snapshot.url
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Whether the snapshot fits where the restoring VM puts it: fetched onto its boot disk, then restored onto its
/// new data disk, where the database is as large as the snapshot, plus the WAL. Refuses only what cannot fit, at
/// plan, rather than an init container failing on a full disk until the apply times out.
pub fn room(snapshot: &SnapshotInfo, data_disk_gb: i64, boot_disk_gb: i64) -> Result<(), Refusal> {
    let gib = |gb: i64| u64::try_from(gb).unwrap_or(0) << 30;
    let need_gb = |bytes: u64| bytes.div_ceil(1 << 30);
    if snapshot.size + WAL_ROOM > gib(data_disk_gb) {
        let need = need_gb(snapshot.size + WAL_ROOM);
        return Err((
            format!("The snapshot does not fit a {data_disk_gb} GB data disk"),
            format!(
                "{} holds {} bytes: restored, etcd's database is as large, plus its write-ahead log, on the new data disk of `data_disk_size_gb` = {data_disk_gb}. Set the cluster's `data_disk_size_gb` to at least {need} in the same change.",
                snapshot.url, snapshot.size
            ),
        ));
    }
    if snapshot.size >= gib(boot_disk_gb) {
        let need = need_gb(snapshot.size) + 10;
        return Err((
            format!("The snapshot does not fit a {boot_disk_gb} GB boot disk"),
            format!(
                "{} holds {} bytes, and the restoring VM fetches it onto its boot disk (`boot_disk_size_gb` = {boot_disk_gb}) before restoring it. Set the cluster's `boot_disk_size_gb` to at least {need} (the snapshot and the image) in the same change.",
                snapshot.url, snapshot.size
            ),
        ));
    }
    Ok(())
}

fn minor_key(minor: &str) -> (u32, u32) {
    let mut it = minor.split('.').map(|p| p.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// The steps of the replica that restores: its VM with the restore on a new data disk, its member awaited as
/// the only one, then its VM again on that disk with its normal build, its member and API awaited, and the
/// admin binding (a snapshot taken before the addon manager made it has none).
pub fn founding_steps(with_static_ip: bool) -> Vec<Step> {
    steps![
        ReplicaStep::RestoreFromSnapshot { with_static_ip },
        ReplicaStep::AwaitMember,
        ReplicaStep::DeleteInstance,
        ReplicaStep::RebuildInstance,
        ReplicaStep::AwaitMember,
        ReplicaStep::AwaitApi,
        ReplicaStep::AwaitAdminBinding
    ]
}

/// A join's steps when the cluster restores from a snapshot: a founding join (no member left) restores instead
/// of founding an empty etcd; any other join is unchanged (it joins the restored cluster).
pub fn join_steps(steps: Vec<Step>) -> (Vec<Step>, bool) {
    let founding = steps.iter().find_map(|s| match s {
        Step::Replica(ReplicaStep::CreateFoundingInstance { with_static_ip }) => {
            Some(*with_static_ip)
        }
        _ => None,
    });
    match founding {
        Some(with_static_ip) => (founding_steps(with_static_ip), true),
        None => (steps, false),
    }
}

/// How far a restore moves etcd's revision on: more than any plausible number of writes between the snapshot and
/// the loss (a billion, as etcd's and Kubernetes' restore guides suggest), so every revision a watcher held before
/// the loss is below the restored cluster's and compacted.
pub const REVISION_BUMP: u64 = 1_000_000_000;

/// The `--bump-revision` of a restore by the cluster's `etcd_version`: [`REVISION_BUMP`] where that etcd can
/// (`etcd_version::restore_bumps_revision`), `None` where it cannot.
pub fn revision_bump(etcd_version: &str) -> Option<u64> {
    super::etcd_version::restore_bumps_revision(etcd_version).then_some(REVISION_BUMP)
}

/// What the restore does to Kubernetes' watchers, for the plan. Without the bump the revision counter goes back to
/// the snapshot's, and revisions written after the snapshot are handed out again for other changes.
pub fn revision_note(etcd_version: &str) -> String {
    match revision_bump(etcd_version) {
        Some(bump) => format!(
            "The restore moves etcd's revision on by {bump} and marks every revision before as compacted (`snapshot restore --bump-revision --mark-compacted`, etcd {etcd_version}): a watcher that holds a revision from before the loss gets \"required revision has been compacted\" and lists again, instead of resuming from a revision that now stands for other changes. Every API server restarts with the restore."
        ),
        None => format!(
            "etcd {etcd_version} cannot move its revision on when it restores (`--bump-revision` and `--mark-compacted` came with etcd 3.5.10 and 3.4.27), so the revision counter goes back to the snapshot's: a watcher that saw revisions after the snapshot may miss changes until it lists again (every API server restarts with the restore, and controllers and kubelets relist when their watches break). Set `etcd_version = \"3.5\"` in the same change to restore with etcd 3.5.24, which does."
        ),
    }
}

fn when(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| unix.to_string())
}

/// What the plan says of a restore: a warning, since it is destructive by design.
pub fn describe(cluster: &str, s: &SnapshotInfo, etcd_version: &str) -> (String, String) {
    let what = facts(s);
    (
        format!(
            "Cluster {cluster}: etcd will be restored from the snapshot {}",
            s.url
        ),
        format!(
            "No replica of the cluster has a VM, so no etcd member survives. The apply restores the snapshot ({}) as a new etcd cluster: the first replica to apply creates its VM on a new data disk, fetches the snapshot with the VM's service account (it needs read access to the object) and restores it before etcd starts; its API server serves only once the restore is done. Its VM is then created again on that disk with its normal configuration. The other replicas join as new members, learners first. Everything written after the snapshot was taken is lost. {}",
            what.join(", "),
            revision_note(etcd_version)
        ),
    )
}

/// What a snapshot is, for the plan: its size, revision, etcd version and when it was taken, as far as its
/// metadata says.
fn facts(s: &SnapshotInfo) -> Vec<String> {
    let mut what = vec![format!("{} bytes", s.size)];
    if let Some(r) = s.revision {
        what.push(format!("revision {r}"));
    }
    if let Some(v) = &s.etcd_version {
        what.push(format!("etcd {v}"));
    }
    if let Some(t) = s.taken_at {
        what.push(format!("taken {}", when(t)));
    }
    what
}

/// The plan's warning for a new cluster created with `restore { source = "snapshot" }`: its etcd starts from the
/// snapshot (another cluster's, for a move to another network or project) instead of empty.
pub fn describe_at_create(cluster: &str, s: &SnapshotInfo, etcd_version: &str) -> (String, String) {
    (
        format!(
            "Cluster {cluster}: etcd will be restored from the snapshot {}",
            s.url
        ),
        format!(
            "The new cluster's etcd starts from the snapshot ({}) instead of empty: the first replica to apply creates its VM on a new data disk, fetches the snapshot with the VM's service account (it needs read access to the object) and restores it before etcd starts; its API server serves only once the restore is done. The other replicas join as new members, learners first. The cluster the snapshot came from is not touched. {}",
            facts(s).join(", "),
            revision_note(etcd_version)
        ),
    )
}

/// What a replica's plan says when its cluster restores from a snapshot and its VM is gone.
pub fn replica_note(name: &str) -> (String, String) {
    (
        format!("Replica {name} comes back from the cluster's snapshot"),
        format!(
            "The VM and data disk of {name} are gone, and the cluster restores etcd from a snapshot. {name} is created again in its zone on a new data disk: if it is the first replica to apply, it restores the snapshot as a new one-member cluster; otherwise it joins that cluster as a new member (a learner first, promoted once caught up)."
        ),
    )
}

/// A replica whose data disk survives is not restored over: a plain apply rebuilds it on its data.
pub fn disk_survives(name: &str) -> Refusal {
    (
        format!(
            "The etcd data disk of replica {name} survives: a restore or an empty start is refused"
        ),
        format!(
            "{name}'s VM is gone but its data disk is not, so its member can come back with its data: set `restore.generation` back to what it was and apply, which creates the VM again on its disk (and, with other members lost for good, then recover from it with `restore.source = \"{}\"`). If that disk's data is bad, delete it (`gcloud compute disks delete`) and plan again.",
            super::recovery::SURVIVING_MEMBER
        ),
    )
}

/// The VMs a failed attempt at the restore left, among the cluster's VMs (name, `ha-master-build` label): each
/// still carries [`RESTORING_BUILD`], which a restore that finishes replaces (its VM is created again with its
/// normal build). A restoring join holds the cluster's lock, so no other attempt is running: such a VM is dead
/// (its fetch refused the snapshot, its etcd never answered, or its apply timed out), and what its disk holds is
/// at most the snapshot, which is still in Cloud Storage. It is deleted with its data disk
/// ([`clear_failed_attempt`]) before the restore starts again, so a failed restore does not block the next apply.
pub fn failed_attempts<'a>(
    vms: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<String> {
    vms.into_iter()
        .filter(|(_, build)| *build == Some(RESTORING_BUILD))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The steps that remove a failed attempt's VM and its data disk (each step does nothing if its object is gone).
pub fn clear_failed_attempt() -> Vec<Step> {
    steps![ReplicaStep::DeleteInstance, ReplicaStep::DeleteDataDisk]
}

/// Whether what a replica has under its name while the cluster restores was left by a failed attempt at this
/// restore rather than by a member that held data: a VM its state records no instance of, or a data disk without
/// its VM, and a state that records no etcd member (`member_recorded` false), which a failed join writes. Plan
/// then says the restore runs again for it ([`failed_attempt_note`]) and the join deletes such a disk first; a
/// disk whose replica recorded a member is refused at plan instead ([`disk_survives`]), since its member could
/// come back with its data.
pub fn left_by_failed_attempt(
    vm_without_instance: bool,
    disk_without_vm: bool,
    member_recorded: bool,
) -> bool {
    !member_recorded && (vm_without_instance || disk_without_vm)
}

/// The label a restore puts on the data disk it makes (the disk of the replica that restores the snapshot), with
/// the cluster's `restore.generation` as its value. A replica's state records the generation it last applied
/// under (its `cluster` input), so a disk whose label is higher was made by a restore after that state was
/// written: the etcd member that state records is not on it.
pub const GENERATION_LABEL: &str = "ha-restore-generation";

/// Whether a data disk with `label` (its [`GENERATION_LABEL`], if any) was made by a restore newer than the
/// replica's state (`state_generation`, 0 when the state knows no `restore` block). Such a disk is what a restore
/// killed before its replica's state was saved left (its VM deleted to be rebuilt, say): it holds the snapshot
/// and, at most, what was written in the moments its member served alone, and no member the state records. It
/// counts as a failed attempt's disk ([`left_by_failed_attempt`] with no member recorded), not as a survivor.
pub fn disk_newer_than_state(label: Option<&str>, state_generation: i64) -> bool {
    label
        .and_then(|g| g.parse::<i64>().ok())
        .is_some_and(|g| g > state_generation)
}

/// What a replica's plan says when an earlier attempt at the restore did not finish for it and left its VM or its
/// data disk.
pub fn failed_attempt_note(name: &str) -> (String, String) {
    (
        format!("Replica {name} comes back from the cluster's snapshot, again"),
        format!(
            "An earlier apply of this restore did not finish for {name}: its state records no etcd member, and that attempt left a VM or a data disk under its name. A VM that still restores, and a data disk without its VM, hold at most the snapshot, which is still in Cloud Storage: they are deleted, and {name} is created again on a new data disk. If it is the first replica to apply, it restores the snapshot; otherwise it joins the restored cluster as a new member."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MemberView;

    #[test]
    fn only_a_disk_made_by_a_restore_newer_than_the_state_is_not_a_survivor() {
        for (label, state, newer) in [
            (Some("2"), 1, true),
            (Some("1"), 0, true),
            // The restore the state knows of made it: its member may be the one the state records.
            (Some("2"), 2, false),
            (Some("1"), 2, false),
            // A disk made by a join, or by a release before the label.
            (None, 0, false),
            (Some("x"), 0, false),
        ] {
            assert_eq!(
                disk_newer_than_state(label, state),
                newer,
                "{label:?} {state}"
            );
        }
    }

    fn snapshot(version: Option<&str>) -> SnapshotInfo {
        SnapshotInfo {
            url: "gs://b/c/etcd-20261125T101500Z-rev42.db".into(),
            size: 4096,
            revision: Some(42),
            etcd_version: version.map(str::to_string),
            taken_at: Some(1_795_000_000),
            sha256: None,
            secrets_keys: Vec::new(),
        }
    }

    fn world(vms: &[&str], answering: &[&str], unreachable: bool) -> Observed {
        Observed {
            instances: vms.iter().map(|s| s.to_string()).collect(),
            members: (!answering.is_empty()).then(|| {
                answering
                    .iter()
                    .enumerate()
                    .map(|(i, n)| MemberView {
                        name: n.to_string(),
                        id: i as u64 + 1,
                        is_learner: false,
                        healthy: false,
                        answered: true,
                    })
                    .collect()
            }),
            etcd_unreachable: unreachable.then(|| "connection refused".into()),
            ..Observed::default()
        }
    }

    #[test]
    fn a_restore_runs_only_on_a_cluster_with_no_vm_left_and_a_snapshot_it_can_read() {
        let s34 = snapshot(Some("3.4.13"));
        let s35 = snapshot(Some("3.5.1"));
        let by_hand = snapshot(None);
        /// (case, world, the cluster's etcd version, the snapshot, the refusal's summary if refused)
        type Case<'a> = (
            &'a str,
            Observed,
            &'a str,
            Option<&'a SnapshotInfo>,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "nothing left",
                world(&[], &[], false),
                "3.4",
                Some(&s34),
                None,
            ),
            (
                "a hand-made snapshot",
                world(&[], &[], false),
                "3.5",
                Some(&by_hand),
                None,
            ),
            (
                "an older minor",
                world(&[], &[], false),
                "3.5",
                Some(&s34),
                None,
            ),
            (
                "no snapshot",
                world(&[], &[], false),
                "3.4",
                None,
                Some("No snapshot to restore from"),
            ),
            (
                "a newer minor",
                world(&[], &[], false),
                "3.4",
                Some(&s35),
                Some("newer than the cluster's 3.4"),
            ),
            (
                "a member answers",
                world(&["a"], &["a"], false),
                "3.4",
                Some(&s34),
                Some("etcd members still run"),
            ),
            (
                "a VM is left",
                world(&["a"], &[], false),
                "3.4",
                Some(&s34),
                Some("Replica VMs of the cluster still exist"),
            ),
            (
                "membership unknown",
                world(&["a"], &[], true),
                "3.4",
                Some(&s34),
                Some("could not be read"),
            ),
        ];
        for (name, w, version, s, refused) in cases {
            let got = decide(&w, version, s, "gs://b/c/");
            match refused {
                None => assert_eq!(got, Ok(()), "{name}"),
                Some(summary) => {
                    let (s, _) = got.expect_err(name);
                    assert!(s.contains(summary), "{name}: {s}");
                }
            }
        }
    }

    #[test]
    fn only_a_real_sha256_or_none_is_taken_as_the_recorded_digest() {
        let snap = |sha256: Option<&str>| SnapshotInfo {
            url: "gs://b/s.db".into(),
            size: 1,
            revision: None,
            etcd_version: None,
            taken_at: None,
            sha256: sha256.map(String::from),
            secrets_keys: Vec::new(),
        };
        let real = "0123456789abcdef".repeat(4);
        assert_eq!(check_digest(&snap(None)), Ok(()));
        assert_eq!(check_digest(&snap(Some(&real))), Ok(()));
        for edited in [
            "",
            &real[..63],
            &format!("{real}0"),
            &real.to_uppercase(),
            &format!("{}; rm -rf /", &real[..54]),
        ] {
            let (summary, detail) = check_digest(&snap(Some(edited))).expect_err(edited);
            assert!(summary.contains("not a SHA-256"), "{summary}");
            assert!(
                detail.contains("gs://b/s.db") && detail.contains("restore.snapshot"),
                "{detail}"
            );
        }
    }

    /// A plain snapshot restores anywhere; one taken under keys only where every one of them is held.
    #[test]
    fn a_snapshot_taken_under_a_key_restores_only_where_the_key_is_held() {
        let snap = |keys: &[&str]| SnapshotInfo {
            secrets_keys: keys.iter().map(|k| k.to_string()).collect(),
            ..snapshot(None)
        };
        let held = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        for (taken, ours, ok) in [
            (&[][..], &[][..], true),
            (&[], &["ha-a"], true),
            (&["ha-a"], &["ha-a"], true),
            (&["ha-a"], &["ha-b", "ha-a"], true),
            (&["ha-b", "ha-a"], &["ha-a", "ha-b"], true),
            (&["ha-a"], &[], false),
            (&["ha-a"], &["ha-b"], false),
            (&["ha-b", "ha-a"], &["ha-b"], false),
        ] {
            let got = check_secrets_key(&snap(taken), &held(ours));
            assert_eq!(got.is_ok(), ok, "{taken:?} into {ours:?}: {got:?}");
            if let Err((_, detail)) = got {
                assert!(
                    detail.contains("ha-a") && detail.contains("secrets_encryption_key"),
                    "{detail}"
                );
            }
        }
        for (written, read) in [("ha-a", vec!["ha-a"]), ("ha-b,ha-a", vec!["ha-b", "ha-a"])] {
            let metadata =
                BTreeMap::from([(SECRETS_KEY_METADATA.to_string(), written.to_string())]);
            let got = SnapshotInfo::from_metadata("gs://b/s.db".into(), 1, &metadata);
            assert_eq!(got.secrets_keys, read);
        }
    }

    #[test]
    fn a_snapshot_must_fit_the_data_disk_with_its_wal_and_the_boot_disk() {
        let snap = |size: u64| SnapshotInfo {
            url: "gs://b/s.db".into(),
            size,
            revision: None,
            etcd_version: None,
            taken_at: None,
            sha256: None,
            secrets_keys: Vec::new(),
        };
        const GIB: u64 = 1 << 30;
        // (snapshot, data GB, boot GB, refused with)
        let cases: Vec<(u64, i64, i64, Option<&str>)> = vec![
            (GIB, 20, 20, None),
            (GIB - WAL_ROOM, 1, 20, None),
            (
                GIB - WAL_ROOM + 1,
                1,
                20,
                Some("at least 2 in the same change"),
            ),
            (8 * GIB, 8, 20, Some("`data_disk_size_gb` to at least 9")),
            (8 * GIB, 20, 8, Some("`boot_disk_size_gb` to at least 18")),
            (0, 0, 20, Some("a 0 GB data disk")),
        ];
        for (size, data, boot, refused) in cases {
            let got = room(&snap(size), data, boot);
            match refused {
                None => assert_eq!(got, Ok(()), "{size} {data} {boot}"),
                Some(part) => {
                    let (summary, detail) = got.expect_err("refused");
                    assert!(
                        summary.contains(part) || detail.contains(part),
                        "{size} {data} {boot}: {summary}: {detail}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_restoring_replica_is_built_twice_and_awaited_both_times() {
        assert_eq!(
            founding_steps(false),
            steps![
                ReplicaStep::RestoreFromSnapshot {
                    with_static_ip: false
                },
                ReplicaStep::AwaitMember,
                ReplicaStep::DeleteInstance,
                ReplicaStep::RebuildInstance,
                ReplicaStep::AwaitMember,
                ReplicaStep::AwaitApi,
                ReplicaStep::AwaitAdminBinding
            ]
        );
    }

    #[test]
    fn only_a_founding_join_restores() {
        let founding = steps![ReplicaStep::CreateFoundingInstance {
            with_static_ip: true,
        }];
        assert_eq!(join_steps(founding), (founding_steps(true), true));
        let joining = steps![ReplicaStep::AddLearner, ReplicaStep::CreateJoiningInstance];
        assert_eq!(join_steps(joining.clone()), (joining, false));
    }

    #[test]
    fn urls_name_a_bucket_and_an_object() {
        assert_eq!(parse_url("gs://b/p/o.db"), Ok(("b", "p/o.db")));
        assert!(parse_url("b/o").is_err());
        assert!(parse_url("gs://b").is_err());
        assert!(parse_url("gs://b/").is_err());
    }

    #[test]
    fn the_plan_names_the_snapshot_what_it_holds_and_what_is_lost() {
        let (summary, detail) = describe("prod", &snapshot(Some("3.4.13")), "3.5");
        assert!(summary.contains("gs://b/c/etcd-20261125T101500Z-rev42.db"));
        for part in [
            "4096 bytes",
            "revision 42",
            "etcd 3.4.13",
            "is lost",
            "moves etcd's revision on by 1000000000",
            "required revision has been compacted",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
        // An etcd that cannot bump says so, and how to get one that can.
        let (_, detail) = describe("prod", &snapshot(Some("3.4.13")), "3.4");
        for part in [
            "etcd 3.4 cannot move its revision on",
            "may miss changes",
            "etcd_version = \"3.5\"",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
    }

    #[test]
    fn a_new_clusters_plan_names_the_snapshot_it_starts_from_and_loses_nothing() {
        let (summary, detail) = describe_at_create("new", &snapshot(Some("3.5.24")), "3.5");
        assert_eq!(
            summary,
            "Cluster new: etcd will be restored from the snapshot gs://b/c/etcd-20261125T101500Z-rev42.db"
        );
        for part in [
            "4096 bytes",
            "revision 42",
            "instead of empty",
            "not touched",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
        // Nothing of a new cluster can be lost.
        assert!(!detail.contains("is lost"), "{detail}");
    }

    #[test]
    fn only_vms_still_carrying_the_restoring_build_are_a_failed_attempt() {
        let vms = [
            ("walk-a", Some(RESTORING_BUILD)),
            ("walk-b", Some("b8d1c0ffee")),
            ("walk-c", None),
            ("walk-d", Some(crate::recovery::RECOVERING_BUILD)),
            ("walk-e", Some(RESTORING_BUILD)),
        ];
        assert_eq!(failed_attempts(vms), vec!["walk-a", "walk-e"]);
        assert!(failed_attempts([]).is_empty());
        assert_eq!(
            clear_failed_attempt(),
            steps![ReplicaStep::DeleteInstance, ReplicaStep::DeleteDataDisk]
        );
    }

    #[test]
    fn what_a_replica_that_recorded_no_member_left_is_a_failed_attempt() {
        // (a VM the state records no instance of, a data disk without its VM, state records a member, left by a
        // failed attempt)
        let cases = [
            (false, true, false, true),
            (true, false, false, true),
            // A member that held data: refused at plan, never deleted.
            (false, true, true, false),
            (true, false, true, false),
            // Nothing left.
            (false, false, false, false),
            (false, false, true, false),
        ];
        for (vm, disk, member, left) in cases {
            assert_eq!(
                left_by_failed_attempt(vm, disk, member),
                left,
                "vm {vm}, disk {disk}, member recorded {member}"
            );
        }
    }
}
