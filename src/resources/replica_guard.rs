//! The quorum guard, run while planning a replica's create or destroy: one shared look at the cluster
//! (`ops::refresh::observe_shared`, the snapshot refresh already took) and `domain::guard`'s verdict, as a
//! diagnostic on the plan. When the cluster is not created yet or cannot be observed, plan stays silent on quorum
//! (or says it could not look) and apply decides from its own snapshot.

use tfplugin::diag::{AttributePath, Diagnostics};

use super::replica_model::ReplicaModel;
use crate::config::Settings;
use std::sync::Arc;

use ha_domain::guard::{Verdict, check_join, check_leave};
use ha_domain::protection::check_leaves;
use ha_domain::roll::{Build, plan_preflight, roll_warning};
use ha_domain::start_empty::{Evidence, check, founds};
use ha_domain::topology::Observed;
use ha_ops::observe::Snapshot;
use ha_ops::plan_leaves::Leave;
use ha_ops::refresh::observe_shared;
use ha_ops::{ClusterCtx, OpError};

/// The cluster's context when everything about it is known (it exists); `None` while it is still planned.
async fn context(settings: &Settings, r: &ReplicaModel) -> Option<Result<ClusterCtx, OpError>> {
    let spec = r.cluster.known()?.to_ops().ok()?;
    Some(ClusterCtx::new(settings, spec).await)
}

fn report(v: Verdict, diags: &mut Diagnostics) {
    match v {
        Verdict::Fine => {}
        Verdict::Warn((summary, detail)) => diags.warning(summary, detail),
        Verdict::Refuse((summary, detail)) => diags.error(summary, detail),
    }
}

/// The cluster's shared snapshot for a plan-time judgement; `None` when there is nothing to judge now: the cluster
/// is not created yet, or a change of it is under way (Terraform plans again during apply, while a sibling's change
/// runs in this process; or another apply, of this state or another, holds the cluster's lock), and apply judges
/// for itself under the lock. Standing aside for another process is said on the plan (`domain::lock`): a plan that
/// destroys a replica without a word would look judged.
async fn look(
    settings: &Settings,
    r: &ReplicaModel,
    diags: &mut Diagnostics,
) -> Option<Result<(String, Arc<Snapshot>), OpError>> {
    let ctx = match context(settings, r).await? {
        Ok(ctx) => ctx,
        Err(e) => return Some(Err(e)),
    };
    let replica = || match (r.name.known(), r.zone.known()) {
        (Some(name), _) if !name.is_empty() => name.clone(),
        (_, Some(zone)) => format!("the new replica in {zone}"),
        _ => "the new replica".to_string(),
    };
    if settings.read_only {
        let (summary, detail) = ha_domain::read_only::guard_not_run(&ctx.spec.name, &replica());
        diags.warning(summary, detail);
        return None;
    }
    if ha_ops::lock::busy(&ctx.spec.id) {
        return None;
    }
    if let Some(holder) = ha_ops::lock::holder_elsewhere(&ctx).await {
        let (summary, detail) =
            ha_domain::lock::plan_stood_aside(&ctx.spec.name, &replica(), &holder);
        diags.warning(summary, detail);
        return None;
    }
    Some(
        observe_shared(&ctx)
            .await
            .map(|snap| (ctx.spec.id.clone(), snap)),
    )
}

fn could_not_look(e: OpError, diags: &mut Diagnostics) {
    diags.warning(
        "Could not check etcd's quorum while planning",
        format!("{e}. Apply checks again before it changes membership."),
    );
}

async fn observe_and_judge(
    settings: &Settings,
    r: &ReplicaModel,
    diags: &mut Diagnostics,
    judge: impl FnOnce(&ha_domain::topology::Observed) -> Verdict,
) {
    match look(settings, r, diags).await {
        None => {}
        Some(Ok((_, snap))) => report(judge(&snap.observed), diags),
        Some(Err(e)) => could_not_look(e, diags),
    }
}

/// The plan's word on the backup a change of `r` takes first, when its cluster has a `backup` block
/// (`domain::backup::plan_note`).
fn backup_note(r: &ReplicaModel, change: &str, diags: &mut Diagnostics) {
    let Some(cluster) = r.cluster.known() else {
        return;
    };
    if let (Some(policy), Some(name)) = (cluster.backup_policy(), cluster.name.known()) {
        let (summary, detail) = ha_domain::backup::plan_note(&policy, name, change);
        diags.warning(summary, detail);
    }
}

fn has_voter(w: &Observed) -> bool {
    w.voters().next().is_some()
}

/// A replica to be created (or created again by a replacement).
pub async fn check_create(settings: &Settings, planned: &ReplicaModel, diags: &mut Diagnostics) {
    let mut joins_members = false;
    let mut notes = Vec::new();
    let mut founding = None;
    let joining = match (planned.name.known(), planned.zone.known()) {
        (Some(name), _) => name.clone(),
        (None, Some(zone)) => format!("the new replica in {zone}"),
        (None, None) => "the new replica".to_string(),
    };
    observe_and_judge(settings, planned, diags, |w| {
        joins_members = has_voter(w);
        notes = ha_domain::availability::join_notes(w, &joining);
        founding = founds(w).then(|| w.clone());
        check_join(w)
    })
    .await;
    let start_empty = planned.cluster.known().is_some_and(|c| c.starts_empty());
    if let Some(world) = founding
        && !start_empty
    {
        check_founding(settings, planned, &world, None, diags).await;
    }
    for (summary, detail) in notes {
        diags.warning(summary, detail);
    }
    if joins_members {
        // A new replica's name is often generated at apply: then it is the one joining in its zone.
        let change = match (planned.name.known(), planned.zone.known()) {
            (Some(name), _) => format!("join of replica {name}"),
            (None, Some(zone)) => format!("join of the new replica in {zone}"),
            (None, None) => "join of the new replica".to_string(),
        };
        backup_note(planned, &change, diags);
    }
}

/// A replica that the plan replaces (its VM is gone): Terraform shows only the diagnostics of the replacement's
/// first half, so the refusal a join gives when it would found an empty etcd is asked for here. Its state holding
/// an etcd member is evidence of data of its own (the one-replica cluster has no load balancer). A `restore`
/// block that says `source = "empty"` is honoured only when its generation is raised, which plans the replica's
/// rejoin instead of this replacement: a stale `"empty"` left in the configuration starts nothing empty.
pub async fn check_replace(settings: &Settings, prior: &ReplicaModel, diags: &mut Diagnostics) {
    let mut founding = None;
    observe_and_judge(settings, prior, diags, |w| {
        founding = founds(w).then(|| w.clone());
        Verdict::Fine
    })
    .await;
    let had_member = prior
        .etcd_member_id
        .known()
        .filter(|id| !id.is_empty())
        .and(prior.name.known())
        .cloned();
    if let Some(world) = founding {
        check_founding(settings, prior, &world, had_member.as_deref(), diags).await;
    }
}

/// Refuses a founding join where the cluster had data (`domain::start_empty`): the load balancer, the replica's
/// own state, or the newest snapshot in the backup location says so.
async fn check_founding(
    settings: &Settings,
    r: &ReplicaModel,
    world: &Observed,
    had_member: Option<&str>,
    diags: &mut Diagnostics,
) {
    let Some(Ok(ctx)) = context(settings, r).await else {
        return;
    };
    let newest = match ha_ops::restore::newest_snapshot(&ctx).await {
        Ok(newest) => newest,
        Err(e) => {
            diags.warning(
                "Could not list the cluster's snapshots while planning",
                format!(
                    "{e}. The apply lists them again before it founds etcd, and refuses if it cannot."
                ),
            );
            None
        }
    };
    let evidence = Evidence {
        had_member,
        newest_snapshot: newest.as_deref(),
        create_restore: ctx.spec.restore_snapshot.is_some(),
    };
    if let Some((summary, detail)) = check(world, &ctx.spec.name, &evidence) {
        diags.error(summary, detail);
    }
}

/// A replica to be destroyed.
pub async fn check_destroy(settings: &Settings, prior: &ReplicaModel, diags: &mut Diagnostics) {
    check_leave_of_plan(settings, prior, Leave::Removed, diags).await;
}

/// A replica the plan replaces because its name or zone changed, or it moves to another cluster (which, for the
/// cluster it leaves, is a removal): the destroy half is a leave like any other.
pub async fn check_moved(
    settings: &Settings,
    prior: &ReplicaModel,
    planned: &ReplicaModel,
    diags: &mut Diagnostics,
) {
    let other_cluster = match (prior.cluster.known(), planned.cluster.known()) {
        (Some(old), Some(new)) => old.id != new.id,
        _ => false,
    };
    let how = if other_cluster {
        Leave::Removed
    } else {
        Leave::Replaced
    };
    check_leave_of_plan(settings, prior, how, diags).await;
}

/// A leave judged with every other leave of the same plan (`ha_ops::plan_leaves`): the quorum guard for this
/// member, deletion protection for all of them together (`domain::protection::check_leaves`), and the plan's
/// fault-tolerance notes, said once for the whole set.
async fn check_leave_of_plan(
    settings: &Settings,
    prior: &ReplicaModel,
    how: Leave,
    diags: &mut Diagnostics,
) {
    let Some(name) = prior.name.known().filter(|n| !n.is_empty()).cloned() else {
        return;
    };
    let protected = prior
        .cluster
        .known()
        .is_none_or(|c| c.deletion_protection.known() != Some(&false));
    let (cluster_id, snap) = match look(settings, prior, diags).await {
        None => return,
        Some(Err(e)) => return could_not_look(e, diags),
        Some(Ok(found)) => found,
    };
    let leaving = ha_ops::plan_leaves::record(&cluster_id, &name, how).await;
    let w = &snap.observed;
    let verdict = match check_leave(w, &name) {
        Verdict::Fine => check_leaves(w, &leaving, protected),
        other => other,
    };
    report(verdict, diags);
    if ha_ops::plan_leaves::first_to_tell(&cluster_id, &leaving) {
        for (summary, detail) in ha_domain::availability::leave_notes(w, &leaving) {
            diags.warning(summary, detail);
        }
    }
    // Only a member's removal takes a backup (`domain::backup::before`).
    let leaves_member = has_voter(w)
        && w.members
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m.name == name));
    if leaves_member && how == Leave::Removed {
        backup_note(prior, &format!("removal of replica {name}"), diags);
    }
}

/// A replica whose `master_settings` change: the plan says how it will be rolled and what the user will see, and
/// refuses, naming the member, when the roll could not start now (`domain::roll::plan_preflight`).
pub async fn check_roll(
    settings: &Settings,
    prior: &ReplicaModel,
    planned: &ReplicaModel,
    renewing_certificates: bool,
    diags: &mut Diagnostics,
) {
    let (Some(old), Some(new)) = (
        prior.master_settings.known(),
        planned.master_settings.known(),
    ) else {
        return;
    };
    let moving = super::replica_model::moves_subnetwork(prior, planned);
    if old == new && !renewing_certificates && !moving {
        return;
    }
    let Some(name) = prior.name.known().filter(|n| !n.is_empty()).cloned() else {
        return;
    };
    let mut changes = Build::from_shown(new).changes_from(&Build::from_shown(old));
    if moving {
        changes.push(ha_domain::roll::SUBNETWORK.into());
        changes.sort();
    }
    if renewing_certificates {
        changes.push("certificates".into());
    }
    // Only a machine type alone rolls without building the VM again, which needs new certificates.
    if changes.iter().any(|c| c != "machine_type")
        && let Some(cluster) = super::replica_model::imported_without_ca_keys(planned)
    {
        diags.attr_error(
            AttributePath::attr("cluster"),
            format!(
                "Replica {name} cannot be rolled: cluster {cluster} was imported without its CA private keys"
            ),
            format!(
                "Its roll ({} changes) builds the VM again, and a rebuilt master needs certificates signed by \
                 the cluster's CAs, whose private keys lived only in the state the cluster was created with \
                 (masters never hold them). Keep the replica's settings as they are (only `machine_type` \
                 changes in place), or restore the state that holds the keys. Nothing was changed.",
                changes.join(", ")
            ),
        );
        return;
    }
    let mut replicas = None;
    let mut resuming = Vec::new();
    observe_and_judge(settings, prior, diags, |w| {
        replicas = Some(
            w.instances
                .len()
                .max(w.members.as_ref().map_or(0, Vec::len)),
        );
        if moving && let Some(refusal) = ha_domain::roll::move_refusal(w, &name) {
            return Verdict::Refuse(refusal);
        }
        match plan_preflight(w, &name) {
            Ok(r) => {
                resuming = r;
                Verdict::Fine
            }
            Err(refusal) => Verdict::Refuse(refusal),
        }
    })
    .await;
    // Without a look (the cluster is busy or could not be observed), assume company: apply checks again.
    let (mut summary, mut detail) = roll_warning(&name, &changes, replicas.unwrap_or(2));
    if renewing_certificates {
        let expires = prior
            .certificates_expire_at
            .known()
            .cloned()
            .unwrap_or_default();
        summary = format!("{summary} (its certificates expire at {expires} and are renewed)");
        detail.push_str(
            " The rebuilt VM gets new leaf certificates from the cluster's CAs, naming the same IPs, so \
             clients and the other members keep trusting it.",
        );
    }
    if !resuming.is_empty() {
        detail.push_str(&format!(
            " The roll of {} was interrupted (stopped and out of the load balancer): this apply resumes it, \
             and {name} rolls once that member is healthy again.",
            resuming.join(", ")
        ));
    }
    diags.warning(summary, detail);
    backup_note(planned, &format!("roll of replica {name}"), diags);
}
