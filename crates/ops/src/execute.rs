//! The one executor: carries out a list of `domain::step::Step`s against the backends, in order. Joins, leaves,
//! rolls and repairs differ in what they observe, which domain function decides their steps and what they check
//! before the first one; how a step is done is written once, here.
//!
//! A `Run` is one change under the cluster's lock: the snapshot the steps were decided from, the replica the
//! change is about (none for a repair), and what the steps learn as they go (`Progress`: the VM as last seen,
//! the etcd member, the endpoints to reach etcd through, the initial cluster a new member starts with). Steps
//! that name a replica act on that one; steps about "the replica" need `Run::replica` and say so if it is absent.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use tokio::time::Instant;

use super::build::{Identity, create_instance, data_disk_name, master_config};
use super::context::ClusterCtx;
use super::endpoint::{await_serving, await_static_ip};
use super::error::{OpError, Result};
use super::observe::{Snapshot, etcd_target};
use super::shared::{
    HEALTH_PORT, internal_address_description, internal_address_name, peer_url, zone_of,
};
use ha_domain::step::Step;
use ha_etcd::EtcdTarget;
use ha_gce::{
    AddressKind, ExternalIp, ForwardingRuleSpec, HealthCheckSpec, InstanceInfo, InstanceRef,
    TargetPoolSpec,
};
use ha_master::{self as master, InitialState};
use ha_pki::{self as pki, ReplicaCertRequest, ReplicaCerts};

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
    /// The replica's internal IP once a `MoveInternalAddress` moved it; the steps after it use this one.
    pub internal_ip: Option<Ipv4Addr>,
}

pub struct Run<'a> {
    pub ctx: &'a ClusterCtx,
    pub snap: &'a Snapshot,
    pub replica: Option<&'a Replica>,
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
    ) -> Self {
        let progress = Progress {
            instance: snap.instances.get(&replica.name).cloned(),
            member_id: snap.member_named(&replica.name).map(|m| m.id),
            targets: snap.targets.clone(),
            initial_cluster: initial_cluster(snap, &replica.name, replica.internal_ip),
            ..Progress::default()
        };
        Run {
            ctx,
            snap,
            replica: Some(replica),
            deadline,
            progress,
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
    pub async fn execute(&mut self, steps: &[Step]) -> Result<()> {
        for step in steps {
            tracing::debug!(replica = ?self.replica.map(|r| &r.name), step = ?step, "step");
            self.step(step).await?;
        }
        Ok(())
    }

    /// The replica the change is about, at its current internal IP (a move to another subnetwork changes it).
    fn me(&self, step: &Step) -> Result<Replica> {
        let me = self.replica.ok_or_else(|| {
            OpError::Other(format!(
                "the step {step:?} acts on a replica, and this change is about none; this is a bug"
            ))
        })?;
        Ok(Replica {
            internal_ip: self.progress.internal_ip.unwrap_or(me.internal_ip),
            ..me.clone()
        })
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

    fn certs(&self, step: &Step) -> Result<&ReplicaCerts> {
        self.progress.certs.as_ref().ok_or_else(|| {
            OpError::Other(format!(
                "the step {step:?} needs the replica's certificates, which were not issued; this is a bug"
            ))
        })
    }

    fn member_id(&self, step: &Step) -> Result<u64> {
        self.progress.member_id.ok_or_else(|| {
            OpError::Other(format!(
                "the step {step:?} needs the replica's etcd member, and it has none"
            ))
        })
    }

    async fn step(&mut self, step: &Step) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        match step {
            Step::TakeBackup { change } => {
                // Boxed: the snapshot and upload futures are deep, and every apply's future holds this one.
                if let Some(taken) = Box::pin(super::backup::take(
                    ctx,
                    &self.progress.targets,
                    change,
                    deadline,
                ))
                .await?
                {
                    self.progress.last_backup = Some(taken.url);
                }
            }
            Step::RemoveStaleMember { name, id } => {
                tracing::info!("removing learner {name}, left by an interrupted join");
                ctx.etcd.remove_member(&self.progress.targets, *id).await?;
            }
            Step::AddLearner => {
                let me = self.me(step)?;
                // As Cluster API does before every membership change: the members are the replicas we know,
                // every member reports the same list, no alarms, no leftover learner.
                ctx.etcd
                    .preflight(&self.others(&me.name), &self.progress.targets)
                    .await?;
                let (added, all) = ctx
                    .etcd
                    .add_learner(
                        &self.progress.targets,
                        &peer_url(&me.internal_ip.to_string()),
                    )
                    .await?;
                tracing::info!(
                    "{} added to etcd as a learner ({} members now)",
                    me.name,
                    all.len()
                );
                self.progress.member_id = Some(added.id);
                self.progress.added_learner = Some(added.id);
                // The new member has no name until it starts: it is this replica.
                self.progress.initial_cluster = all
                    .iter()
                    .filter_map(|m| {
                        let name = if m.id == added.id {
                            me.name.clone()
                        } else {
                            m.name.clone()
                        };
                        Some((name, m.peer_ip()?))
                    })
                    .collect();
            }
            Step::AwaitCaughtUpAndPromote => {
                // Timed from the VM's creation: etcd's start, the leader's snapshot, the log (bench_backup reads it).
                let started = Instant::now();
                let me = self.me(step)?;
                let vm = self.current_vm(&me.name).await?;
                if let Some(t) = etcd_target(ctx, &vm)
                    && !self.progress.targets.contains(&t)
                {
                    self.progress.targets.push(t);
                }
                let id = self.member_id(step)?;
                let remaining = deadline.saturating_duration_since(Instant::now());
                ctx.etcd
                    .promote_when_caught_up(&self.progress.targets, id, remaining)
                    .await?;
                self.progress.added_learner = None;
                tracing::info!(
                    "{} learner caught up in {:.2?}, promoted to a voting member",
                    me.name,
                    started.elapsed()
                );
            }
            Step::MoveLeadership => {
                let me = self.me(step)?;
                hand_leadership_away(ctx, self.snap, &me.name).await?;
            }
            Step::RemoveMember { id } => {
                let me = self.me(step)?;
                // Through the members that stay: the leaving one may already be gone.
                let mine = self
                    .snap
                    .instances
                    .get(&me.name)
                    .and_then(|i| etcd_target(ctx, i));
                let survivors: Vec<EtcdTarget> = self
                    .progress
                    .targets
                    .iter()
                    .filter(|t| Some(*t) != mine.as_ref())
                    .cloned()
                    .collect();
                let via = if survivors.is_empty() {
                    &self.progress.targets
                } else {
                    &survivors
                };
                ctx.etcd.remove_member(via, *id).await?;
                tracing::info!("{} removed from etcd", me.name);
            }
            Step::AwaitMember => {
                // Timed from the VM's (re)creation: etcd's start on its data and the log it missed.
                let started = Instant::now();
                let me = self.me(step)?;
                let id = self.member_id(step)?;
                let target = self.running_target(&me.name).await?;
                let mut endpoints = self.progress.targets.clone();
                endpoints.retain(|t| t.server_name != me.name);
                endpoints.push(target);
                let remaining = deadline.saturating_duration_since(Instant::now());
                ctx.etcd.await_caught_up(&endpoints, id, remaining).await?;
                self.progress.targets = endpoints;
                tracing::info!(
                    "{}: etcd member healthy and caught up in {:.2?}",
                    me.name,
                    started.elapsed()
                );
            }
            Step::Soak => {
                let me = self.me(step)?;
                let id = self.member_id(step)?;
                self.soak(&me, id).await?;
            }
            Step::CreateFoundingInstance { with_static_ip }
            | Step::RestoreFromSnapshot { with_static_ip } => {
                let me = self.me(step)?;
                let external = if *with_static_ip {
                    ExternalIp::Static(spec.external_ip.clone())
                } else {
                    ExternalIp::Ephemeral
                };
                let restoring = matches!(step, Step::RestoreFromSnapshot { .. });
                let state = if restoring {
                    tracing::info!(
                        "{} creating its VM on a new data disk, restoring etcd from {}",
                        me.name,
                        self.progress
                            .restore
                            .as_ref()
                            .map_or("?", |r| r.url.as_str())
                    );
                    InitialState::RestoreFromSnapshot
                } else {
                    tracing::info!("{} creating the first master, which founds etcd", me.name);
                    InitialState::New
                };
                let vm = self
                    .create(
                        step,
                        &me,
                        external,
                        vec![(me.name.clone(), me.internal_ip)],
                        state,
                        true,
                    )
                    .await?;
                if *with_static_ip {
                    await_static_ip(ctx, deadline).await?;
                }
                if let Some(t) = etcd_target(ctx, &vm) {
                    self.progress.targets = vec![t];
                    self.progress.member_id = if restoring {
                        // etcd starts only once the snapshot is fetched and restored.
                        Some(self.await_sole_member(&me.name).await?)
                    } else {
                        ctx.etcd
                            .member_list(&self.progress.targets)
                            .await?
                            .iter()
                            .find(|m| m.name == me.name)
                            .map(|m| m.id)
                    };
                }
            }
            Step::CreateJoiningInstance => {
                let me = self.me(step)?;
                tracing::info!(
                    "{} creating its VM to join the existing etcd cluster",
                    me.name
                );
                let initial = self.progress.initial_cluster.clone();
                self.create(
                    step,
                    &me,
                    ExternalIp::Ephemeral,
                    initial,
                    InitialState::Existing,
                    true,
                )
                .await?;
            }
            Step::RebuildInstance | Step::RecoverAsSoleMember => {
                let me = self.me(step)?;
                self.progress.certs = Some(issue_certs(ctx, &me)?);
                // The only VM takes the static IP, unless a forwarding rule still holds it (a recovery: the
                // cluster's repair moves the IP once the API serves again).
                let alone = self.snap.instances.keys().all(|n| *n == me.name)
                    && !self.snap.observed.forwarding_rule;
                let external = if alone {
                    ExternalIp::Static(spec.external_ip.clone())
                } else {
                    ExternalIp::Ephemeral
                };
                let state = if *step == Step::RecoverAsSoleMember {
                    tracing::info!(
                        "{}: creating its VM again on its data disk with etcd forced to a one-member cluster",
                        me.name
                    );
                    InitialState::ForceNewCluster
                } else {
                    tracing::info!(
                        "{}: creating its VM again with the new settings on its data disk",
                        me.name
                    );
                    InitialState::Existing
                };
                let initial = self.progress.initial_cluster.clone();
                self.create(step, &me, external, initial, state, false)
                    .await?;
            }
            Step::GrowDataDisk => {
                let me = self.me(step)?;
                let gb = spec.data_disk_size_gb;
                tracing::info!("{}: growing its etcd data disk to {gb} GB", me.name);
                c.grow_disk(&me.zone, &data_disk_name(&me.name), gb, deadline)
                    .await?;
            }
            Step::StopInstance => {
                let me = self.me(step)?;
                tracing::info!("{}: stopping its VM to change its machine type", me.name);
                c.stop_instance(&me.zone, &me.name, deadline).await?;
            }
            Step::SetMachineType => {
                let me = self.me(step)?;
                tracing::info!("{}: machine type {}", me.name, spec.machine_type);
                c.set_machine_type(&me.zone, &me.name, &spec.machine_type, deadline)
                    .await?;
            }
            Step::StartInstance => {
                let me = self.me(step)?;
                tracing::info!("{}: starting its VM again", me.name);
                self.progress.instance =
                    Some(c.start_instance(&me.zone, &me.name, deadline).await?);
            }
            Step::DeleteInstance => {
                let me = self.me(step)?;
                tracing::info!("{} deleting its VM", me.name);
                c.delete_instance(&me.zone, &me.name, deadline).await?;
                self.progress.instance = None;
            }
            Step::DeleteDataDisk => {
                let me = self.me(step)?;
                let disk = data_disk_name(&me.name);
                if c.get_disk(&me.zone, &disk, deadline).await?.is_some() {
                    tracing::info!("{} deleting its etcd data disk {disk}", me.name);
                    c.delete_disk(&me.zone, &disk, deadline).await?;
                }
            }
            Step::MoveInternalAddress => {
                let me = self.me(step)?;
                let name = internal_address_name(&me.name);
                let want =
                    ha_domain::roll::subnetwork_name(spec.subnetwork.as_deref(), &spec.network);
                // A killed move may have released it already, or reserved it anew.
                if let Some(a) = c.get_address(&spec.region, &name, deadline).await?
                    && !matches!(&a.kind, AddressKind::Internal { subnetwork: Some(s) }
                        if ha_domain::roll::subnetwork_name(Some(s), &spec.network) == want)
                {
                    tracing::info!(
                        "{}: releasing its internal IP {} from its old subnetwork",
                        me.name,
                        a.ip
                    );
                    c.delete_address(&spec.region, &name, deadline).await?;
                }
                let a = c
                    .reserve_internal_address(
                        &spec.region,
                        &name,
                        spec.subnetwork.as_deref(),
                        &internal_address_description(&spec.name),
                        deadline,
                    )
                    .await?;
                let moved = ip(&a.ip, "the reserved internal address")?;
                tracing::info!("{}: internal IP {moved} in subnetwork {want}", me.name);
                self.progress.internal_ip = Some(moved);
                for (name, at) in &mut self.progress.initial_cluster {
                    if *name == me.name {
                        *at = moved;
                    }
                }
            }
            Step::UpdatePeerUrl => {
                let me = self.me(step)?;
                let id = self.member_id(step)?;
                let url = peer_url(&me.internal_ip.to_string());
                tracing::info!("{}: telling etcd its member's peer URL is {url}", me.name);
                // Through the replica's own etcd too: with one other member, only the two together have a leader.
                let mut endpoints = self.progress.targets.clone();
                endpoints.retain(|t| t.server_name != me.name);
                endpoints.push(self.running_target(&me.name).await?);
                let remaining = deadline.saturating_duration_since(Instant::now());
                ctx.etcd
                    .update_peer_url(&endpoints, id, &url, remaining.min(PEER_UPDATE_PATIENCE))
                    .await?;
                self.progress.targets = endpoints;
            }
            Step::ReleaseInternalAddress => {
                let me = self.me(step)?;
                c.delete_address(&spec.region, &internal_address_name(&me.name), deadline)
                    .await?;
            }
            Step::AttachEphemeralIp { to } => {
                tracing::info!(
                    "{}: giving {to} an ephemeral external IP again, which an interrupted IP move took away",
                    spec.name
                );
                c.swap_access_config(&self.zone_of(to), to, None, deadline)
                    .await?;
            }
            Step::CreateHealthCheck => {
                let mut hc = HealthCheckSpec::new(ctx.names.health_check.clone());
                hc.port = HEALTH_PORT;
                hc.request_path = "/healthz".into();
                c.ensure_http_health_check(&hc, deadline).await?;
            }
            Step::CreatePool { instances } => {
                tracing::info!("{}: creating the load balancer's target pool", spec.name);
                let pool = TargetPoolSpec {
                    name: ctx.names.target_pool.clone(),
                    region: spec.region.clone(),
                    health_check: Some(ctx.names.health_check.clone()),
                    instances: instances.iter().map(|n| self.instance_ref(n)).collect(),
                    description: Some(format!("API servers of {}", spec.name)),
                };
                c.ensure_target_pool(&pool, deadline).await?;
            }
            Step::AwaitApi => {
                let me = self.me(step)?;
                let vm = self.fresh_vm(&me.name).await?;
                self.api_serves(&me, &vm, deadline).await?;
                self.progress.instance = Some(vm);
            }
            Step::AddToPool => {
                let me = self.me(step)?;
                // Only once this replica's API server answers, so the LB never sends traffic to it early.
                if let Some(vm) = &self.progress.instance
                    && vm.external_ip.is_some()
                {
                    self.api_serves(&me, vm, deadline).await?;
                }
                tracing::info!("{} API server healthy, joining the load balancer", me.name);
                c.add_target_pool_instance(
                    &spec.region,
                    &ctx.names.target_pool,
                    &self.instance_ref(&me.name),
                    deadline,
                )
                .await?;
            }
            Step::RemoveFromPool => {
                let me = self.me(step)?;
                tracing::info!("{} leaving the load balancer", me.name);
                c.remove_target_pool_instance(
                    &spec.region,
                    &ctx.names.target_pool,
                    &self.instance_ref(&me.name),
                    deadline,
                )
                .await?;
                // The pool change takes a moment to reach every forwarder, and requests in flight must finish
                // before this replica's API server stops answering.
                tokio::time::sleep(ctx.drain_delay).await;
            }
            Step::AddPoolMember { name } => {
                tracing::info!("{}: putting {name} back into the load balancer", spec.name);
                c.add_target_pool_instance(
                    &spec.region,
                    &ctx.names.target_pool,
                    &self.instance_ref(name),
                    deadline,
                )
                .await?;
            }
            Step::RemovePoolMember { name } => {
                // Not a replica VM, so it is not in `instances`: the pool's own reference says its zone.
                let member = self
                    .snap
                    .pool_members
                    .iter()
                    .find(|r| &r.name == name)
                    .cloned()
                    .unwrap_or_else(|| self.instance_ref(name));
                tracing::info!(
                    "{}: removing {name}, which is not a replica VM, from the load balancer",
                    spec.name
                );
                c.remove_target_pool_instance(
                    &spec.region,
                    &ctx.names.target_pool,
                    &member,
                    deadline,
                )
                .await?;
            }
            Step::CreateForwardingRule => {
                let rule = ForwardingRuleSpec {
                    name: ctx.names.forwarding_rule.clone(),
                    region: spec.region.clone(),
                    ip_address: spec.external_ip.clone(),
                    port_range: format!("{0}-{0}", spec.api_port),
                    target_pool: ctx.names.target_pool.clone(),
                    description: Some(format!("API endpoint of {}", spec.name)),
                };
                c.ensure_forwarding_rule(&rule, deadline).await?;
                tracing::info!(
                    "{}: forwarding rule on the static IP, waiting for traffic to flow",
                    spec.name
                );
            }
            Step::DeleteForwardingRule => {
                tracing::info!("{}: deleting the forwarding rule", spec.name);
                c.delete_forwarding_rule(&spec.region, &ctx.names.forwarding_rule, deadline)
                    .await?;
            }
            Step::DeletePool => {
                c.delete_target_pool(&spec.region, &ctx.names.target_pool, deadline)
                    .await?;
            }
            Step::DeleteHealthCheck => {
                c.delete_http_health_check(&ctx.names.health_check, deadline)
                    .await?;
            }
            Step::DetachStaticIp { from } => {
                tracing::info!("moving the static IP off {from}, which gets an ephemeral IP");
                c.swap_access_config(&self.zone_of(from), from, None, deadline)
                    .await?;
            }
            Step::AttachStaticIp { to } => {
                tracing::info!("{}: giving the static IP to {to}", spec.name);
                c.swap_access_config(&self.zone_of(to), to, Some(&spec.external_ip), deadline)
                    .await?;
            }
            Step::AwaitEndpoint => {
                await_static_ip(ctx, deadline).await?;
            }
        }
        Ok(())
    }

    /// Creates the replica's VM (a new data disk when `joining`, its own otherwise) with its certificates.
    async fn create(
        &mut self,
        step: &Step,
        me: &Replica,
        external: ExternalIp,
        initial_cluster: Vec<(String, Ipv4Addr)>,
        state: InitialState,
        joining: bool,
    ) -> Result<InstanceInfo> {
        let certs = self.certs(step)?;
        let who = Identity {
            name: &me.name,
            zone: &me.zone,
            internal_ip: me.internal_ip,
            certs,
        };
        let mut cfg = master_config(self.ctx, &who, initial_cluster, state);
        if state == InitialState::RestoreFromSnapshot {
            cfg.restore = Some(self.progress.restore.clone().ok_or_else(|| {
                OpError::Other(format!("{step:?} without a snapshot to restore"))
            })?);
        }
        let vm = create_instance(
            self.ctx,
            &who,
            &me.labels,
            external,
            &cfg,
            joining,
            self.deadline,
        )
        .await?;
        self.progress.instance = Some(vm.clone());
        Ok(vm)
    }

    /// The member of a VM that restores a snapshot, once its etcd answers: the restore runs before etcd starts,
    /// so this waits (until the run's deadline) where a founding member answers at once.
    async fn await_sole_member(&self, name: &str) -> Result<u64> {
        let mut last = String::from("no answer yet");
        while Instant::now() < self.deadline {
            match self.ctx.etcd.member_list(&self.progress.targets).await {
                Ok(members) => match members.iter().find(|m| m.name == name) {
                    Some(m) => return Ok(m.id),
                    None => last = format!("etcd lists no member named {name}"),
                },
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(POLL).await;
        }
        Err(OpError::Other(format!(
            "{name}'s etcd did not answer after restoring the snapshot (last: {last}); its VM's serial console and the etcd pod's init containers (fetch-snapshot, restore-snapshot) say why"
        )))
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
        loop {
            let vm = self.fresh_vm(name).await?;
            if vm.status == "RUNNING"
                && let Some(t) = etcd_target(self.ctx, &vm)
            {
                return Ok(t);
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

    /// The replica's own API server answers `/healthz` over TLS at the VM's external IP (verified against the
    /// cluster CA for its internal IP) by `until`.
    async fn api_serves(&self, me: &Replica, vm: &InstanceInfo, until: Instant) -> Result<()> {
        let spec = &self.ctx.spec;
        let ext = vm
            .external_ip
            .as_deref()
            .ok_or_else(|| OpError::Other(format!("replica {} has no external IP", me.name)))?;
        await_serving(
            &spec.cas.cluster_ca.cert_pem,
            IpAddr::V4(ip(ext, "the replica's external IP")?),
            IpAddr::V4(me.internal_ip),
            spec.api_port,
            until,
        )
        .await?;
        Ok(())
    }

    /// SOAK_CHECKS consecutive rounds, `roll_soak` apart in all, in which the member is healthy and the
    /// replica's API serves; a failure starts the count again, until the deadline.
    async fn soak(&self, me: &Replica, member_id: u64) -> Result<()> {
        let ctx = self.ctx;
        let interval = ctx.roll_soak / SOAK_CHECKS;
        let mut good = 0;
        let mut last = String::new();
        while good < SOAK_CHECKS {
            if Instant::now() >= self.deadline {
                return Err(OpError::Other(format!(
                    "replica {} did not stay healthy after its roll (last: {last}); the next apply checks it again",
                    me.name
                )));
            }
            tokio::time::sleep(interval).await;
            let vm = self.fresh_vm(&me.name).await?;
            let member_ok = match etcd_target(ctx, &vm) {
                Some(t) => ctx
                    .etcd
                    .health(std::slice::from_ref(&t))
                    .await
                    .first()
                    .is_some_and(|h| {
                        h.health.is_healthy() && h.health.member_id() == Some(member_id)
                    }),
                None => false,
            };
            let quick = (Instant::now() + Duration::from_secs(5)).min(self.deadline);
            let api_ok = self.api_serves(me, &vm, quick).await.is_ok();
            if member_ok && api_ok {
                good += 1;
            } else {
                good = 0;
                last = format!("etcd member healthy: {member_ok}, API serving: {api_ok}");
            }
        }
        Ok(())
    }
}

/// If `name`'s member leads etcd, hands leadership to another voter first, so its going away costs no election.
/// Best effort on the asking side: a member that does not answer is not leading anyone.
async fn hand_leadership_away(ctx: &ClusterCtx, snap: &Snapshot, name: &str) -> Result<()> {
    let Some(me) = snap.member_named(name) else {
        return Ok(());
    };
    let Some(target) = snap.instances.get(name).and_then(|i| etcd_target(ctx, i)) else {
        return Ok(());
    };
    let Ok(status) = ctx.etcd.status(&target).await else {
        return Ok(());
    };
    if status.leader_id == me.id
        && let Some(next) = snap.members.iter().find(|m| m.id != me.id && !m.is_learner)
    {
        tracing::info!("{name} leads etcd, handing leadership to {}", next.name);
        ctx.etcd.move_leader(&snap.targets, next.id).await?;
    }
    Ok(())
}

pub fn ip(s: &str, what: &str) -> Result<Ipv4Addr> {
    s.parse()
        .map_err(|_| OpError::Other(format!("{what} {s:?} is not an IPv4 address")))
}

/// The replica's certificates, from the cluster's CAs: they name its internal IP, the static IP, the first
/// service IP and the DNS domain.
pub fn issue_certs(ctx: &ClusterCtx, me: &Replica) -> Result<ReplicaCerts> {
    let spec = &ctx.spec;
    Ok(pki::issue_replica_certs(
        &spec.cas,
        &ReplicaCertRequest {
            name: me.name.clone(),
            internal_ip: me.internal_ip,
            static_ip: ip(&spec.external_ip, "the cluster's external IP")?,
            first_service_ip: master::first_service_ip(&spec.service_range),
            dns_domain: spec.dns_domain.clone(),
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
