//! Steps on etcd: a backup first, membership (learner, promotion, removal, leadership, peer URL) and the
//! waits that follow a member's start.

use super::*;

impl Run<'_> {
    /// `ClusterStep::TakeBackup`.
    pub(super) async fn take_backup(&mut self, change: &str) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        // Boxed: the snapshot and upload futures are deep, and every apply's future holds this one.
        if let Some(taken) = Box::pin(crate::backup::take(
            ctx,
            &self.progress.targets,
            change,
            deadline,
        ))
        .await?
        {
            self.progress.last_backup = Some(taken.url);
        }
        Ok(())
    }

    /// `ClusterStep::RemoveStaleMember`.
    pub(super) async fn remove_stale_member(&mut self, name: &str, id: &u64) -> Result<()> {
        let ctx = self.ctx;
        tracing::info!("removing learner {name}, left by a join that did not finish");
        ctx.etcd.remove_member(&self.progress.targets, *id).await?;
        Ok(())
    }
}

impl ReplicaRun<'_> {
    /// `ReplicaStep::AddLearner`.
    pub(super) async fn add_learner(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let me = self.me();
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
        Ok(())
    }

    /// `ReplicaStep::AwaitCaughtUpAndPromote`.
    pub(super) async fn await_caught_up_and_promote(&mut self, step: &ReplicaStep) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        // Timed from the VM's creation: etcd's start, the leader's snapshot, the log (bench_backup reads it).
        let started = Instant::now();
        let me = self.me();
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
        Ok(())
    }

    /// `ReplicaStep::MoveLeadership`.
    pub(super) async fn move_leadership(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let me = self.me();
        hand_leadership_away(ctx, self.snap, &me.name).await?;
        Ok(())
    }

    /// `ReplicaStep::RemoveMember`.
    pub(super) async fn remove_member(&mut self, id: &u64) -> Result<()> {
        let ctx = self.ctx;
        let me = self.me();
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
        Ok(())
    }

    /// `ReplicaStep::AwaitMember`.
    pub(super) async fn await_member(&mut self, step: &ReplicaStep) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        // Timed from the VM's (re)creation: etcd's start on its data and the log it missed.
        let started = Instant::now();
        let me = self.me();
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
        Ok(())
    }

    /// `ReplicaStep::AwaitRestarted`: the VM runs, then its own member answers healthy, then the static IP
    /// serves if the VM holds it. The VM as it then runs is kept for the steps after (its new ephemeral IP).
    pub(super) async fn await_restarted(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        let me = self.me();
        let (vm, target) = self.running_vm(&me.name).await?;
        loop {
            let health = ctx.etcd.health(std::slice::from_ref(&target)).await;
            let last = match health.first().map(|h| &h.health) {
                Some(h) if h.is_healthy() => break,
                Some(ha_etcd::Health::Unhealthy { reason, .. }) => reason.clone(),
                Some(ha_etcd::Health::Unreachable { reason }) => reason.clone(),
                _ => "no answer".to_string(),
            };
            if Instant::now() >= deadline {
                return Err(OpError::Other(format!(
                    "replica {} runs again but its etcd member did not become healthy in time (last: {last}). If it cannot recover, replace the replica (`terraform apply -replace=...`).",
                    me.name
                )));
            }
            tokio::time::sleep(POLL).await;
        }
        tracing::info!("{} runs again and its etcd member is healthy", me.name);
        if vm.external_ip.as_deref() == Some(ctx.spec.external_ip.as_str()) {
            await_static_ip(ctx, deadline).await?;
        }
        self.progress.instance = Some(vm);
        Ok(())
    }

    /// `ReplicaStep::Soak`.
    pub(super) async fn soak_member(&mut self, step: &ReplicaStep) -> Result<()> {
        let me = self.me();
        let id = self.member_id(step)?;
        self.soak(&me, id).await?;
        Ok(())
    }

    /// `ReplicaStep::UpdatePeerUrl`.
    pub(super) async fn update_peer_url(&mut self, step: &ReplicaStep) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        let me = self.me();
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
