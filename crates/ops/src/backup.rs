//! A backup before a change that touches etcd (`ClusterStep::TakeBackup`, put first by `domain::backup::before`): a
//! snapshot from a healthy member (a follower when there is one, so the leader keeps serving), checked as etcd's
//! restore would check it, uploaded with what it is, and the cluster's old snapshots pruned. Also the newest
//! snapshot's name, for the cluster's `last_backup`.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use ha_domain::backup::{self, Policy};
use ha_etcd::{EtcdTarget, Health};
use ha_settings::Settings;
use ha_storage::Bucket;

/// `steps` with a backup first when the cluster has a `backup` block and the steps touch etcd
/// (`domain::backup::before`).
pub fn backup_first(
    ctx: &ClusterCtx,
    steps: Vec<ha_domain::step::Step>,
    world: &ha_domain::topology::Observed,
    replica: &str,
    change: &str,
) -> Vec<ha_domain::step::Step> {
    if ctx.spec.backup.is_none() {
        return steps;
    }
    backup::before(steps, world, replica, change)
}

/// A snapshot in the bucket.
#[derive(Debug, Clone)]
pub struct Taken {
    /// `gs://bucket/object`.
    pub url: String,
    pub size: u64,
    pub revision: i64,
}

/// How many names (one per second from now) a snapshot may try before the upload gives up.
const NAME_TRIES: i64 = 10;

/// The longest a snapshot stream may take (a full 8 GiB database over a slow link), within the change's deadline.
const SNAPSHOT_LIMIT: Duration = Duration::from_secs(30 * 60);

/// Takes the backup the cluster's `backup` block asks for before `change`. A failure stops the change with a
/// sentence that names the bucket, unless the policy says to go on.
pub async fn take(
    ctx: &ClusterCtx,
    targets: &[EtcdTarget],
    change: &str,
    deadline: Instant,
) -> Result<Option<Taken>> {
    let Some(policy) = ctx.spec.backup.clone() else {
        return Ok(None);
    };
    let started = Instant::now();
    match snapshot_and_upload(ctx, &policy, targets, change, deadline).await {
        Ok(taken) => {
            tracing::info!(
                "backup before the {change}: {} ({} bytes, revision {}) in {:?}",
                taken.url,
                taken.size,
                taken.revision,
                started.elapsed()
            );
            Ok(Some(taken))
        }
        Err(e) if policy.stop_on_failure => Err(OpError::Refused(
            format!("The backup before the {change} failed, so the change did not start"),
            format!(
                "{}. The cluster's `backup` block asks for a checked etcd snapshot in {} before every change that touches etcd. Check that bucket {} exists and that the provider's credentials may create, list and delete objects in it (`roles/storage.objectAdmin` on the bucket), then apply again: the change starts where it stopped. To go on without a backup, set `backup.stop_on_failure = false`.",
                e.explain(),
                policy.location(&ctx.spec.name),
                policy.bucket
            ),
        )),
        Err(e) => {
            tracing::warn!(
                "the backup before the {change} failed and `backup.stop_on_failure` is false, so the change goes on without it: {}",
                e.explain()
            );
            Ok(None)
        }
    }
}

/// A healthy member to take the snapshot from: a follower when one is healthy, else the leader. With no healthy
/// voter (quorum lost: the backup before a recovery from the survivor), the voter that answers with the most
/// applied: etcd streams a snapshot from a member's own store without raft.
async fn source(ctx: &ClusterCtx, targets: &[EtcdTarget]) -> Result<EtcdTarget> {
    let health = ctx.etcd.health(targets).await;
    let leaderless = health
        .iter()
        .filter_map(|h| match &h.health {
            Health::Unhealthy { status, .. } if !status.is_learner && status.leader_id == 0 => {
                Some((h.target.clone(), status.raft_applied_index))
            }
            _ => None,
        })
        .max_by_key(|(_, applied)| *applied)
        .map(|(t, _)| t);
    let healthy: Vec<_> = health
        .iter()
        .filter_map(|h| match &h.health {
            Health::Healthy(s) if !s.is_learner => {
                Some((h.target.clone(), s.member_id == s.leader_id))
            }
            _ => None,
        })
        .collect();
    healthy
        .iter()
        .find(|(_, leads)| !leads)
        .or(healthy.first())
        .map(|(t, _)| t.clone())
        .or(leaderless)
        .ok_or_else(|| {
            OpError::Other("no healthy etcd member answered to take a snapshot from".into())
        })
}

async fn snapshot_and_upload(
    ctx: &ClusterCtx,
    policy: &Policy,
    targets: &[EtcdTarget],
    change: &str,
    deadline: Instant,
) -> Result<Taken> {
    let from = source(ctx, targets).await?;
    let secrets_key = ctx.secrets_keys().await?;
    let before = ctx.etcd.status(&from).await?;
    let limit = deadline
        .saturating_duration_since(Instant::now())
        .min(SNAPSHOT_LIMIT);
    let bytes = ctx.etcd.snapshot(&from, limit).await?;
    let after = ctx.etcd.status(&from).await?;
    backup::check_revisions(before.revision, after.revision)
        .map_err(|m| OpError::Other(format!("the snapshot from {from} was not kept: {m}")))?;
    let verified = backup::verify(&bytes)
        .map_err(|m| OpError::Other(format!("the snapshot from {from} was not kept: {m}")))?;

    let now = time::OffsetDateTime::now_utc();
    let cluster = &ctx.spec.name;
    let metadata: BTreeMap<String, String> = [
        ("ha-cluster", cluster.clone()),
        ("ha-member", format!("{:x}", before.member_id)),
        ("ha-member-name", from.server_name.clone()),
        ("ha-revision", before.revision.to_string()),
        ("ha-etcd-version", before.version.clone()),
        ("ha-sha256", verified.sha256.clone()),
        ("ha-taken-at", now.unix_timestamp().to_string()),
        ("ha-before", change.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    // Which key its Secrets need (`domain::restore::check_secrets_key`); a plain snapshot names none.
    // Every key the masters read, the written one first: during a change of key, Secrets may be under any.
    .chain(
        secrets_key
            .map(|keys| keys.names())
            .filter(|n| !n.is_empty())
            .map(|names| {
                (
                    ha_domain::restore::SECRETS_KEY_METADATA.to_string(),
                    names.join(","),
                )
            }),
    )
    .collect();

    let bucket = Bucket::connect(&ctx.settings, &policy.bucket).await?;
    let bytes = bytes::Bytes::from(bytes);
    // Two changes back to back (the joins of a restore) can back up the same revision within one second, which
    // names the same object: the later takes the next free second, so names stay unique and ordered.
    let mut taken_name = None;
    for later in 0..NAME_TRIES {
        let object = backup::object_name(
            &policy.prefix,
            cluster,
            now.unix_timestamp() + later,
            before.revision,
        );
        match bucket
            .put(
                &object,
                bytes.clone(),
                &metadata,
                policy.kms_key_name.as_deref(),
            )
            .await
        {
            Ok(stored) => {
                taken_name = Some((object, stored));
                break;
            }
            Err(ha_storage::Error::Exists { .. }) => {
                if let Some(own) = own_upload(&bucket, &object, &metadata).await? {
                    taken_name = Some((object, own));
                    break;
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    let Some((object, stored)) = taken_name else {
        return Err(OpError::Other(format!(
            "every name for a snapshot of revision {} in the {NAME_TRIES} seconds from {now} is taken in gs://{}",
            before.revision, policy.bucket
        )));
    };
    if stored != verified.size {
        return Err(OpError::Other(format!(
            "gs://{}/{object} holds {stored} bytes where {} were sent",
            policy.bucket, verified.size
        )));
    }
    prune(&bucket, policy, cluster).await;
    Ok(Taken {
        url: format!("gs://{}/{object}", policy.bucket),
        size: verified.size,
        revision: before.revision,
    })
}

/// The size of `object` when it is this upload's own (`backup::is_own_upload`): an attempt stored it and its
/// answer was lost, and the retry met it.
async fn own_upload(
    bucket: &Bucket,
    object: &str,
    metadata: &BTreeMap<String, String>,
) -> Result<Option<u64>> {
    let found = bucket.list(object).await?;
    Ok(found
        .into_iter()
        .find(|o| o.name == object && backup::is_own_upload(&o.metadata, metadata))
        .map(|o| o.size))
}

/// Deletes the cluster's snapshots beyond the newest `keep`. Best effort: the new snapshot is already safe, and
/// the next backup prunes what this one could not.
async fn prune(bucket: &Bucket, policy: &Policy, cluster: &str) {
    let prefix = backup::cluster_prefix(&policy.prefix, cluster);
    let names = match bucket.list(&prefix).await {
        Ok(list) => list.into_iter().map(|o| o.name).collect::<Vec<_>>(),
        Err(e) => {
            tracing::warn!("old snapshots were not pruned: {e}");
            return;
        }
    };
    for old in backup::to_prune(&names, &prefix, policy.keep) {
        match bucket.delete(&old).await {
            Ok(()) => tracing::info!("pruned gs://{}/{old}", bucket.name()),
            Err(e) => tracing::warn!("old snapshot not pruned: {e}"),
        }
    }
}

/// The newest snapshot of `cluster` in the policy's bucket, as `gs://bucket/object`.
pub async fn latest(settings: &Settings, policy: &Policy, cluster: &str) -> Result<Option<String>> {
    let bucket = Bucket::connect(settings, &policy.bucket).await?;
    let prefix = backup::cluster_prefix(&policy.prefix, cluster);
    let names: Vec<String> = bucket
        .list(&prefix)
        .await?
        .into_iter()
        .map(|o| o.name)
        .collect();
    Ok(backup::newest(&names, &prefix).map(|n| format!("gs://{}/{n}", policy.bucket)))
}
