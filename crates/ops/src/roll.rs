//! A replica rolls onto the cluster's current settings: the steps `domain::roll::roll_steps` decides from an
//! observed snapshot, run by `ops::execute`. The caller holds the cluster's lock, so replicas roll one at a time
//! (siblings in one apply, and replicas of other states). No member is added or removed: a machine type change
//! stops and starts the VM on its own disks; anything else rebuilds the VM on its etcd data disk and internal IP,
//! and etcd restarts as the same member with its data.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::time::Instant;

use super::adopt::{RecordedCerts, certs_expire_on, certs_on};
use super::backup::backup_first;
use super::build::data_disk_name;
use super::change::{Change, Decision, run_change};
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::execute::{Progress, Replica, ip};
use super::lock::lock_cluster;
use super::observe::Snapshot;
use super::placement::check_still_bootable;
use super::shared::{internal_address_name, zone_of};
use ha_domain::roll::{BUILD_LABEL, Build, Placement, VmFacts, roll_steps, subnetwork_name};
use ha_domain::step::labelled_last;
use ha_gce::AddressKind;
use ha_gce::InstanceInfo;
use ha_master::DATA_DEVICE;

pub struct RollRequest {
    pub name: String,
    pub zone: String,
    pub labels: BTreeMap<String, String>,
    /// What the VM was built from according to state: the build of a VM made before builds were labelled.
    pub prior: Build,
    /// The id of a VM to rebuild whatever its build: one whose startup configuration was edited by hand
    /// (`domain::metadata::must_rebuild`). A VM with another id was rebuilt already (by a roll killed before
    /// Terraform saved it), so a resumed roll does not rebuild it twice.
    pub rebuild_instance: Option<u64>,
    /// The etcd member the state records for the replica: the member a roll keeps when no etcd member answers at
    /// all (the replica is the cluster's only one, and its VM is down), so a down VM can still be rebuilt on its
    /// data disk and bring its member back. When etcd answers, its member list decides.
    pub recorded_member: Option<u64>,
}

/// The replica as the roll left it.
pub struct Rolled {
    pub instance: InstanceInfo,
    /// The certificates the VM runs with: issued anew (same CAs) when this roll rebuilt it, since the settings
    /// they name may have changed; otherwise read from the VM (a machine type change keeps them; a VM rebuilt by
    /// a roll that was killed before Terraform saved anything carries ones no state knows). `None` when the VM's
    /// startup configuration cannot be read: state keeps what it has.
    pub certs: Option<RecordedCerts>,
    pub member_id: u64,
}

fn facts(ctx: &ClusterCtx, vm: &InstanceInfo, r: &RollRequest) -> VmFacts {
    let prior = &r.prior;
    // The clock is read here, in the shell; the domain only compares.
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let cas = &ctx.spec.cas;
    let ca_expires_at = ha_pki::cas_expire_at([
        cas.cluster_ca.cert_pem.as_str(),
        cas.etcd_peer_ca.cert_pem.as_str(),
        cas.etcd_client_ca.cert_pem.as_str(),
    ]);
    VmFacts {
        status: vm.status.clone(),
        machine_type: vm.machine_type.clone(),
        build: Some(
            vm.labels
                .get(BUILD_LABEL)
                .cloned()
                .unwrap_or_else(|| prior.digest()),
        ),
        has_data_disk: vm.attached_disks.contains_key(DATA_DEVICE),
        // As plan decides it (`domain::certificates::outlook`), so an apply renews only what its plan said.
        certificates_due: certs_expire_on(vm).is_some_and(|t| {
            ha_domain::certificates::due(t, now, ctx.spec.certificate_renew_before, ca_expires_at)
        }),
        startup_edited: r.rebuild_instance == Some(vm.id),
        subnetwork: subnetwork_name(vm.subnetwork.as_deref(), &vm.network),
        internal_ip: vm.internal_ip.as_deref().and_then(|s| s.parse().ok()),
    }
}

/// Where the replica's internal IP is: its reserved address and the peer IP etcd lists for its member.
async fn placement(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    name: &str,
    deadline: Instant,
) -> Result<Placement> {
    let spec = &ctx.spec;
    let reserved = ctx
        .compute
        .get_address(&spec.region, &internal_address_name(name), deadline)
        .await?
        .and_then(|a| {
            let ip = a.ip.parse().ok()?;
            let sub = match &a.kind {
                AddressKind::Internal { subnetwork } => {
                    subnetwork_name(subnetwork.as_deref(), &spec.master.network)
                }
                AddressKind::External => return None,
            };
            Some((sub, ip))
        });
    let peer_ip = snap.member_named(name).and_then(|m| m.peer_ip());
    Ok(Placement {
        want_subnetwork: subnetwork_name(spec.master.subnetwork.as_deref(), &spec.master.network),
        reserved,
        peer_ip,
    })
}

/// How long a roll waits (outside the lock) for a sibling whose member is still down: siblings in one apply take
/// the lock in any order, and one may find another's member down from a roll that was killed and that this
/// sibling is resuming. Long enough for one replica's roll; a member that stays down is reported as plan would.
const WAIT_FOR_SIBLINGS: Duration = Duration::from_secs(120);
const SIBLING_POLL: Duration = Duration::from_secs(3);

/// Rolls replica `r` under the cluster's lock, so replicas roll one at a time; while the roll cannot start yet
/// (`OpError::NotYet`), releases the lock, waits and asks again, up to `WAIT_FOR_SIBLINGS`.
pub async fn roll_in_turn(ctx: &ClusterCtx, r: &RollRequest, deadline: Instant) -> Result<Rolled> {
    let patience = (Instant::now() + WAIT_FOR_SIBLINGS).min(deadline);
    loop {
        let lock = lock_cluster(ctx, &format!("roll replica {}", r.name), deadline).await?;
        // The wait for the lock is not taken from the roll: a roll never starts short of its whole timeout.
        let rolled = roll(ctx, r, lock.after_wait(deadline)).await;
        lock.release().await;
        match rolled {
            Err(OpError::NotYet(..)) if Instant::now() < patience => {
                tokio::time::sleep(SIBLING_POLL).await;
            }
            other => return other,
        }
    }
}

/// One roll of replica `r`; the caller holds the cluster's lock.
pub async fn roll(ctx: &ClusterCtx, r: &RollRequest, deadline: Instant) -> Result<Rolled> {
    let (progress, member_id) = run_change(ctx, Roll { r }, deadline).await?;
    let Progress {
        instance, certs, ..
    } = progress;
    let now = instance.ok_or_else(|| {
        OpError::Other(format!(
            "the VM of replica {} vanished during its roll",
            r.name
        ))
    })?;
    let certs = match certs {
        Some(issued) => Some(RecordedCerts::of(&issued)),
        None => certs_on(&ctx.settings, &now).await.ok(),
    };
    Ok(Rolled {
        instance: now,
        certs,
        member_id,
    })
}

/// A roll as a [`Change`]: it reads the cluster as every change does, then the replica's VM, data disk and
/// addresses, and decides from how they differ from the cluster's current settings.
struct Roll<'a> {
    r: &'a RollRequest,
}

impl Change for Roll<'_> {
    /// The replica's etcd member, which a roll keeps.
    type Kept = u64;

    fn what(&self) -> String {
        format!("roll of replica {}", self.r.name)
    }

    async fn decide(
        &mut self,
        ctx: &ClusterCtx,
        snap: &Snapshot,
        deadline: Instant,
    ) -> Result<(Decision, u64)> {
        let r = self.r;
        let c = &ctx.compute;
        let want = ctx.spec.master.build();
        // A VM whose labels were edited by hand is not found by label; it is still this replica.
        let vm = match snap.instances.get(&r.name) {
            Some(i) => Some(i.clone()),
            None => c.get_instance(&r.zone, &r.name, deadline).await?,
        };
        let disk = c
            .get_disk(&r.zone, &data_disk_name(&r.name), deadline)
            .await?;
        let place = placement(ctx, snap, &r.name, deadline).await?;
        let steps = match roll_steps(
            &snap.observed,
            &r.name,
            vm.as_ref().map(|v| facts(ctx, v, r)).as_ref(),
            disk.map(|d| d.size_gb),
            &want,
            &place,
        ) {
            Ok(steps) => steps,
            Err((summary, detail)) => {
                // A sibling that is down because its zone is DOWN will not be back within a sibling's roll: say
                // so now instead of waiting for it.
                if let Some((sibling, zone)) =
                    sibling_in_down_zone(ctx, snap, &r.name, deadline).await
                {
                    return Err(OpError::Refused(
                        format!(
                            "The roll of replica {} stopped: zone {zone} is DOWN",
                            r.name
                        ),
                        format!(
                            "Replica {sibling} is in zone {zone}, which Compute Engine reports DOWN, so its etcd member is down. Rolling {} now would take a second member away, so it was not touched. Apply again once `gcloud compute zones describe {zone}` says UP: the roll resumes where it stopped.",
                            r.name
                        ),
                    ));
                }
                return Err(OpError::NotYet(summary, detail));
            }
        };
        // Before the backup and before any step: a roll that could not bring the master back does not start.
        let down = vm.as_ref().is_none_or(|v| v.status != "RUNNING");
        check_still_bootable(ctx, &r.name, &r.zone, &steps, down, deadline).await?;
        let steps = labelled_last(backup_first(
            ctx,
            steps,
            &snap.observed,
            &r.name,
            &self.what(),
        ));
        let member_id = snap
            .member_named(&r.name)
            .map(|m| m.id)
            .or_else(|| {
                r.recorded_member
                    .filter(|_| snap.observed.members.is_none())
            })
            .ok_or_else(|| OpError::Other(format!("replica {} has no etcd member", r.name)))?;
        let internal_ip = internal_ip_of(vm.as_ref(), place.reserved.as_ref(), snap, member_id)?;
        let me = Replica::new(&r.name, &r.zone, &r.labels, internal_ip);
        Ok((
            Decision {
                instance: vm,
                member_id: Some(member_id),
                ..Decision::new(me, steps)
            },
            member_id,
        ))
    }
}

/// A replica VM other than `me` that is not running and whose zone Compute Engine reports DOWN, with that zone.
async fn sibling_in_down_zone(
    ctx: &ClusterCtx,
    snap: &Snapshot,
    me: &str,
    deadline: Instant,
) -> Option<(String, String)> {
    for name in snap.observed.stopped.iter().filter(|n| n.as_str() != me) {
        let Some(vm) = snap.instances.get(name) else {
            continue;
        };
        let zone = zone_of(vm);
        if let Ok(z) = ctx.compute.get_zone(&zone, deadline).await
            && z.status == "DOWN"
        {
            return Some((name.clone(), zone));
        }
    }
    None
}

/// The replica's internal IP: its VM's, or (between delete and create) its reserved address's (a move may have
/// reserved it anew already), or its member's peer URL.
fn internal_ip_of(
    vm: Option<&InstanceInfo>,
    reserved: Option<&(String, Ipv4Addr)>,
    snap: &Snapshot,
    member_id: u64,
) -> Result<Ipv4Addr> {
    let from_vm = vm
        .and_then(|v| v.internal_ip.clone())
        .or_else(|| reserved.map(|(_, ip)| ip.to_string()));
    let from_member = || {
        snap.members
            .iter()
            .find(|m| m.id == member_id)
            .and_then(|m| m.peer_ip().map(|i| i.to_string()))
    };
    let s = from_vm.or_else(from_member).ok_or_else(|| {
        OpError::Other(
            "the replica's internal IP is known neither from its VM nor from its etcd member"
                .into(),
        )
    })?;
    ip(&s, "the replica's internal IP")
}
