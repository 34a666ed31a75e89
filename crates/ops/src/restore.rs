//! A restore from a Cloud Storage snapshot (`domain::restore`): find the snapshot the cluster's `restore` block
//! asks for and read what it is, judge at plan whether the restore may run, and give a founding join what its
//! VM needs to fetch it. The restore itself is a join's `ReplicaStep::RestoreFromSnapshot`, run by `ops::execute`.

use tokio::time::Instant;

use super::change::{Change, Decision, run_change};
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::Replica;
use super::observe::{Snapshot, data_disk_exists, observe};
use super::shared::zone_of;
use ha_domain::backup;
use ha_domain::restore::{self, SnapshotChoice, SnapshotInfo};
use ha_domain::roll::BUILD_LABEL;
use ha_master::SnapshotRestore;
use ha_storage::Bucket;

/// Where the newest snapshot is looked for, for sentences.
fn looked_in(ctx: &ClusterCtx, choice: &SnapshotChoice) -> String {
    looked_in_for(ctx.spec.backup.as_ref(), &ctx.spec.name, choice)
}

fn looked_in_for(
    backup: Option<&backup::Policy>,
    cluster: &str,
    choice: &SnapshotChoice,
) -> String {
    match (choice, backup) {
        (SnapshotChoice::Url(url), _) => url.clone(),
        (SnapshotChoice::Newest, Some(p)) => p.location(cluster),
        (SnapshotChoice::Newest, None) => {
            "the cluster's backup bucket (it has no `backup` block)".into()
        }
    }
}

/// The snapshot `choice` names, with its size and metadata; `None` when there is none.
pub async fn resolve(ctx: &ClusterCtx, choice: &SnapshotChoice) -> Result<Option<SnapshotInfo>> {
    resolve_for(
        &ctx.settings,
        ctx.spec.backup.as_ref(),
        &ctx.spec.name,
        choice,
    )
    .await
}

/// [`resolve`] for cluster `cluster` with backup policy `backup`, before a context exists (a cluster's create).
async fn resolve_for(
    settings: &ha_settings::Settings,
    backup: Option<&backup::Policy>,
    cluster: &str,
    choice: &SnapshotChoice,
) -> Result<Option<SnapshotInfo>> {
    // The bucket, and either the object or the prefix whose newest snapshot is wanted.
    let (bucket, object, newest_under) = match (choice, backup) {
        (SnapshotChoice::Url(url), _) => {
            let (bucket, object) = restore::parse_url(url).map_err(|m| {
                OpError::Refused("restore.snapshot is not a Cloud Storage object".into(), m)
            })?;
            (bucket.to_string(), object.to_string(), None)
        }
        (SnapshotChoice::Newest, Some(p)) => {
            let prefix = backup::cluster_prefix(&p.prefix, cluster);
            (p.bucket.clone(), prefix.clone(), Some(prefix))
        }
        (SnapshotChoice::Newest, None) => return Ok(None),
    };
    let listed = Bucket::connect(settings, &bucket)
        .await?
        .list(&object)
        .await?;
    let wanted = match &newest_under {
        Some(prefix) => {
            let names: Vec<String> = listed.iter().map(|o| o.name.clone()).collect();
            backup::newest(&names, prefix).map(str::to_string)
        }
        None => Some(object),
    };
    Ok(listed
        .into_iter()
        .find(|o| Some(&o.name) == wanted.as_ref())
        .map(|o| {
            SnapshotInfo::from_metadata(format!("gs://{bucket}/{}", o.name), o.size, &o.metadata)
        }))
}

/// At the plan of a cluster's create with a `restore` block naming a snapshot: the snapshot its first replica will
/// restore, checked as a restore of an existing cluster is (found, fits the disks, its etcd minor, its digest).
/// Nothing of the cluster exists yet, so there is nothing to observe: the new cluster has no member to lose.
pub async fn plan_new(
    settings: &ha_settings::Settings,
    spec: &NewCluster<'_>,
    choice: &SnapshotChoice,
) -> Result<SnapshotInfo> {
    let found = resolve_for(settings, spec.backup, spec.name, choice).await?;
    // Snapshots of an earlier cluster of this name in its own location: the first join would refuse to restore.
    let own = resolve_for(settings, spec.backup, spec.name, &SnapshotChoice::Newest).await?;
    if let Some((summary, detail)) = ha_domain::start_empty::check_new_cluster(
        spec.name,
        &looked_in_for(spec.backup, spec.name, &SnapshotChoice::Newest),
        own.as_ref().map(|s| s.url.as_str()),
    ) {
        return Err(OpError::Refused(summary, detail));
    }
    restore::decide(
        &ha_domain::topology::Observed::default(),
        spec.etcd_version,
        found.as_ref(),
        &looked_in_for(spec.backup, spec.name, choice),
    )
    .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    let found = found.ok_or_else(|| OpError::Other("no snapshot".into()))?;
    restore::room(&found, spec.data_disk_size_gb, spec.boot_disk_size_gb)
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    restore::check_digest(&found).map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    let mut ours = Vec::new();
    for reference in spec
        .secrets_encryption_key
        .into_iter()
        .chain(spec.secrets_decryption_keys.iter().map(String::as_str))
    {
        ours.push(
            super::secrets_encryption::read(settings, reference)
                .await?
                .name(),
        );
    }
    restore::check_secrets_key(&found, &ours)
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    Ok(found)
}

/// What [`plan_new`] needs of a cluster that does not exist yet.
pub struct NewCluster<'a> {
    pub name: &'a str,
    pub backup: Option<&'a backup::Policy>,
    pub etcd_version: &'a str,
    pub data_disk_size_gb: i64,
    pub boot_disk_size_gb: i64,
    /// Its `secrets_encryption_key`, when it has one.
    pub secrets_encryption_key: Option<&'a str>,
    /// Its `secrets_decryption_keys`.
    pub secrets_decryption_keys: &'a [String],
}

/// The newest snapshot of the cluster in its backup location (`gs://…`), `None` without a `backup` block or
/// without snapshots: evidence that the cluster had data (`domain::start_empty`).
pub async fn newest_snapshot(ctx: &ClusterCtx) -> Result<Option<String>> {
    Ok(resolve(ctx, &SnapshotChoice::Newest).await?.map(|s| s.url))
}

/// At a founding join: refused (`OpError::Refused`) when the cluster had data and its `restore` block does not
/// say to start empty. The backup location is listed only for a founding join, which is rare; a listing that
/// fails refuses too, since it cannot tell.
pub async fn check_founding(ctx: &ClusterCtx, world: &ha_domain::topology::Observed) -> Result<()> {
    use ha_domain::start_empty::{Evidence, check, founds};
    if ctx.spec.start_empty || !founds(world) {
        return Ok(());
    }
    let newest = newest_snapshot(ctx).await.map_err(|e| {
        OpError::Refused(
            format!("Cannot tell whether cluster {} had data", ctx.spec.name),
            format!(
                "This join would found a new etcd, and the cluster's backup location is listed first so that it does not start empty over a cluster that had data, but the listing failed: {e}. Fix access to the bucket and apply again; to start empty on purpose, raise `restore.generation` with `source = \"{}\"`.",
                ha_domain::start_empty::EMPTY
            ),
        )
    })?;
    let evidence = Evidence {
        newest_snapshot: newest.as_deref(),
        create_restore: ctx.spec.restore_snapshot.is_some(),
        ..Evidence::default()
    };
    match check(world, &ctx.spec.name, &evidence) {
        Some((summary, detail)) => Err(OpError::Refused(summary, detail)),
        None => Ok(()),
    }
}

/// At plan, a raised `restore.generation` with `source = "empty"`: what the apply does, or why it may not
/// (`domain::start_empty::decide`).
pub async fn plan_start_empty(ctx: &ClusterCtx, deadline: Instant) -> Result<(String, String)> {
    let snap = observe(ctx, &[], deadline).await?;
    let newest = newest_snapshot(ctx).await?;
    ha_domain::start_empty::decide(&snap.observed, &ctx.spec.name, newest.as_deref())
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))
}

/// At plan: the snapshot the restore would use, or why no restore may run (`domain::restore::decide`).
pub async fn plan(
    ctx: &ClusterCtx,
    choice: &SnapshotChoice,
    deadline: Instant,
) -> Result<SnapshotInfo> {
    let snap = observe(ctx, &[], deadline).await?;
    let found = resolve(ctx, choice).await?;
    restore::decide(
        &snap.observed,
        &ctx.spec.master.etcd_version,
        found.as_ref(),
        &looked_in(ctx, choice),
    )
    .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    let found = found.ok_or_else(|| OpError::Other("no snapshot".into()))?;
    restore::room(
        &found,
        ctx.spec.master.data_disk_size_gb,
        ctx.spec.master.boot_disk_size_gb,
    )
    .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    restore::check_digest(&found).map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    check_secrets_key(ctx, &found).await?;
    Ok(found)
}

/// [`restore::check_secrets_key`] with the key this cluster's masters are given.
async fn check_secrets_key(ctx: &ClusterCtx, snapshot: &SnapshotInfo) -> Result<()> {
    let ours = ctx
        .secrets_keys()
        .await?
        .map(|keys| keys.names())
        .unwrap_or_default();
    restore::check_secrets_key(snapshot, &ours)
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))
}

/// At apply, for the replica that restores: the snapshot, as its VM fetches it.
pub async fn source(ctx: &ClusterCtx, choice: &SnapshotChoice) -> Result<SnapshotRestore> {
    let found = resolve(ctx, choice).await?;
    let snapshot = found.ok_or_else(|| {
        OpError::Refused(
            "No snapshot to restore from".into(),
            format!(
                "No snapshot of this cluster is in {}. Point `restore.snapshot` at one (`gs://<bucket>/<object>`).",
                looked_in(ctx, choice)
            ),
        )
    })?;
    // Checked again here: the object's metadata may have changed since the plan.
    restore::check_digest(&snapshot)
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    check_secrets_key(ctx, &snapshot).await?;
    tracing::info!(
        url = %snapshot.url,
        size = snapshot.size,
        revision = ?snapshot.revision,
        sha256 = ?snapshot.sha256,
        "restoring etcd from a snapshot"
    );
    Ok(SnapshotRestore {
        url: snapshot.url,
        storage_endpoint: ctx
            .settings
            .storage_endpoint
            .as_deref()
            .filter(|e| !e.trim().is_empty())
            .map(|_| format!("{}/storage/v1/", ha_storage::origin(&ctx.settings))),
        bump_revision: ha_domain::restore::revision_bump(&ctx.spec.master.etcd_version),
        sha256: snapshot.sha256,
    })
}

/// Before a restoring join, under the cluster's lock: what failed attempts at this restore left is deleted, so the
/// restore runs again instead of stopping at an etcd that never answers or a data disk it would not restore over.
/// That is every VM still carrying the restoring build, with its data disk (`domain::restore::failed_attempts`),
/// and the joiner's own data disk without a VM when its state records no member
/// (`domain::restore::left_by_failed_attempt`). `member_recorded` is what the replica's state says.
pub async fn clear_failed_attempts(
    ctx: &ClusterCtx,
    me: &str,
    my_zone: &str,
    member_recorded: bool,
    deadline: Instant,
) -> Result<()> {
    let snap = observe(ctx, &[], deadline).await?;
    let builds = snap.instances.values().map(|i| {
        (
            i.name.as_str(),
            i.labels.get(BUILD_LABEL).map(String::as_str),
        )
    });
    let mut left: Vec<(String, String)> = restore::failed_attempts(builds)
        .into_iter()
        .map(|name| (zone_of(&snap.instances[&name]), name))
        .collect();
    if !snap.instances.contains_key(me)
        && restore::left_by_failed_attempt(
            false,
            data_disk_exists(ctx, my_zone, me, deadline).await?,
            member_recorded,
        )
    {
        left.push((my_zone.to_string(), me.to_string()));
    }
    for (zone, name) in left {
        tracing::info!(
            "{me}: deleting the VM and data disk of {name}, left by an attempt at the restore that did not finish"
        );
        run_change(ctx, ClearFailedAttempt { name, zone }, deadline).await?;
    }
    Ok(())
}

/// Deleting what a failed restore attempt left of replica `name` as a [`Change`]: the cluster read as it is (a
/// restore that failed has no etcd to repair reachability for), the steps `domain::restore::clear_failed_attempt`.
struct ClearFailedAttempt {
    name: String,
    zone: String,
}

impl Change for ClearFailedAttempt {
    type Kept = ();

    fn what(&self) -> String {
        format!("removal of {}, left by a failed restore", self.name)
    }

    async fn observe(&mut self, ctx: &ClusterCtx, deadline: Instant) -> Result<Snapshot> {
        observe(ctx, &[], deadline).await
    }

    async fn decide(
        &mut self,
        _ctx: &ClusterCtx,
        _snap: &Snapshot,
        _deadline: Instant,
    ) -> Result<(Decision, ())> {
        let who = Replica {
            name: self.name.clone(),
            zone: self.zone.clone(),
            labels: Default::default(),
            // Deleting creates nothing, so the replica's address is never asked for.
            internal_ip: std::net::Ipv4Addr::UNSPECIFIED,
        };
        Ok((Decision::new(who, restore::clear_failed_attempt()), ()))
    }
}
