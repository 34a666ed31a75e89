//! Backups of etcd to Cloud Storage before a risky change, as kops' etcd-manager backs up before every change:
//! which changes take one, what a snapshot must look like before it is uploaded, what its object is called,
//! which old ones are pruned, and what the plan says. `ops::backup` takes, checks, uploads and prunes.
//!
//! A change takes a backup first when its steps touch etcd's members or their data (add, remove, restart,
//! rebuild or delete a member's VM or disk) and the cluster has a member to take it from. The backup is a step,
//! [`ClusterStep::TakeBackup`], put at the head of the list, so it runs before anything moves and a failed one stops the
//! change there (unless the cluster's `backup.stop_on_failure` is false).

use super::Problem;
use super::step::{ClusterStep, ReplicaStep, Step};
use super::topology::Observed;

/// The cluster's `backup` block, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub bucket: String,
    /// Where in the bucket, before the cluster's name: empty, or ending in `/`.
    pub prefix: String,
    /// How many snapshots of the cluster to keep; older ones are deleted after each upload.
    pub keep: u32,
    /// Whether a failed backup stops the change (the default) or is only logged.
    pub stop_on_failure: bool,
    /// The Cloud KMS key the snapshot objects are encrypted with (customer-managed encryption), as
    /// `projects/P/locations/L/keyRings/R/cryptoKeys/K`; none for the bucket's default encryption.
    pub kms_key_name: Option<String>,
}

pub const DEFAULT_KEEP: u32 = 10;
pub const MAX_KEEP: u32 = 1000;

impl Policy {
    /// `gs://bucket/prefix/cluster/`: where this cluster's snapshots are.
    pub fn location(&self, cluster: &str) -> String {
        format!(
            "gs://{}/{}",
            self.bucket,
            cluster_prefix(&self.prefix, cluster)
        )
    }
}

/// The prefix in the bucket under which a cluster's snapshots are: `<prefix>/<cluster>/`.
pub fn cluster_prefix(prefix: &str, cluster: &str) -> String {
    let p = prefix.trim_matches('/');
    if p.is_empty() {
        format!("{cluster}/")
    } else {
        format!("{p}/{cluster}/")
    }
}

/// `<prefix>/<cluster>/etcd-<YYYYMMDDTHHMMSSZ>-rev<revision>.db`: names sort by the time they were taken, so the
/// newest is the last in a listing, and the revision is readable without downloading anything.
pub fn object_name(prefix: &str, cluster: &str, unix_seconds: i64, revision: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(unix_seconds)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{}etcd-{:04}{:02}{:02}T{:02}{:02}{:02}Z-rev{revision}.db",
        cluster_prefix(prefix, cluster),
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Whether `name` is one of this provider's snapshots of the cluster (anything else under the prefix is the
/// user's, and never pruned).
pub fn is_snapshot(name: &str, cluster_prefix: &str) -> bool {
    let Some(rest) = name.strip_prefix(cluster_prefix) else {
        return false;
    };
    let Some(core) = rest
        .strip_prefix("etcd-")
        .and_then(|r| r.strip_suffix(".db"))
    else {
        return false;
    };
    let Some((stamp, rev)) = core.split_once("-rev") else {
        return false;
    };
    stamp.len() == 16
        && stamp.as_bytes()[8] == b'T'
        && stamp.ends_with('Z')
        && stamp[..8].bytes().all(|b| b.is_ascii_digit())
        && stamp[9..15].bytes().all(|b| b.is_ascii_digit())
        && !rev.is_empty()
        && rev.bytes().all(|b| b.is_ascii_digit())
}

/// The newest of the cluster's snapshots among `names`.
pub fn newest<'a>(names: &'a [String], cluster_prefix: &str) -> Option<&'a str> {
    names
        .iter()
        .filter(|n| is_snapshot(n, cluster_prefix))
        .max()
        .map(String::as_str)
}

/// The revision a snapshot's name records (`…-rev<revision>.db`).
fn revision_of(name: &str) -> Option<i64> {
    name.strip_suffix(".db")?
        .rsplit_once("-rev")?
        .1
        .parse()
        .ok()
}

/// The cluster's snapshots to delete so that the newest `keep` remain, less any that ends a history: a snapshot
/// whose next one (in time) has a lower revision. etcd's revision only grows, so a drop means the cluster was
/// founded again (a new, empty etcd starts near revision 1) or restored to an older state; the snapshot before
/// the drop is the last of the data that was there, the one a restore of that data wants, and pruning keeps it
/// however many snapshots of the new history follow.
pub fn to_prune(names: &[String], cluster_prefix: &str, keep: u32) -> Vec<String> {
    let mut ours: Vec<&String> = names
        .iter()
        .filter(|n| is_snapshot(n, cluster_prefix))
        .collect();
    ours.sort();
    let ends_history = |i: usize| {
        matches!(
            (ours.get(i).and_then(|n| revision_of(n)), ours.get(i + 1).and_then(|n| revision_of(n))),
            (Some(this), Some(next)) if next < this
        )
    };
    let excess = ours.len().saturating_sub(keep.max(1) as usize);
    (0..excess)
        .filter(|&i| !ends_history(i))
        .map(|i| ours[i].clone())
        .collect()
}

/// Whether the object found under a name this upload chose (`found`, its metadata) is this upload's own: every
/// key the upload wrote has the value it wrote. An upload whose first attempt was stored but not answered meets
/// its own object when it is tried again (the name is written only if new); taking it for another's would upload
/// the same snapshot again under the next name. The metadata names the member, the revision, the SHA-256 and the
/// second it was taken, so another upload cannot match unless it holds the same snapshot.
pub fn is_own_upload(
    found: &std::collections::BTreeMap<String, String>,
    sent: &std::collections::BTreeMap<String, String>,
) -> bool {
    !sent.is_empty() && sent.iter().all(|(k, v)| found.get(k) == Some(v))
}

/// What a checked snapshot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub size: u64,
    /// Hex SHA-256 of the database (what the snapshot's own trailer says, checked).
    pub sha256: String,
}

/// bbolt's meta page magic, little-endian at byte 16 of the file's first page (after the 16-byte page header).
const BOLT_MAGIC: u32 = 0xED0C_DAED;
/// Two meta pages, a freelist and a root at bbolt's smallest page size.
const MIN_DB: usize = 4 * 512;

/// Checks a snapshot as etcd's own restore does before trusting it: etcd streams the database followed by the
/// SHA-256 of everything before it, and the database is a bbolt file (whole pages, a meta page first).
pub fn verify(snapshot: &[u8]) -> Result<Verified, String> {
    const HASH: usize = 32;
    if snapshot.len() < MIN_DB + HASH {
        return Err(format!(
            "the snapshot is {} bytes, too small to be an etcd database",
            snapshot.len()
        ));
    }
    let (db, trailer) = snapshot.split_at(snapshot.len() - HASH);
    if db.len() % 512 != 0 {
        return Err(format!(
            "the snapshot is {} bytes, which is not whole database pages and a SHA-256: it was cut short",
            snapshot.len()
        ));
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, db);
    if digest.as_ref() != trailer {
        return Err(
            "the snapshot's SHA-256 does not match its content: it was corrupted in transit".into(),
        );
    }
    let magic = u32::from_le_bytes([db[16], db[17], db[18], db[19]]);
    if magic != BOLT_MAGIC {
        return Err("the snapshot does not start with an etcd (bbolt) database".into());
    }
    Ok(Verified {
        size: snapshot.len() as u64,
        sha256: digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// A revision read after the snapshot below the one read before it means another logical cluster answered (the
/// member restarted from other data between the two reads): the snapshot cannot be labelled with either.
pub fn check_revisions(before: i64, after: i64) -> Result<(), String> {
    if before <= 0 {
        return Err(format!(
            "the member reported revision {before}: etcd has written nothing it could restore"
        ));
    }
    if after < before {
        return Err(format!(
            "etcd's revision went back from {before} to {after} while the snapshot was taken: the member restarted from other data"
        ));
    }
    Ok(())
}

/// Steps that change etcd's membership.
fn changes_membership(step: &Step) -> bool {
    matches!(
        step,
        Step::Cluster(ClusterStep::RemoveStaleMember { .. })
            | Step::Replica(ReplicaStep::AddLearner)
            | Step::Replica(ReplicaStep::RemoveMember { .. })
    )
}

/// Steps that stop, rebuild or delete the replica's VM or data disk: they touch etcd when the replica is a
/// member.
fn touches_the_replica(step: &Step) -> bool {
    matches!(
        step,
        Step::Replica(ReplicaStep::StopInstance)
            | Step::Replica(ReplicaStep::SetMachineType)
            | Step::Replica(ReplicaStep::RebuildInstance)
            | Step::Replica(ReplicaStep::GrowDataDisk)
            | Step::Replica(ReplicaStep::DeleteInstance)
            | Step::Replica(ReplicaStep::DeleteDataDisk)
    )
}

/// `steps` with a backup first when they touch etcd (a membership change, or a restart, rebuild or delete of
/// `replica` while it is a member) and a healthy voting member is there to take it from. A replica that never
/// became a member (a join that failed before its learner was added) leaves without one. `change` names the
/// change in the snapshot's metadata ("roll of replica m-b").
pub fn before(steps: Vec<Step>, world: &Observed, replica: &str, change: &str) -> Vec<Step> {
    let members = world.members.as_deref().unwrap_or_default();
    let has_voter = members.iter().any(|m| !m.is_learner && m.healthy);
    let is_member = members.iter().any(|m| m.name == replica);
    let touches = steps
        .iter()
        .any(|s| changes_membership(s) || (is_member && touches_the_replica(s)));
    if !has_voter || !touches {
        return steps;
    }
    let mut out = Vec::with_capacity(steps.len() + 1);
    out.push(
        ClusterStep::TakeBackup {
            change: change.to_string(),
        }
        .into(),
    );
    out.extend(steps);
    out
}

/// What the plan says about the backup a change will take.
pub fn plan_note(policy: &Policy, cluster: &str, change: &str) -> Problem {
    let on_failure = if policy.stop_on_failure {
        "If the snapshot cannot be taken, checked or uploaded, the apply stops before anything changes."
    } else {
        "If it fails, the apply goes on without it (`backup.stop_on_failure = false`)."
    };
    (
        format!("A backup of etcd is taken before the {change}"),
        format!(
            "Before the {change}, the provider takes an etcd snapshot from a healthy member (a follower when there is one), checks its size, SHA-256 and revision, and uploads it to {}, keeping the newest {}. {on_failure}",
            policy.location(cluster),
            policy.keep
        ),
    )
}

/// Cloud Storage's bucket naming rules, checked at validate.
pub fn check_bucket(name: &str) -> Result<(), Problem> {
    let bad = |why: &str| {
        Err((
            format!("Invalid bucket name {name:?}"),
            format!(
                "{why} Give the bucket's name alone (no `gs://`, no path: put a path in `prefix`), as Cloud Storage names buckets: 3-63 lowercase letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit."
            ),
        ))
    };
    if name.starts_with("gs://") || name.contains('/') {
        return bad("It is a URL or a path, not a bucket name.");
    }
    let dotted = name.contains('.');
    let max = if dotted { 222 } else { 63 };
    if name.len() < 3 || name.len() > max {
        return bad(&format!("It has {} characters.", name.len()));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
    {
        return bad(
            "It contains a character other than lowercase letters, digits, `-`, `_` and `.`.",
        );
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(name.as_bytes()[0]) || !alnum(name.as_bytes()[name.len() - 1]) {
        return bad("It does not start and end with a letter or digit.");
    }
    if dotted && name.split('.').any(|c| c.is_empty() || c.len() > 63) {
        return bad("A dot-separated part is empty or longer than 63 characters.");
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return bad("It is an IP address.");
    }
    if name.starts_with("goog") || name.contains("google") {
        return bad("Names starting with `goog` or containing `google` are reserved.");
    }
    Ok(())
}

/// The `prefix`: a path inside the bucket, without `..` or empty parts, so the cluster's snapshots land where it
/// says.
pub fn check_prefix(prefix: &str) -> Result<(), Problem> {
    let p = prefix.trim_matches('/');
    if p.is_empty() {
        return Ok(());
    }
    let bad = p.len() > 512
        || p.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        || p.chars()
            .any(|c| c.is_control() || c == '#' || c == '[' || c == ']' || c == '*' || c == '?');
    if bad {
        return Err((
            format!("Invalid backup prefix {prefix:?}"),
            "Write a path inside the bucket like `clusters/prod`: parts separated by `/`, none empty, `.` or `..`, no `#`, `[`, `]`, `*`, `?` or control characters, at most 512 characters.".into(),
        ));
    }
    Ok(())
}

/// A Cloud KMS key as Cloud Storage takes it for an object (`kmsKeyName`): the key itself, not one of its
/// versions, whose location the bucket's must match (Cloud Storage checks that, and the service agent's grant).
pub fn check_kms_key_name(name: &str) -> Result<(), Problem> {
    let parts: Vec<&str> = name.split('/').collect();
    let id = |s: &str, max: usize| {
        !s.is_empty()
            && s.len() <= max
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    let ok = matches!(
        parts.as_slice(),
        ["projects", project, "locations", location, "keyRings", ring, "cryptoKeys", key]
            if !project.is_empty()
                && project.len() <= 100
                && project.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' || c == ':')
                && !location.is_empty()
                && location.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && id(ring, 63)
                && id(key, 63)
    );
    if ok {
        return Ok(());
    }
    let hint = if name.contains("/cryptoKeyVersions/") {
        " Name the key, not one of its versions: Cloud Storage encrypts with the key's primary version."
    } else {
        ""
    };
    Err((
        format!("Invalid backup kms_key_name {name:?}"),
        format!(
            "Write the Cloud KMS key's resource name, `projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>`, in the bucket's location.{hint}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps;

    #[test]
    fn a_kms_key_name_is_a_key_not_a_version_nor_a_ring() {
        for good in [
            "projects/my-project/locations/europe-west1/keyRings/backups/cryptoKeys/etcd",
            "projects/example.com:proj/locations/global/keyRings/r_1/cryptoKeys/k-2",
        ] {
            assert_eq!(check_kms_key_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "etcd",
            "projects/p/locations/l/keyRings/r",
            "projects/p/locations/l/keyRings/r/cryptoKeys/",
            "projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1",
            "projects/p/locations/l/keyRings/r/cryptoKeys/k/",
            "projects//locations/l/keyRings/r/cryptoKeys/k",
            "projects/p/locations/l/keyrings/r/cryptoKeys/k",
            "projects/p/locations/l/keyRings/r r/cryptoKeys/k",
        ] {
            let e = check_kms_key_name(bad).expect_err(bad);
            assert!(e.1.contains("cryptoKeys/<key>"), "{bad}: {e:?}");
        }
        let e = check_kms_key_name(
            "projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1",
        )
        .unwrap_err();
        assert!(e.1.contains("not one of its versions"), "{e:?}");
    }
    use crate::topology::MemberView;

    fn bolt(pages: usize) -> Vec<u8> {
        let mut db = vec![0u8; pages * 512];
        db[16..20].copy_from_slice(&BOLT_MAGIC.to_le_bytes());
        db[100] = 7;
        let digest = ring::digest::digest(&ring::digest::SHA256, &db);
        db.extend_from_slice(digest.as_ref());
        db
    }

    #[test]
    fn an_upload_takes_an_object_for_its_own_only_when_every_key_it_wrote_matches() {
        let map = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let sent = map(&[
            ("ha-sha256", "ab"),
            ("ha-taken-at", "100"),
            ("ha-member", "1"),
        ]);
        for (found, own) in [
            (sent.clone(), true),
            // The service adds keys of its own.
            (
                map(&[
                    ("ha-sha256", "ab"),
                    ("ha-taken-at", "100"),
                    ("ha-member", "1"),
                    ("x-goog", "z"),
                ]),
                true,
            ),
            (
                map(&[
                    ("ha-sha256", "cd"),
                    ("ha-taken-at", "100"),
                    ("ha-member", "1"),
                ]),
                false,
            ),
            (
                map(&[
                    ("ha-sha256", "ab"),
                    ("ha-taken-at", "101"),
                    ("ha-member", "1"),
                ]),
                false,
            ),
            (map(&[("ha-sha256", "ab"), ("ha-taken-at", "100")]), false),
            (map(&[]), false),
        ] {
            assert_eq!(is_own_upload(&found, &sent), own, "{found:?}");
        }
        assert!(
            !is_own_upload(&map(&[]), &map(&[])),
            "nothing sent matches nothing"
        );
    }

    #[test]
    fn a_snapshot_passes_only_whole_with_its_hash_and_bbolt_magic() {
        let good = bolt(8);
        let v = verify(&good).unwrap();
        assert_eq!(v.size, 8 * 512 + 32);
        assert_eq!(v.sha256.len(), 64);

        let mut corrupted = good.clone();
        corrupted[200] ^= 1;
        assert!(verify(&corrupted).unwrap_err().contains("SHA-256"));

        let cut = &good[..good.len() - 100];
        assert!(verify(cut).unwrap_err().contains("cut short"));

        assert!(verify(&good[..64]).unwrap_err().contains("too small"));

        let mut not_bolt = vec![0u8; 8 * 512];
        let d = ring::digest::digest(&ring::digest::SHA256, &not_bolt);
        not_bolt.extend_from_slice(d.as_ref());
        assert!(verify(&not_bolt).unwrap_err().contains("bbolt"));
    }

    #[test]
    fn revisions_must_be_positive_and_never_go_back() {
        assert!(check_revisions(10, 12).is_ok());
        assert!(check_revisions(10, 10).is_ok());
        assert!(check_revisions(0, 0).unwrap_err().contains("nothing"));
        assert!(check_revisions(10, 3).unwrap_err().contains("went back"));
    }

    #[test]
    fn names_sort_by_time_and_only_ours_are_pruned() {
        let p = cluster_prefix("backups/", "prod");
        assert_eq!(p, "backups/prod/");
        assert_eq!(cluster_prefix("", "prod"), "prod/");
        assert_eq!(cluster_prefix("/a/b/", "prod"), "a/b/prod/");
        let a = object_name("backups", "prod", 1_764_000_000, 12);
        let b = object_name("backups", "prod", 1_764_000_060, 9);
        assert_eq!(a, "backups/prod/etcd-20251124T160000Z-rev12.db");
        assert!(a < b, "a later snapshot sorts later whatever its revision");
        let names: Vec<String> = vec![
            b.clone(),
            a.clone(),
            "backups/prod/notes.txt".into(),
            "backups/prod-2/etcd-20251124T160000Z-rev1.db".into(),
            object_name("backups", "prod", 1_763_000_000, 5),
        ];
        assert!(is_snapshot(&a, &p));
        assert!(!is_snapshot("backups/prod/notes.txt", &p));
        assert!(!is_snapshot(
            "backups/prod-2/etcd-20251124T160000Z-rev1.db",
            &p
        ));
        assert!(!is_snapshot(
            "backups/prod/etcd-2025112XT160000Z-rev1.db",
            &p
        ));
        assert_eq!(newest(&names, &p), Some(b.as_str()));
        assert_eq!(
            to_prune(&names, &p, 2),
            vec![object_name("backups", "prod", 1_763_000_000, 5)]
        );
        assert_eq!(to_prune(&names, &p, 3), Vec::<String>::new());
        // keep = 0 is refused at validate; here it still keeps the newest, and `a`, the last before the revision
        // went back from 12 to 9.
        assert_eq!(
            to_prune(&names, &p, 0),
            vec![object_name("backups", "prod", 1_763_000_000, 5)]
        );
    }

    /// A cluster founded again (or restored to an older state) starts a new history at a lower revision: pruning
    /// keeps the newest snapshot of every earlier history, whatever `keep` says, and counts only the rest.
    #[test]
    fn pruning_keeps_the_last_snapshot_before_each_drop_of_the_revision() {
        let p = cluster_prefix("b", "prod");
        let at = |minute: i64, rev: i64| object_name("b", "prod", 1_764_000_000 + minute * 60, rev);
        let pruned = |revs: &[(i64, i64)], keep: u32| -> Vec<String> {
            let names: Vec<String> = revs.iter().map(|&(m, r)| at(m, r)).collect();
            to_prune(&names, &p, keep)
        };
        // (what, snapshots as (minute, revision), keep, the ones pruned)
        type Case<'a> = (&'a str, &'a [(i64, i64)], u32, &'a [(i64, i64)]);
        let cases: &[Case] = &[
            (
                "one history: the oldest go",
                &[(0, 10), (1, 20), (2, 30)],
                1,
                &[(0, 10), (1, 20)],
            ),
            (
                "founded again: the last of the old data stays",
                &[(0, 100), (1, 900), (2, 3), (3, 8), (4, 15)],
                2,
                &[(0, 100), (2, 3)],
            ),
            (
                "founded twice: the last of each earlier history stays",
                &[(0, 500), (1, 4), (2, 9), (3, 2), (4, 6)],
                1,
                &[(1, 4), (3, 2)],
            ),
            (
                "a rewind by a restore is a drop too",
                &[(0, 50), (1, 80), (2, 60)],
                1,
                &[(0, 50)],
            ),
            ("within keep, nothing goes", &[(0, 900), (1, 3)], 2, &[]),
        ];
        for (what, revs, keep, want) in cases {
            let want: Vec<String> = want.iter().map(|&(m, r)| at(m, r)).collect();
            assert_eq!(pruned(revs, *keep), want, "{what}");
        }
    }

    fn world(members: &[(&str, bool, bool)]) -> Observed {
        Observed {
            members: Some(
                members
                    .iter()
                    .enumerate()
                    .map(|(i, (name, learner, healthy))| MemberView {
                        id: i as u64 + 1,
                        name: name.to_string(),
                        is_learner: *learner,
                        healthy: *healthy,
                        answered: *healthy,
                    })
                    .collect(),
            ),
            ..Observed::default()
        }
    }

    #[test]
    fn a_backup_comes_first_when_the_steps_touch_a_member_of_a_cluster_with_data() {
        let three = world(&[("a", false, true), ("b", false, true)]);
        let roll = steps![
            ReplicaStep::RemoveFromPool,
            ReplicaStep::MoveLeadership,
            ReplicaStep::DeleteInstance,
            ReplicaStep::RebuildInstance
        ];
        let with = before(roll.clone(), &three, "b", "roll of replica b");
        assert_eq!(
            with[0],
            Step::Cluster(ClusterStep::TakeBackup {
                change: "roll of replica b".into()
            })
        );
        assert_eq!(&with[1..], &roll[..]);

        for (why, steps, w) in [
            (
                "a repair of the load balancer moves no member",
                steps![ClusterStep::CreateHealthCheck, ReplicaStep::AddToPool],
                three.clone(),
            ),
            (
                "the founding replica has nothing to back up",
                steps![ReplicaStep::CreateFoundingInstance {
                    with_static_ip: true,
                }],
                Observed::default(),
            ),
            (
                "only a learner answers",
                steps![ReplicaStep::AddLearner],
                world(&[("a", true, true)]),
            ),
            (
                "no voter is healthy",
                steps![ReplicaStep::AddLearner],
                world(&[("a", false, false)]),
            ),
            ("nothing to do", vec![], three.clone()),
            (
                "a replica that never became a member leaves without one",
                steps![
                    ReplicaStep::DeleteInstance,
                    ReplicaStep::DeleteDataDisk,
                    ReplicaStep::ReleaseInternalAddress
                ],
                three.clone(),
            ),
        ] {
            assert_eq!(before(steps.clone(), &w, "c", "x"), steps, "{why}");
        }
        for step in [
            Step::Replica(ReplicaStep::AddLearner),
            Step::Replica(ReplicaStep::RemoveMember { id: 1 }),
            Step::Cluster(ClusterStep::RemoveStaleMember {
                name: "c".into(),
                id: 3,
            }),
        ] {
            assert_eq!(
                before(vec![step.clone()], &three, "c", "x").len(),
                2,
                "{step:?}"
            );
        }
        for step in [
            Step::Replica(ReplicaStep::StopInstance),
            Step::Replica(ReplicaStep::SetMachineType),
            Step::Replica(ReplicaStep::RebuildInstance),
            Step::Replica(ReplicaStep::GrowDataDisk),
            Step::Replica(ReplicaStep::DeleteInstance),
            Step::Replica(ReplicaStep::DeleteDataDisk),
        ] {
            assert_eq!(
                before(vec![step.clone()], &three, "b", "x").len(),
                2,
                "{step:?} of a member"
            );
        }
    }

    #[test]
    fn bucket_names_follow_cloud_storages_rules() {
        for ok in ["my-backups", "a_b", "abc", "backups.example.com", "0ab"] {
            assert!(check_bucket(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("gs://my-backups", "URL"),
            ("my-backups/prod", "path"),
            ("ab", "2 characters"),
            ("My-Backups", "character"),
            ("-abc", "start and end"),
            ("abc-", "start and end"),
            ("a..b", "empty"),
            ("192.168.0.1", "IP address"),
            ("googbackups", "reserved"),
            ("my-google-backups", "reserved"),
        ] {
            let (summary, detail) = check_bucket(bad).unwrap_err();
            assert!(summary.contains(bad), "{summary}");
            assert!(detail.contains(why), "{bad}: {detail}");
        }
        assert!(check_bucket(&"a".repeat(64)).is_err());
    }

    #[test]
    fn prefixes_are_plain_paths() {
        for ok in ["", "/", "clusters/prod", "clusters/prod/", "x"] {
            assert!(check_prefix(ok).is_ok(), "{ok}");
        }
        for bad in ["a//b", "a/../b", "./a", "a*", "a\nb"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_plan_note_names_where_and_what_happens_on_failure() {
        let mut p = Policy {
            bucket: "bk".into(),
            prefix: "c/".into(),
            keep: 4,
            stop_on_failure: true,
            kms_key_name: None,
        };
        let (summary, detail) = plan_note(&p, "prod", "roll of replica prod-b");
        assert_eq!(
            summary,
            "A backup of etcd is taken before the roll of replica prod-b"
        );
        assert!(detail.contains("gs://bk/c/prod/"), "{detail}");
        assert!(detail.contains("newest 4"), "{detail}");
        assert!(detail.contains("stops before anything changes"), "{detail}");
        p.stop_on_failure = false;
        assert!(plan_note(&p, "prod", "x").1.contains("goes on without it"));
    }
}
