//! How every change to one replica runs, written once: a join, a leave, a roll, a recovery and a mend differ only in
//! how they read the cluster and what they decide from the reading ([`Change`]); [`run_change`] does the rest in one
//! order: observe, decide, etcd's removal preflight for each member the steps remove
//! (`ha_domain::step::removed_members`), then the steps, by the one executor (`ops::execute`). A change that fails
//! after it added an etcd learner takes the learner back out, as a step too.
//!
//! Repairs of the cluster's shape (`repair::repair_shape`) and the cluster's own objects (`cluster`,
//! `execute::foundation`) are about no replica: they run `ClusterStep`s and `FoundationStep`s, which the types keep
//! apart from a replica's steps, through the executor's other two runs.

use std::time::Duration;

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Progress, Replica, Run};
use super::observe::{Snapshot, observe};
use super::repair::restore_reachability;
use ha_domain::step::{ClusterStep, Step, removed_members};
use ha_gce::InstanceInfo;
use ha_master::SnapshotRestore;
use ha_pki::ReplicaCerts;

/// One kind of change to a replica: how it reads the cluster and what it decides from what it read. The caller of
/// [`run_change`] holds the cluster's lock.
pub(crate) trait Change {
    /// What the change keeps from its decision for its caller (a roll's etcd member, the recovery it ran).
    type Kept;

    /// The change in a sentence's words, for the log: `join of replica prod-a`.
    fn what(&self) -> String;

    /// The cluster as the change decides from it. Most changes read it with every replica reachable
    /// ([`observe_reachable`]).
    async fn observe(&mut self, ctx: &ClusterCtx, deadline: Instant) -> Result<Snapshot> {
        observe_reachable(ctx, deadline).await
    }

    /// The steps, from `domain`, with the change's own checks (a refusal is an `OpError::Refused`).
    async fn decide(
        &mut self,
        ctx: &ClusterCtx,
        snap: &Snapshot,
        deadline: Instant,
    ) -> Result<(Decision, Self::Kept)>;
}

/// What a change decided: the replica it is about, its steps in order, and what its run starts knowing beyond the
/// snapshot.
pub(crate) struct Decision {
    pub replica: Replica,
    pub steps: Vec<Step>,
    /// The replica's certificates, issued before the run (a join); a rebuild issues its own.
    pub certs: Option<ReplicaCerts>,
    /// The snapshot a `RestoreFromSnapshot` step restores (`ops::restore` resolves it while deciding).
    pub restore: Option<SnapshotRestore>,
    /// The replica's VM when the snapshot does not show it (a VM whose labels were edited by hand).
    pub instance: Option<InstanceInfo>,
    /// The replica's etcd member when the snapshot lists none because no member answers (a sole replica whose VM
    /// is down): the one the state records, which a rebuild on the data disk brings back.
    pub member_id: Option<u64>,
}

impl Decision {
    /// `steps` about `replica`, with nothing known beyond the snapshot.
    pub fn new(replica: Replica, steps: Vec<Step>) -> Decision {
        Decision {
            replica,
            steps,
            certs: None,
            restore: None,
            instance: None,
            member_id: None,
        }
    }
}

/// Runs `change`: observe, decide, preflight, execute. Returns what the steps learned and what the change kept.
pub(crate) async fn run_change<C: Change>(
    ctx: &ClusterCtx,
    mut change: C,
    deadline: Instant,
) -> Result<(Progress, C::Kept)> {
    let snap = change.observe(ctx, deadline).await?;
    let (decision, kept) = change.decide(ctx, &snap, deadline).await?;
    let Decision {
        replica,
        steps,
        certs,
        restore,
        instance,
        member_id,
    } = decision;
    tracing::debug!(change = %change.what(), steps = ?steps, "steps");
    if !steps.is_empty() {
        tracing::info!(
            "{}",
            ha_domain::step_words::plan_line(&change.what(), &steps)
        );
    }
    // Every member the steps remove gets etcd's preflight before anything of the change runs.
    preflight_removals(ctx, &snap, &steps, &replica.name).await?;

    let mut run = Run::for_replica(ctx, &snap, &replica, deadline);
    run.progress.certs = certs;
    run.progress.restore = restore;
    if instance.is_some() {
        run.progress.instance = instance;
    }
    if run.progress.member_id.is_none() {
        run.progress.member_id = member_id;
    }
    if let Err(e) = run.execute(&steps).await {
        if let Some(id) = run.progress.added_learner {
            remove_failed_learner(&mut run, &change.what(), &replica.name, id, &e).await;
        }
        return Err(e);
    }
    Ok((run.into_progress(), kept))
}

/// How long undoing a failed change's learner may take: the change has already failed, so its deadline may be spent.
const LEARNER_CLEANUP: Duration = Duration::from_secs(30);

/// Best effort: the change's error is what the user reads; a learner that stays is removed by the next join
/// (`ClusterStep::RemoveStaleMember`, the same step) or by this replica's replacement.
async fn remove_failed_learner(
    run: &mut super::execute::ReplicaRun<'_>,
    what: &str,
    name: &str,
    id: u64,
    cause: &OpError,
) {
    tracing::warn!(change = %what, error = %cause, "the change failed after its etcd learner was added; removing the learner");
    run.deadline = Instant::now() + LEARNER_CLEANUP;
    let step: Step = ClusterStep::RemoveStaleMember {
        name: name.to_string(),
        id,
    }
    .into();
    match tokio::time::timeout(LEARNER_CLEANUP, run.execute(std::slice::from_ref(&step))).await {
        Ok(Ok(())) => tracing::info!("{name} learner {id:x} removed after the failed {what}"),
        Ok(Err(e)) => {
            tracing::warn!(replica = %name, error = %e, "could not remove the failed change's learner; the next apply does")
        }
        Err(_) => tracing::warn!(
            replica = %name,
            "removing the failed change's learner took longer than {LEARNER_CLEANUP:?}; the next apply does"
        ),
    }
}

/// The cluster as it is once replica VMs that lost their external IP to an interrupted IP move have an ephemeral
/// one again, so that every etcd member can be asked (`domain::shape::reachability_repairs`): read twice only when
/// that repair changed something. The caller holds the cluster's lock.
pub async fn observe_reachable(ctx: &ClusterCtx, deadline: Instant) -> Result<Snapshot> {
    let snap = observe(ctx, &[], deadline).await?;
    if restore_reachability(ctx, &snap, deadline).await? {
        return observe(ctx, &[], deadline).await;
    }
    Ok(snap)
}

/// etcd's removal preflight, before anything of the change runs, for every member `steps` remove, all at once (each
/// would otherwise count the others as leftovers): the members that stay are the replicas other than `replica`,
/// agree on the list and carry no alarm. The members removed are exempt: replacing a vanished or crashed VM
/// removes exactly such a dead member. Nothing to check when the steps remove none.
async fn preflight_removals(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    steps: &[Step],
    replica: &str,
) -> Result<()> {
    let removing = removed_members(steps);
    if removing.is_empty() {
        return Ok(());
    }
    let staying: Vec<String> = snap
        .instances
        .keys()
        .filter(|n| n.as_str() != replica)
        .cloned()
        .collect();
    ctx.etcd
        .preflight_removal(&removing, &staying, &snap.targets)
        .await?;
    Ok(())
}
