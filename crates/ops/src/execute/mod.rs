//! The one executor: carries out a list of steps (`ha_domain::step`) against the backends, in order. Joins, leaves,
//! rolls and repairs differ in what they observe, which domain function decides their steps and what they check
//! before the first one; how a step is done is written once, in the file of its family (`etcd`, `vm`, `lb`,
//! `address`), and `Run::cluster_step` and `ReplicaRun::replica_step` only say which method does each.
//!
//! A `Run` is one change under the cluster's lock: the snapshot the steps were decided from and what the steps
//! learn as they go (`Progress`: the VM as last seen, the etcd member, the endpoints to reach etcd through, the
//! initial cluster a new member starts with). A plain `Run` (a repair) carries out `ClusterStep`s, which name what
//! they act on. A `ReplicaRun` is a `Run` about one replica: it alone carries out `ReplicaStep`s, so a step about
//! "the replica" never runs in a change about none.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use tokio::time::Instant;

use super::build::{Identity, create_instance, data_disk_name, master_config};
use super::context::ClusterCtx;
use super::endpoint::{Target, await_serving, await_static_ip, get};
use super::error::{OpError, Result};
use super::observe::{Snapshot, etcd_target};
use super::shared::{
    HEALTH_PORT, internal_address_description, internal_address_name, peer_url, zone_of,
};
use ha_domain::step::{ClusterStep, MetadataItems, ReplicaStep, Step};
use ha_etcd::EtcdTarget;
use ha_gce::{
    AddressKind, ExternalIp, ForwardingRuleSpec, HealthCheckSpec, InstanceInfo, InstanceRef,
    TargetPoolSpec,
};
use ha_master::{self as master, InitialState};
use ha_pki::{self as pki, ReplicaCertRequest, ReplicaCerts};

mod address;
mod admin_binding;
mod etcd;
pub mod foundation;
mod lb;
mod vm;

/// Consecutive healthy checks (member healthy, API serving) before the next replica may roll, as kops validates
/// a cluster several times after each master: a member that flaps right after its restart is caught here. They
/// are spread evenly over the provider's `roll_soak`.
const SOAK_CHECKS: u32 = 3;
/// How long etcd may take to commit a member's new peer URL: the member's own restart on its new address, and an
/// election, for a cluster that has no quorum without it.
const PEER_UPDATE_PATIENCE: Duration = Duration::from_secs(120);
/// How often a VM that has no operation to wait on (a restart, a boot) is looked at.
const POLL: Duration = Duration::from_millis(250);

/// The replica a change is about.
#[derive(Clone)]
pub struct Replica {
    pub name: String,
    pub zone: String,
    /// The replica's own labels (the provider adds the cluster's and its own).
    pub labels: BTreeMap<String, String>,
    /// Its reserved internal IP: the VM's network IP and the etcd member's peer address.
    pub internal_ip: Ipv4Addr,
}

impl Replica {
    /// The replica `name` in `zone`, with its own `labels`, at `internal_ip`.
    pub fn new(
        name: &str,
        zone: &str,
        labels: &BTreeMap<String, String>,
        internal_ip: Ipv4Addr,
    ) -> Replica {
        Replica {
            name: name.to_string(),
            zone: zone.to_string(),
            labels: labels.clone(),
            internal_ip,
        }
    }
}

/// What the steps learn as they go, and what the caller reads back when they are done (or as far as they got).
#[derive(Default)]
pub struct Progress {
    /// The replica's VM as last seen; `None` once deleted, or before it exists.
    pub instance: Option<InstanceInfo>,
    pub member_id: Option<u64>,
    /// The replica's certificates: issued by the caller (a join) or by a rebuild, which issues them anew since
    /// the settings they name may have changed.
    pub certs: Option<ReplicaCerts>,
    /// Where to reach etcd.
    pub targets: Vec<EtcdTarget>,
    /// The members a new or rebuilt member starts with, by name and peer IP.
    pub initial_cluster: Vec<(String, Ipv4Addr)>,
    /// Set once this run adds a learner, cleared once it is promoted: a join that fails in between takes its
    /// learner back out.
    pub added_learner: Option<u64>,
    /// The snapshot a `TakeBackup` step uploaded, as `gs://bucket/object`.
    pub last_backup: Option<String>,
    /// The snapshot a `RestoreFromSnapshot` step restores (`ops::restore` resolves it before the run).
    pub restore: Option<ha_master::SnapshotRestore>,
    /// The replica's internal IP once a join's `ReserveAddressOf` reserved it or a `MoveInternalAddress` moved it;
    /// the steps after it use this one.
    pub internal_ip: Option<Ipv4Addr>,
    /// When this change took the replica out of service or began building it (`domain::disruption::window`),
    /// and, once it was back, how long that took: `LabelVm` writes it on the VM for the next roll to judge by.
    pub window_opened: Option<Instant>,
    pub window: Option<Duration>,
}

pub struct Run<'a> {
    pub ctx: &'a ClusterCtx,
    pub snap: &'a Snapshot,
    /// The replica a `ReplicaRun` is about (none for a repair): where its VM goes before it exists (`zone_of`).
    replica: Option<&'a Replica>,
    pub deadline: Instant,
    pub progress: Progress,
}

impl<'a> Run<'a> {
    /// A run about `replica`, starting from what the snapshot shows of it.
    pub fn for_replica(
        ctx: &'a ClusterCtx,
        snap: &'a Snapshot,
        replica: &'a Replica,
        deadline: Instant,
    ) -> ReplicaRun<'a> {
        let progress = Progress {
            instance: snap.instances.get(&replica.name).cloned(),
            member_id: snap.member_named(&replica.name).map(|m| m.id),
            targets: snap.targets.clone(),
            initial_cluster: initial_cluster(snap, &replica.name, replica.internal_ip),
            ..Progress::default()
        };
        ReplicaRun {
            run: Run {
                ctx,
                snap,
                replica: Some(replica),
                deadline,
                progress,
            },
            me: replica,
        }
    }

    /// A run about the cluster as a whole (repairs): steps name the replicas they act on.
    pub fn for_cluster(ctx: &'a ClusterCtx, snap: &'a Snapshot, deadline: Instant) -> Self {
        Run {
            ctx,
            snap,
            replica: None,
            deadline,
            progress: Progress {
                targets: snap.targets.clone(),
                ..Progress::default()
            },
        }
    }

    /// Carries out `steps` in order; stops at the first that fails.
    pub async fn execute(&mut self, steps: &[ClusterStep]) -> Result<()> {
        let all: Vec<Step> = steps.iter().cloned().map(Step::from).collect();
        for (i, step) in steps.iter().enumerate() {
            tracing::debug!(step = ?step, "step");
            self.cluster_step(step)
                .await
                .map_err(|e| e.at_step(i, &all))?;
        }
        Ok(())
    }

    /// A replica's zone: its VM's, the changing replica's own, or the cluster's.
    fn zone_of(&self, name: &str) -> String {
        if let Some(i) = self.snap.instances.get(name) {
            return zone_of(i);
        }
        match self.replica {
            Some(r) if r.name == name => r.zone.clone(),
            _ => self.ctx.spec.zone.clone(),
        }
    }

    fn instance_ref(&self, name: &str) -> InstanceRef {
        InstanceRef {
            zone: self.zone_of(name),
            name: name.to_string(),
        }
    }

    async fn cluster_step(&mut self, step: &ClusterStep) -> Result<()> {
        use ClusterStep::*;
        match step {
            TakeBackup { change } => self.take_backup(change).await,
            RemoveStaleMember { name, id } => self.remove_stale_member(name, id).await,
            AttachEphemeralIp { to } => self.attach_ephemeral_ip(to).await,
            CreateHealthCheck => self.create_health_check().await,
            CreatePool { instances } => self.create_pool(instances).await,
            AddPoolMember { name } => self.add_pool_member(name).await,
            RemovePoolMember { name } => self.remove_pool_member(name).await,
            CreateForwardingRule => self.create_forwarding_rule().await,
            DeleteForwardingRule => self.delete_forwarding_rule().await,
            DeletePool => self.delete_pool().await,
            DeleteHealthCheck => self.delete_health_check().await,
            DetachStaticIp { from } => self.detach_static_ip(from).await,
            AttachStaticIp { to } => self.attach_static_ip(to).await,
            AwaitEndpoint => self.await_endpoint().await,
            ReserveAddressOf { replica } => self.reserve_internal_address_of(replica).await,
            ReleaseAddressOf { replica } => self.release_internal_address_of(replica).await,
            DeleteSecret { id } => crate::build::delete_secret(self.ctx, id).await,
        }
    }
    /// The replicas other than `me` that exist now: who etcd's members must be.
    fn others(&self, me: &str) -> Vec<String> {
        self.snap
            .instances
            .keys()
            .filter(|n| n.as_str() != me)
            .cloned()
            .collect()
    }

    /// The replica's VM as last seen, or read now.
    async fn current_vm(&self, name: &str) -> Result<InstanceInfo> {
        match &self.progress.instance {
            Some(i) => Ok(i.clone()),
            None => self.fresh_vm(name).await,
        }
    }

    async fn fresh_vm(&self, name: &str) -> Result<InstanceInfo> {
        self.ctx
            .compute
            .get_instance(&self.zone_of(name), name, self.deadline)
            .await?
            .ok_or_else(|| OpError::Other(format!("the VM of replica {name} vanished")))
    }

    /// Where to reach the replica's etcd once its VM runs (a restarted VM may have a new ephemeral IP).
    async fn running_target(&self, name: &str) -> Result<EtcdTarget> {
        Ok(self.running_vm(name).await?.1)
    }

    /// The replica's VM once it runs, read fresh, and where to reach its etcd.
    async fn running_vm(&self, name: &str) -> Result<(InstanceInfo, EtcdTarget)> {
        loop {
            let vm = self.fresh_vm(name).await?;
            if vm.status == "RUNNING"
                && let Some(t) = etcd_target(self.ctx, &vm)
            {
                return Ok((vm, t));
            }
            if Instant::now() >= self.deadline {
                return Err(OpError::Other(format!(
                    "the VM of replica {name} is {}; look at its serial console, then apply again",
                    vm.status
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// A run about one replica (a join, leave, roll, recovery or restore): a [`Run`] that also knows which replica
/// "the replica" is, so it alone carries out [`ReplicaStep`]s. It derefs to its `Run` for what both share.
pub struct ReplicaRun<'a> {
    run: Run<'a>,
    me: &'a Replica,
}

impl<'a> std::ops::Deref for ReplicaRun<'a> {
    type Target = Run<'a>;
    fn deref(&self) -> &Run<'a> {
        &self.run
    }
}

impl<'a> std::ops::DerefMut for ReplicaRun<'a> {
    fn deref_mut(&mut self) -> &mut Run<'a> {
        &mut self.run
    }
}

impl ReplicaRun<'_> {
    /// Carries out `steps` in order; stops at the first that fails. Refuses before the first when a step would
    /// build a VM (new certificates) and the cluster's CAs cannot sign: an imported cluster's CA keys are nowhere,
    /// and a roll that found out only after deleting the VM would leave the replica without one.
    pub async fn execute(&mut self, steps: &[Step]) -> Result<()> {
        if steps
            .iter()
            .any(|s| matches!(s, Step::Replica(r) if r.builds_vm()))
            && let Err(e) = self.ctx.spec.issuing_cas().and_then(|c| Ok(c.issuers()?))
        {
            return Err(OpError::Refused(
                format!(
                    "Replica {} cannot be built: cluster {}'s CA keys cannot sign ({e})",
                    self.me.name, self.ctx.spec.name
                ),
                "A new or rebuilt master needs certificates signed by the cluster's CAs. An imported cluster \
                 has none (they lived only in the state it was created with), so its replicas can be refreshed, \
                 repaired in place, restarted and removed, but not created or rebuilt. Nothing was changed."
                    .into(),
            ));
        }
        let window = ha_domain::disruption::window(steps);
        for (i, step) in steps.iter().enumerate() {
            tracing::debug!(replica = %self.me.name, step = ?step, "step");
            if let Some(w) = window.filter(|w| w.opens == i) {
                if w.takes_down {
                    self.time_for_window()?;
                }
                self.progress.window_opened = Some(Instant::now());
            }
            let done = match step {
                Step::Cluster(s) => self.run.cluster_step(s).await,
                Step::Replica(s) => self.replica_step(s).await,
            };
            done.map_err(|e| e.at_step(i, steps))?;
            if window.is_some_and(|w| w.closes == i)
                && let Some(opened) = self.progress.window_opened
            {
                self.progress.window = Some(opened.elapsed());
            }
        }
        Ok(())
    }

    /// Refuses to take the replica down without the time to bring it back: the longest window its cluster's
    /// VMs carry (`domain::disruption`), against what is left of the change's timeout.
    fn time_for_window(&self) -> Result<()> {
        use ha_domain::disruption::{WINDOW_LABEL, longest, too_little_time};
        let measured = self.snap.instances.iter().map(|(name, vm)| {
            (
                name.as_str(),
                vm.labels.get(WINDOW_LABEL).map(String::as_str),
            )
        });
        let Some(longest) = longest(measured) else {
            return Ok(());
        };
        let left = self.deadline.saturating_duration_since(Instant::now());
        match too_little_time(&self.me.name, longest, left) {
            Some((summary, detail)) => Err(OpError::Refused(summary, detail)),
            None => Ok(()),
        }
    }

    /// What the steps learned, once they are done (or as far as they got).
    pub fn into_progress(self) -> Progress {
        self.run.progress
    }

    /// The replica the change is about, at its current internal IP (a move to another subnetwork changes it).
    fn me(&self) -> Replica {
        Replica {
            internal_ip: self.progress.internal_ip.unwrap_or(self.me.internal_ip),
            ..self.me.clone()
        }
    }

    fn certs(&self, step: &ReplicaStep) -> Result<&ReplicaCerts> {
        self.progress.certs.as_ref().ok_or_else(|| {
            OpError::Other(format!(
                "the step {step:?} needs the replica's certificates, which were not issued; this is a bug"
            ))
        })
    }

    fn member_id(&self, step: &ReplicaStep) -> Result<u64> {
        self.progress.member_id.ok_or_else(|| {
            OpError::Other(format!(
                "the step {step:?} needs the replica's etcd member, and it has none"
            ))
        })
    }

    async fn replica_step(&mut self, step: &ReplicaStep) -> Result<()> {
        use ReplicaStep::*;
        match step {
            AddLearner => self.add_learner().await,
            AwaitCaughtUpAndPromote => self.await_caught_up_and_promote(step).await,
            MoveLeadership => self.move_leadership().await,
            RemoveMember { id } => self.remove_member(id).await,
            AwaitMember => self.await_member(step).await,
            Soak => self.soak_member(step).await,
            CreateFoundingInstance { with_static_ip } | RestoreFromSnapshot { with_static_ip } => {
                self.create_founding_or_restored_instance(step, with_static_ip)
                    .await
            }
            CreateJoiningInstance => self.create_joining_instance(step).await,
            RebuildInstance | RecoverAsSoleMember => self.rebuild_instance(step).await,
            GrowDataDisk => self.grow_data_disk().await,
            StopInstance => self.stop_instance().await,
            SetMachineType => self.set_machine_type().await,
            StartInstance => self.start_instance().await,
            AwaitRestarted => self.await_restarted().await,
            WriteMetadata { items } => self.write_metadata(items).await,
            DeleteInstance => self.delete_instance().await,
            DeleteDataDisk => self.delete_data_disk().await,
            MoveInternalAddress => self.move_internal_address().await,
            UpdatePeerUrl => self.update_peer_url(step).await,
            ReleaseInternalAddress => self.release_internal_address().await,
            DeleteKeys => {
                let me = self.me();
                crate::build::delete_keys(self.ctx, &me.name, &me.zone).await
            }
            AwaitApi => self.await_api().await,
            AwaitAdminBinding => self.await_admin_binding().await,
            AddToPool => self.add_to_pool().await,
            RemoveFromPool => self.remove_from_pool().await,
            LabelVm => self.label_vm().await,
        }
    }
}

pub fn ip(s: &str, what: &str) -> Result<Ipv4Addr> {
    s.parse()
        .map_err(|_| OpError::Other(format!("{what} {s:?} is not an IPv4 address")))
}

/// Where the provider reaches replica `me`'s own API server, not the load balancer's: its VM's external IP, the
/// serving certificate verified for the internal IP it was issued for, under `ca_pem` (every cluster CA the
/// masters trust: both while the CAs rotate).
fn own_api<'a>(me: &Replica, vm: &InstanceInfo, ca_pem: &'a str, port: u16) -> Result<Target<'a>> {
    let ext = vm
        .external_ip
        .as_deref()
        .ok_or_else(|| OpError::Other(format!("replica {} has no external IP", me.name)))?;
    Ok(Target {
        ca_pem,
        ip: IpAddr::V4(ip(ext, "the replica's external IP")?),
        verify_as: IpAddr::V4(me.internal_ip),
        port,
    })
}

/// The replica's certificates, from the cluster's CAs: they name its internal IP, the static IP, the first
/// service IP and the DNS domain.
pub fn issue_certs(ctx: &ClusterCtx, me: &Replica) -> Result<ReplicaCerts> {
    let spec = &ctx.spec;
    Ok(pki::issue_replica_certs(
        spec.issuing_cas()?,
        &ReplicaCertRequest {
            name: me.name.clone(),
            internal_ip: me.internal_ip,
            static_ip: ip(&spec.external_ip, "the cluster's external IP")?,
            first_service_ip: master::first_service_ip(&spec.master.service_range),
            dns_domain: spec.master.dns_domain.clone(),
            validity: time::Duration::try_from(spec.certificate_validity).map_err(|e| {
                OpError::Other(format!("certificate_validity is out of range: {e}"))
            })?,
        },
    )?)
}

/// Every member by name and peer IP, with `me` at `my_ip`: a new member's `--initial-cluster` (a rebuilt member
/// starting on its data directory ignores it, but it must still name every member consistently). Before any
/// member exists (a founding replica), `me` alone.
fn initial_cluster(snap: &Snapshot, me: &str, my_ip: Ipv4Addr) -> Vec<(String, Ipv4Addr)> {
    let views = snap.observed.members.clone().unwrap_or_default();
    let mut out: Vec<(String, Ipv4Addr)> = snap
        .members
        .iter()
        .filter_map(|m| {
            let name = views.iter().find(|v| v.id == m.id)?.name.clone();
            Some((name, m.peer_ip()?))
        })
        .filter(|(n, _)| n != me)
        .collect();
    out.push((me.to_string(), my_ip));
    out
}
