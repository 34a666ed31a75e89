//! Applying `ha_master_replica`: joins and leaves through `ops`, under the cluster's lock so replicas applied in
//! parallel (siblings in one apply, or replicas of other states applied by other processes) change membership one
//! at a time.

use ha_domain::replica_drift::{MemberSeen, VmSeen, member_seen, vanished_vm};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tfplugin::diag::Diagnostics;
use tfplugin_framework::Val;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cancel::{report_interrupted, unless_stopped};
use super::replica_model::{
    ReplicaModel, VM_DELETED, cluster_recovers, record_certificates, record_metadata,
};
use super::timeouts::{Op, deadline};
use crate::config::Settings;
use ha_domain::ids;
use ha_domain::labels::is_provider_label;
use ha_domain::metadata::{metadata_drift, must_rebuild};
use ha_domain::roll::{Build, DATA_DISK_SIZE};
use ha_domain::topology::shape_warnings;
use ha_ops::join::{JoinRequest, Joined, join};
use ha_ops::leave::leave;
use ha_ops::lock::{ClusterLock, lock_cluster};
use ha_ops::mend::{MendRequest, mend_replica};
use ha_ops::observe::{InstanceInfo, Snapshot, observe};
use ha_ops::refresh::observe_shared;
use ha_ops::roll::{RollRequest, roll_in_turn};
use ha_ops::shared::zone_of;
#[cfg(test)]
use ha_ops::shared::{CLUSTER_LABEL, JOINING_LABEL};
use ha_ops::{ClusterCtx, OpError};

const CREATE_TIMEOUT: Duration = Duration::from_secs(1200);
const DELETE_TIMEOUT: Duration = Duration::from_secs(1200);

/// `<cluster>-<three letters>`, as kube-up names replicas.
fn default_name(cluster: &str) -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    let mut n = h.finish();
    let suffix: String = (0..3)
        .map(|_| {
            let c = (b'a' + (n % 26) as u8) as char;
            n /= 26;
            c
        })
        .collect();
    format!("{cluster}-{suffix}")
}

async fn context(
    settings: &Settings,
    r: &ReplicaModel,
    diags: &mut Diagnostics,
) -> Option<ClusterCtx> {
    let Some(cluster) = r.cluster.known() else {
        diags.error(
            "The replica's cluster is not known",
            "Set `cluster = ha_master_cluster.<name>.spec`.",
        );
        return None;
    };
    let built = match cluster.to_ops() {
        Ok(spec) => ClusterCtx::new(settings, spec).await,
        Err(e) => Err(e),
    };
    match built {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            diags.error(
                "Could not prepare the replica's cluster",
                super::advice::with_advice(&e),
            );
            None
        }
    }
}

/// Whether the cluster's keys' secret, which the replica's `cluster` input names, is gone or holds other keys
/// (`ops::cluster_keys::fill` refuses it): the replica's refresh then keeps its state as it was and warns, so the
/// plan goes on and the cluster's update (which Terraform runs before its replicas') writes the secret back.
/// Failing here would fail every plan, and with it the repair.
async fn keys_secret_gone(
    settings: &Settings,
    s: &ReplicaModel,
    name: &str,
    diags: &mut Diagnostics,
) -> bool {
    let Some(Ok(mut spec)) = s.cluster.known().map(|c| c.to_ops()) else {
        return false;
    };
    let Err(OpError::Refused(summary, detail)) =
        ha_ops::cluster_keys::fill(settings, &mut spec).await
    else {
        return false;
    };
    diags.warning(
        format!("Replica {name} was not refreshed. {summary}"),
        format!("{detail} The replica's state is kept as it was until then."),
    );
    true
}

fn report(diags: &mut Diagnostics, what: &str, name: &str, e: OpError) {
    match e {
        OpError::Refused(summary, detail) | OpError::NotYet(summary, detail) => {
            diags.error(summary, detail)
        }
        other => diags.error(
            format!("Could not {what} replica {name}"),
            super::advice::with_advice(&other),
        ),
    }
}

/// Fills the computed attributes from what exists. Unknowns that remain after a failed join become empty, so
/// the partial state can be saved (Terraform then replaces it, and the delete cleans up what was made).
fn fill(
    mut p: ReplicaModel,
    ctx: &ClusterCtx,
    name: &str,
    zone: &str,
    j: Option<&Joined>,
) -> ReplicaModel {
    let spec = &ctx.spec;
    p.name = Val::Known(name.to_string());
    p.zone = Val::Known(zone.to_string());
    p.id = Val::Known(ids::replica_id(&spec.project, zone, name));
    p.cluster_id = Val::Known(spec.id.clone());
    let instance = j.and_then(|j| j.instance.as_ref());
    p.instance_id = Val::Known(instance.map(|i| i.id.to_string()).unwrap_or_default());
    p.self_link = Val::Known(instance.map(|i| i.self_link.clone()).unwrap_or_default());
    p.internal_ip = Val::Known(j.map(|j| j.internal_ip.to_string()).unwrap_or_default());
    let external = instance
        .and_then(|i| i.external_ip.clone())
        .unwrap_or_default();
    p.holds_static_ip = Val::Known(external == spec.external_ip);
    p.external_ip = Val::Known(external);
    p.status = Val::Known(instance.map(|i| i.status.clone()).unwrap_or_default());
    p.etcd_member_id = Val::Known(
        j.and_then(|j| j.member_id)
            .map(|id| format!("{id:x}"))
            .unwrap_or_default(),
    );
    let cert = |f: fn(&Joined) -> &ha_pki::CertKey| j.map(|j| f(j).clone()).unwrap_or_default();
    let api = cert(|j| &j.certs.api_server);
    let peer = cert(|j| &j.certs.etcd_peer);
    let server = cert(|j| &j.certs.etcd_server);
    record_certificates(&mut p, [&api.cert_pem, &peer.cert_pem, &server.cert_pem]);
    // What the VM was made with is what refresh compares its metadata with from now on.
    record_metadata(&mut p, instance.into_iter().flat_map(|i| &i.metadata));
    p.drift = Val::Known(Vec::new());
    p.master_settings = Val::Known(ctx.spec.master.build().shown());
    p
}

pub async fn create(
    settings: &Settings,
    stop: &CancellationToken,
    p: ReplicaModel,
    diags: &mut Diagnostics,
) -> Option<ReplicaModel> {
    let ctx = context(settings, &p, diags).await?;
    let until = deadline(&p.timeouts, Op::Create, CREATE_TIMEOUT);
    // A cluster created with `restore { source = "snapshot" }`: the replica that finds no member of a new cluster
    // restores the snapshot instead of founding an empty etcd (`JoinRequest::restore_at_create`); a replica that
    // finds members joins them as any other.
    let restore = ctx.spec.restore_snapshot.clone();
    join_as_new_member(&ctx, stop, restore, None, p, until, diags).await
}

/// The replica joins etcd as a new member (a learner first): its create, or its rejoin (`prior` is then its state)
/// after the cluster's recovery dropped its member.
async fn join_as_new_member(
    ctx: &ClusterCtx,
    stop: &CancellationToken,
    restore: Option<ha_domain::restore::SnapshotChoice>,
    prior: Option<&ReplicaModel>,
    p: ReplicaModel,
    until: Instant,
    diags: &mut Diagnostics,
) -> Option<ReplicaModel> {
    let name = p
        .name
        .known()
        .cloned()
        .unwrap_or_else(|| default_name(&ctx.spec.name));
    let zone = p
        .zone
        .known()
        .cloned()
        .unwrap_or_else(|| ctx.spec.zone.clone());
    // Nothing is made before the lock is held: stopped while waiting, or given up waiting, there is no state to save.
    // For a rejoin (an update) no state keeps the prior one (`framework`), whose `cluster` still has the old
    // restore generation, so the next plan shows the rejoin again.
    let lock = match unless_stopped(
        stop,
        lock_cluster(ctx, &format!("create replica {name}"), until),
    )
    .await
    {
        Some(Ok(lock)) => lock,
        Some(Err(e)) => {
            report(diags, "create", &name, e);
            return None;
        }
        None => {
            report_interrupted(diags, &format!("Creating replica {name}"));
            return None;
        }
    };
    // The timeout bounded the wait; the work gets the whole of it again (`ClusterLock::after_wait`).
    let until = lock.after_wait(until);
    let req = JoinRequest {
        name: name.clone(),
        zone: zone.clone(),
        labels: p.labels.known().cloned().unwrap_or_default(),
        member_recorded: prior
            .and_then(|s| s.etcd_member_id.known())
            .is_some_and(|id| !id.is_empty()),
        restore_at_create: prior.is_none() && restore.is_some(),
        restore,
    };
    let joined = unless_stopped(stop, join(ctx, &req, until)).await;
    if let Some(Ok(_)) = &joined {
        unless_stopped(stop, warn_about_shape(ctx, &lock, until, diags)).await;
    }
    // Released before the answer goes back, whatever it is: the client ends the provider soon after, and a lock
    // left behind makes the next plan stand aside instead of judging (`replica_guard::look`).
    lock.release().await;
    match joined {
        Some(Ok(j)) => Some(fill(p, ctx, &name, &zone, Some(&j))),
        Some(Err(e)) => {
            report(diags, "create", &name, e);
            // Save what may exist (the reserved IP, perhaps a VM or a learner) so the next apply cleans it up.
            Some(unfinished(p, prior, ctx, &req))
        }
        None => {
            // The join stopped mid-way; its name is saved, so the next apply finds and removes what it made.
            report_interrupted(diags, &format!("Creating replica {name}"));
            Some(unfinished(p, prior, ctx, &req))
        }
    }
}

/// The state a join that failed or was stopped leaves: its name and zone, so the next apply finds what it made. A
/// restore keeps the replica's `cluster` from before it, with the old restore generation: the next plan shows the
/// restore again, and its apply clears what this attempt left (`ops::restore::clear_failed_attempts`) instead of
/// finding the generation spent.
fn unfinished(
    p: ReplicaModel,
    prior: Option<&ReplicaModel>,
    ctx: &ClusterCtx,
    req: &JoinRequest,
) -> ReplicaModel {
    let mut saved = fill(p, ctx, &req.name, &req.zone, None);
    if let (Some(_), Some(prior)) = (&req.restore, prior) {
        saved.cluster = prior.cluster.clone();
    }
    saved
}

/// After the last membership change of an apply, warns about a shape that is worse than it looks (two replicas, or
/// all in one zone). Best effort: a failed look says nothing.
async fn warn_about_shape(
    ctx: &ClusterCtx,
    lock: &ClusterLock,
    until: Instant,
    diags: &mut Diagnostics,
) {
    if lock.others_waiting() {
        return;
    }
    let Ok(snap) = observe(ctx, &[], until).await else {
        return;
    };
    let zones: BTreeSet<String> = snap.instances.values().map(zone_of).collect();
    for (summary, detail) in shape_warnings(snap.instances.len(), zones.len()) {
        diags.warning(format!("Cluster {}: {summary}", ctx.spec.name), detail);
    }
}

/// Refresh, from the snapshot every read of this refresh shares: the VM is the replica. Without it the replica is
/// kept with an empty `instance_id` (the plan replaces it). With it, refresh records what moved: the VM's status,
/// its external IP, the labels it carries beyond the cluster's, and an empty `etcd_member_id` when etcd answers
/// without this replica's member. The plan turns each into its repair.
pub async fn read(
    settings: &Settings,
    s: ReplicaModel,
    diags: &mut Diagnostics,
) -> Option<ReplicaModel> {
    let (Some(name), Some(zone)) = (s.name.known().cloned(), s.zone.known().cloned()) else {
        return Some(s);
    };
    if name.is_empty() {
        return Some(s);
    }
    // Just imported: the cluster comes from configuration at the next plan, and import has read the VM already.
    if s.cluster.is_null() {
        return Some(s);
    }
    let mut s = s;
    if let Val::Known(spec) = &mut s.cluster {
        spec.fill_from_older_state();
    }
    if !settings.read_only && keys_secret_gone(settings, &s, &name, diags).await {
        return Some(s);
    }
    let ctx = context(settings, &s, diags).await?;
    let until = Instant::now() + Duration::from_secs(60);
    let snap = match observe_shared(&ctx).await {
        Ok(snap) => snap,
        Err(e) => {
            diags.error(
                format!("Could not read replica {name}"),
                super::advice::with_advice(&e),
            );
            return Some(s);
        }
    };
    let unread = if settings.read_only {
        Some(ha_domain::read_only::etcd_not_read(&ctx.spec.name))
    } else {
        ha_domain::topology::unread_etcd(&snap.observed, &ctx.spec.name)
    };
    if let Some((summary, detail)) = unread {
        diags.warning(summary, detail);
    }
    let listed = snap
        .instances
        .get(&name)
        .filter(|i| zone_of(i) == zone)
        .cloned();
    let vm = match listed {
        Some(i) => Some(i),
        // The cluster finds its VMs by label; one whose labels were edited by hand is still this replica.
        None => match ha_ops::observe::replica_vm(&ctx, &zone, &name, until).await {
            Ok(i) => i,
            Err(e) => {
                diags.error(
                    format!("Could not read replica {name}"),
                    super::advice::with_advice(&e),
                );
                return Some(s);
            }
        },
    };
    match vm {
        Some(i) => Some(record_vm(&ctx, &snap, s, &i, &zone, &name, until).await),
        None => Some(vm_gone(&ctx, &snap, s, &zone, &name, until).await),
    }
}

/// The member ids etcd listed, when it answered.
fn listed_ids(snap: &Snapshot) -> Option<Vec<u64>> {
    snap.observed
        .members
        .is_some()
        .then(|| snap.members.iter().map(|m| m.id).collect())
}

fn recorded_member(s: &ReplicaModel) -> Option<&str> {
    s.etcd_member_id.known().map(String::as_str)
}

/// The replica's VM is not there.
async fn vm_gone(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    mut s: ReplicaModel,
    zone: &str,
    name: &str,
    until: Instant,
) -> ReplicaModel {
    // The VM is gone but its etcd data disk is not (deleted by hand, or a roll killed between deleting and
    // creating it): the replica is rebuilt on the disk as the same member, unless etcd has removed that member.
    let member = member_seen(listed_ids(snap).as_deref(), recorded_member(&s));
    let disk_labels = ha_ops::observe::data_disk_labels(ctx, zone, name, until)
        .await
        .ok()
        .flatten();
    if vanished_vm(disk_labels.is_some(), member) == VmSeen::GoneWithDataDisk {
        // A disk a restore made after this state was written (one killed before saving it) holds no member
        // the state records: the plan then takes it for that restore's leftover, not for a survivor.
        let state_generation = s
            .cluster
            .known()
            .and_then(|c| c.restore_generation.known().copied())
            .unwrap_or(0);
        let made_by = disk_labels
            .as_ref()
            .and_then(|l| l.get(ha_domain::restore::GENERATION_LABEL));
        if ha_domain::restore::disk_newer_than_state(made_by.map(String::as_str), state_generation)
        {
            s.etcd_member_id = Val::Known(String::new());
        }
        s.status = Val::Known(VM_DELETED.into());
        s.external_ip = Val::Known(String::new());
        s.holds_static_ip = Val::Known(false);
        s.drift = Val::Known(Vec::new());
        return s;
    }
    // The VM is gone but its etcd member and reserved IP may not be: keep the replica in state, marked, so the
    // plan replaces it (the delete removes the dead member, then a fresh replica joins) instead of forgetting
    // what it owned.
    s.instance_id = Val::Known(String::new());
    s.external_ip = Val::Known(String::new());
    s.holds_static_ip = Val::Known(false);
    s.status = Val::Known(String::new());
    s.drift = Val::Known(Vec::new());
    s
}

/// What moved on the replica's VM `i`, recorded for the plan to repair.
async fn record_vm(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    mut s: ReplicaModel,
    i: &InstanceInfo,
    zone: &str,
    name: &str,
    until: Instant,
) -> ReplicaModel {
    let external = i.external_ip.clone().unwrap_or_default();
    s.holds_static_ip = Val::Known(external == ctx.spec.external_ip);
    s.external_ip = Val::Known(external);
    s.status = Val::Known(i.status.clone());
    s.labels = own_labels(&i.labels, &ctx.spec.master.labels, &s.labels);
    // Digests recorded for another VM than this one (a roll killed after it built this VM, before Terraform saved
    // it) say nothing of this one, which the provider made.
    let same_vm = s
        .instance_id
        .known()
        .is_none_or(|id| id.is_empty() || *id == i.id.to_string());
    match s
        .startup_metadata
        .known()
        .filter(|m| !m.is_empty() && same_vm)
    {
        Some(wrote) => s.drift = Val::Known(metadata_drift(wrote, &i.metadata)),
        // A state from before the provider recorded it (or a failed create), or a VM rebuilt since it recorded
        // them: what the VM carries is the baseline.
        None => {
            record_metadata(&mut s, &i.metadata);
            s.drift = Val::Known(Vec::new());
        }
    }
    // A state from before builds were recorded: the VM is what the stored spec made of it.
    if s.master_settings.is_null() {
        s.master_settings = Val::Known(ctx.spec.master.build().shown());
    }
    // A state from before the data disk's size was part of a build: record the size the disk has, so the plan
    // shows no change for it and a larger `data_disk_size_gb` later is seen (and grows the disk).
    if let Val::Known(shown) = &mut s.master_settings
        && !shown.contains_key(DATA_DISK_SIZE)
        && let Ok(Some(size)) = ha_ops::observe::data_disk_size(ctx, zone, name, until).await
    {
        shown.insert(DATA_DISK_SIZE.into(), size.to_string());
    }
    if member_seen(listed_ids(snap).as_deref(), recorded_member(&s)) == MemberSeen::Removed {
        s.etcd_member_id = Val::Known(String::new());
    }
    s
}

/// The replica's own labels as the VM carries them: everything but the cluster label and the cluster's labels.
/// A cluster label the replica also sets to the same value stays (it cannot be told apart from the VM alone), and
/// no labels at all stay null when the configuration left them out.
fn own_labels(
    vm: &BTreeMap<String, String>,
    cluster: &BTreeMap<String, String>,
    prior: &Val<BTreeMap<String, String>>,
) -> Val<BTreeMap<String, String>> {
    let had = prior.known();
    let own: BTreeMap<String, String> = vm
        .iter()
        .filter(|(k, v)| {
            !is_provider_label(k)
                && (cluster.get(*k) != Some(*v) || had.is_some_and(|h| h.get(*k) == Some(*v)))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if own.is_empty() && prior.is_null() {
        Val::Null
    } else {
        Val::Known(own)
    }
}

/// In place: a VM that is not running is started again (and its etcd member awaited), and the VM's labels become
/// the cluster's plus the replica's. The computed values that may change with it (status, external IP) are read back.
pub async fn update(
    settings: &Settings,
    stop: &CancellationToken,
    prior: ReplicaModel,
    p: ReplicaModel,
    diags: &mut Diagnostics,
) -> Option<ReplicaModel> {
    let (Some(name), Some(zone)) = (p.name.known().cloned(), p.zone.known().cloned()) else {
        return Some(prior);
    };
    let ctx = context(settings, &p, diags).await?;
    let until = deadline(&p.timeouts, Op::Update, Duration::from_secs(600));
    // The cluster recovered etcd before this update (planned so): a replica whose VM was gone lost its member
    // and joins again as a new one; the survivor was created again, and its roll reads the VM back.
    let recovered = cluster_recovers(&prior, &p);
    if recovered && p.etcd_member_id.is_unknown() {
        let restore = ctx.spec.restore_snapshot.clone();
        // An update: the user's `update` timeout bounds it, and without one it has a create's time, since it
        // does what a create does (and a restore fetches a snapshot first).
        let until = deadline(&p.timeouts, Op::Update, CREATE_TIMEOUT);
        return join_as_new_member(&ctx, stop, restore, Some(&prior), p, until, diags).await;
    }
    if recovered && prior.master_settings.known() == p.master_settings.known() {
        let old = ctx.spec.master.build();
        return roll_replica(&ctx, prior, p, old, until, diags).await;
    }
    if let (Some(old), Some(new)) = (prior.master_settings.known(), p.master_settings.known())
        && old != new
    {
        let old = Build::from_shown(old);
        return roll_replica(&ctx, prior, p, old, until, diags).await;
    }
    // Another subnetwork (its internal IP planned unknown), certificates in the renewal window (planned unknown), or
    // any other repair the plan showed as a new VM (a startup configuration edited by hand, `domain::metadata`):
    // the roll rebuilds the VM, in the new subnetwork, and the rebuild issues new certificates.
    let renewing =
        p.certificates_expire_at.is_unknown() && prior.certificates_expire_at.known().is_some();
    let rebuilding = p.instance_id.is_unknown();
    if super::replica_model::moves_subnetwork(&prior, &p) || renewing || rebuilding {
        let old = match prior.master_settings.known() {
            Some(shown) => Build::from_shown(shown),
            None => ctx.spec.master.build(),
        };
        return roll_replica(&ctx, prior, p, old, until, diags).await;
    }
    // The VM is gone and its data disk is not: the roll's steps create it again on the disk.
    if prior.status.known().is_some_and(|s| s == VM_DELETED) {
        let old = ctx.spec.master.build();
        return roll_replica(&ctx, prior, p, old, until, diags).await;
    }
    // Nothing to roll: the VM is mended in place (metadata written back, started again, labelled).
    let req = MendRequest {
        name: name.clone(),
        zone,
        labels: p.labels.known().cloned().unwrap_or_default(),
        metadata: p.startup_metadata.known().cloned(),
    };
    let vm = match mend_replica(&ctx, &req, until).await {
        Ok(vm) => vm,
        Err(e) => {
            report(diags, "repair", &name, e);
            return Some(prior);
        }
    };
    let mut p = p;
    // The apply did what the plan said: the metadata is the provider's again (a later edit shows at refresh).
    p.drift = Val::Known(Vec::new());
    let external = vm.external_ip.clone().unwrap_or_default();
    p.holds_static_ip = Val::Known(external == ctx.spec.external_ip);
    p.external_ip = Val::Known(external);
    p.status = Val::Known(vm.status.clone());
    Some(p)
}

/// Rolls the replica onto the cluster's current settings, under the cluster's lock so replicas roll one at a
/// time. On failure the prior state stays (the plan shows the roll again, and the next apply resumes it from
/// what it observes).
async fn roll_replica(
    ctx: &ClusterCtx,
    prior: ReplicaModel,
    p: ReplicaModel,
    old: Build,
    until: Instant,
    diags: &mut Diagnostics,
) -> Option<ReplicaModel> {
    let name = p.name.known().cloned().unwrap_or_default();
    let zone = p.zone.known().cloned().unwrap_or_default();
    let req = RollRequest {
        name: name.clone(),
        zone: zone.clone(),
        labels: p.labels.known().cloned().unwrap_or_default(),
        prior: old,
        rebuild_instance: must_rebuild(&prior.drift.known().cloned().unwrap_or_default())
            .then(|| prior.instance_id.known().and_then(|id| id.parse().ok()))
            .flatten(),
        recorded_member: prior
            .etcd_member_id
            .known()
            .and_then(|id| u64::from_str_radix(id, 16).ok()),
    };
    let rolled = roll_in_turn(ctx, &req, until).await;
    let r = match rolled {
        Ok(r) => r,
        Err(e) => {
            report(diags, "roll", &name, e);
            return Some(prior);
        }
    };
    let mut p = p;
    let vm = &r.instance;
    p.instance_id = Val::Known(vm.id.to_string());
    p.self_link = Val::Known(vm.self_link.clone());
    let external = vm.external_ip.clone().unwrap_or_default();
    p.holds_static_ip = Val::Known(external == ctx.spec.external_ip);
    p.external_ip = Val::Known(external);
    p.status = Val::Known(vm.status.clone());
    p.etcd_member_id = Val::Known(format!("{:x}", r.member_id));
    if let Some(ip) = &vm.internal_ip {
        p.internal_ip = Val::Known(ip.clone());
    }
    // Planned unknown when the roll rebuilds the VM; a machine type change keeps the planned (prior) ones.
    if let Some(certs) = r
        .certs
        .as_ref()
        .filter(|_| p.certificate_sha256.is_unknown())
    {
        let pems = [&certs.api_server, &certs.etcd_peer, &certs.etcd_server];
        record_certificates(&mut p, pems.map(|c| c.cert_pem.as_str()));
    }
    // Nothing was rebuilt after all, or the VM's configuration cannot be read: the certificates are still the ones
    // state holds (an apply must not leave them unknown).
    if p.certificate_sha256.is_unknown() {
        p.certificate_sha256 = prior.certificate_sha256.clone();
        p.certificates_expire_at = prior.certificates_expire_at.clone();
    }
    record_metadata(&mut p, &vm.metadata);
    p.master_settings = Val::Known(ctx.spec.master.build().shown());
    p.drift = Val::Known(Vec::new());
    Some(p)
}

pub async fn delete(
    settings: &Settings,
    stop: &CancellationToken,
    s: ReplicaModel,
    diags: &mut Diagnostics,
) {
    let (Some(name), Some(zone)) = (s.name.known().cloned(), s.zone.known().cloned()) else {
        return;
    };
    let Some(ctx) = context(settings, &s, diags).await else {
        return;
    };
    let until = deadline(&s.timeouts, Op::Delete, DELETE_TIMEOUT);
    let lock = match unless_stopped(
        stop,
        lock_cluster(&ctx, &format!("delete replica {name}"), until),
    )
    .await
    {
        Some(Ok(lock)) => lock,
        Some(Err(e)) => return report(diags, "delete", &name, e),
        None => return report_interrupted(diags, &format!("Deleting replica {name}")),
    };
    let until = lock.after_wait(until);
    // Interrupted, the replica stays in state and the next apply's leave observes how far this one got.
    let left = unless_stopped(stop, leave(&ctx, &name, &zone, until)).await;
    if let Some(Ok(())) = &left {
        unless_stopped(stop, warn_about_shape(&ctx, &lock, until, diags)).await;
    }
    // Released before the answer, as for a create: a refused delete must not leave the cluster locked.
    lock.release().await;
    match left {
        Some(Ok(())) => {}
        Some(Err(e)) => report(diags, "delete", &name, e),
        None => report_interrupted(diags, &format!("Deleting replica {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn own_labels_are_what_the_vm_carries_beyond_the_cluster() {
        let cluster = map(&[("env", "prod")]);
        let vm = |extra: &[(&str, &str)]| {
            let mut m = map(&[(CLUSTER_LABEL, "walk"), ("env", "prod")]);
            m.extend(map(extra));
            m
        };
        type Labels = BTreeMap<String, String>;
        // (VM labels, prior, expected)
        let cases: [(Labels, Val<Labels>, Val<Labels>); 7] = [
            // Nothing extra: null stays null, an empty map stays empty.
            (vm(&[]), Val::Null, Val::Null),
            (vm(&[]), Val::Known(map(&[])), Val::Known(map(&[]))),
            // A label added by hand shows.
            (
                vm(&[("team", "rogue")]),
                Val::Null,
                Val::Known(map(&[("team", "rogue")])),
            ),
            // The replica's own label removed by hand shows as missing.
            (
                vm(&[]),
                Val::Known(map(&[("tier", "a")])),
                Val::Known(map(&[])),
            ),
            // The mark of an unfinished join is the provider's, not the user's.
            (vm(&[(JOINING_LABEL, "true")]), Val::Null, Val::Null),
            // So are a build and a measured window, and any label of a later release under its prefixes.
            (
                vm(&[
                    (ha_domain::roll::BUILD_LABEL, "abc"),
                    (ha_domain::disruption::WINDOW_LABEL, "95"),
                    ("ha-master-later", "x"),
                ]),
                Val::Null,
                Val::Null,
            ),
            // A replica label equal to a cluster label is kept when the replica declared it.
            (
                vm(&[]),
                Val::Known(map(&[("env", "prod")])),
                Val::Known(map(&[("env", "prod")])),
            ),
        ];
        for (labels, prior, want) in cases {
            assert_eq!(
                own_labels(&labels, &cluster, &prior),
                want,
                "{labels:?} {prior:?}"
            );
        }
        // A cluster label overridden on the VM is the replica's.
        assert_eq!(
            own_labels(&vm(&[("env", "dev")]), &cluster, &Val::Null),
            Val::Known(map(&[("env", "dev")]))
        );
    }
}
