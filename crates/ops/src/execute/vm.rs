//! Steps on a replica's VM, its etcd data disk and its reserved internal address.

use super::*;

impl ReplicaRun<'_> {
    /// `ReplicaStep::CreateFoundingInstance` and `ReplicaStep::RestoreFromSnapshot`.
    pub(super) async fn create_founding_or_restored_instance(
        &mut self,
        step: &ReplicaStep,
        with_static_ip: &bool,
    ) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let deadline = self.deadline;
        let me = self.me();
        let external = if *with_static_ip {
            ExternalIp::Static(spec.external_ip.clone())
        } else {
            ExternalIp::Ephemeral
        };
        let restoring = matches!(step, ReplicaStep::RestoreFromSnapshot { .. });
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
            // Poll until etcd lists the member: a restored etcd starts only once the snapshot is fetched and
            // restored, and a founding VM without the static IP (the load balancer still holds it, as when a
            // cluster that lost every VM starts again) was awaited by nothing else: its etcd is still booting.
            self.progress.member_id = Some(self.await_sole_member(&me.name, restoring).await?);
        }
        Ok(())
    }

    /// `ReplicaStep::CreateJoiningInstance`.
    pub(super) async fn create_joining_instance(&mut self, step: &ReplicaStep) -> Result<()> {
        let me = self.me();
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
        Ok(())
    }

    /// `ReplicaStep::RebuildInstance` and `ReplicaStep::RecoverAsSoleMember`.
    pub(super) async fn rebuild_instance(&mut self, step: &ReplicaStep) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let me = self.me();
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
        let state = if *step == ReplicaStep::RecoverAsSoleMember {
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
        Ok(())
    }

    /// `ReplicaStep::GrowDataDisk`.
    pub(super) async fn grow_data_disk(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
        let gb = spec.master.data_disk_size_gb;
        tracing::info!("{}: growing its etcd data disk to {gb} GB", me.name);
        c.grow_disk(&me.zone, &data_disk_name(&me.name), gb, deadline)
            .await?;
        Ok(())
    }

    /// `ReplicaStep::StopInstance`.
    pub(super) async fn stop_instance(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
        tracing::info!("{}: stopping its VM to change its machine type", me.name);
        c.stop_instance(&me.zone, &me.name, deadline).await?;
        Ok(())
    }

    /// `ReplicaStep::SetMachineType`.
    pub(super) async fn set_machine_type(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
        tracing::info!("{}: machine type {}", me.name, spec.master.machine_type);
        c.set_machine_type(&me.zone, &me.name, &spec.master.machine_type, deadline)
            .await?;
        Ok(())
    }

    /// `ReplicaStep::StartInstance`.
    pub(super) async fn start_instance(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
        tracing::info!("{}: starting its VM again", me.name);
        self.progress.instance = Some(c.start_instance(&me.zone, &me.name, deadline).await?);
        Ok(())
    }

    /// `ReplicaStep::WriteMetadata`.
    pub(super) async fn write_metadata(&mut self, items: &MetadataItems) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        let me = self.me();
        tracing::info!("{}: writing its metadata back over a hand edit", me.name);
        let items: Vec<(String, String)> = items
            .0
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.progress.instance = Some(
            ctx.compute
                .set_metadata(&me.zone, &me.name, &items, deadline)
                .await?,
        );
        Ok(())
    }

    /// `ReplicaStep::LabelVm`: no call when the VM as last seen already carries the labels.
    pub(super) async fn label_vm(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        let me = self.me();
        let mut want = crate::build::vm_labels(ctx, &me.labels);
        // The window this change measured, else the one the VM carries: the next roll is judged by it.
        use ha_domain::disruption::{WINDOW_LABEL, label_value};
        let carried = self
            .progress
            .instance
            .as_ref()
            .and_then(|i| i.labels.get(WINDOW_LABEL));
        if let Some(window) = self.progress.window.map(label_value).or(carried.cloned()) {
            want.insert(WINDOW_LABEL.into(), window);
        }
        if self
            .progress
            .instance
            .as_ref()
            .is_some_and(|i| i.labels == want)
        {
            return Ok(());
        }
        self.progress.instance = Some(
            ctx.compute
                .set_labels(&me.zone, &me.name, &want, deadline)
                .await?,
        );
        Ok(())
    }

    /// `ReplicaStep::DeleteInstance`.
    pub(super) async fn delete_instance(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
        tracing::info!("{} deleting its VM", me.name);
        c.delete_instance(&me.zone, &me.name, deadline).await?;
        self.progress.instance = None;
        Ok(())
    }

    /// `ReplicaStep::DeleteDataDisk`.
    pub(super) async fn delete_data_disk(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
        let disk = data_disk_name(&me.name);
        if c.get_disk(&me.zone, &disk, deadline).await?.is_some() {
            tracing::info!("{} deleting its etcd data disk {disk}", me.name);
            c.delete_disk(&me.zone, &disk, deadline).await?;
        }
        Ok(())
    }

    /// `ReplicaStep::MoveInternalAddress`.
    pub(super) async fn move_internal_address(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
        let name = internal_address_name(&me.name);
        let want = ha_domain::roll::subnetwork_name(
            spec.master.subnetwork.as_deref(),
            &spec.master.network,
        );
        // A killed move may have released it already, or reserved it anew.
        if let Some(a) = c.get_address(&spec.region, &name, deadline).await?
            && !matches!(&a.kind, AddressKind::Internal { subnetwork: Some(s) }
                if ha_domain::roll::subnetwork_name(Some(s), &spec.master.network) == want)
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
                spec.master.subnetwork.as_deref(),
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
        Ok(())
    }

    /// `ReplicaStep::ReleaseInternalAddress`.
    pub(super) async fn release_internal_address(&mut self) -> Result<()> {
        let me = self.me();
        self.release_internal_address_of(&me.name).await
    }

    /// Creates the replica's VM (a new data disk when `joining`, its own otherwise) with its certificates.
    pub(super) async fn create(
        &mut self,
        step: &ReplicaStep,
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
        let secrets_key = self.ctx.secrets_keys().await?;
        let mut cfg = master_config(self.ctx, &who, initial_cluster, state, secrets_key)?;
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
    pub(super) async fn await_sole_member(&self, name: &str, restoring: bool) -> Result<u64> {
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
        Err(OpError::Other(if restoring {
            format!(
                "{name}'s etcd did not answer after restoring the snapshot (last: {last}); its VM's serial console and the etcd pod's init containers (fetch-snapshot, restore-snapshot) say why"
            )
        } else {
            format!(
                "{name}'s etcd did not answer after its VM was created to found the cluster (last: {last}); its VM's serial console says why"
            )
        }))
    }
}

impl Run<'_> {
    /// `ClusterStep::ReserveAddressOf`: reserving an address that exists returns it (`ha_gce`'s reserve is
    /// idempotent by name), so a join that died after reserving finds its IP again.
    pub(super) async fn reserve_internal_address_of(&mut self, replica: &str) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let address = ctx
            .compute
            .reserve_internal_address(
                &spec.region,
                &internal_address_name(replica),
                spec.master.subnetwork.as_deref(),
                &internal_address_description(&spec.name),
                self.deadline,
            )
            .await?;
        self.progress.internal_ip = Some(ip(&address.ip, "the reserved internal address")?);
        Ok(())
    }

    /// `ClusterStep::ReleaseAddressOf`, and the replica's own release: `<replica>-int`, if still reserved.
    pub(super) async fn release_internal_address_of(&mut self, replica: &str) -> Result<()> {
        let ctx = self.ctx;
        ctx.compute
            .delete_address(
                &ctx.spec.region,
                &internal_address_name(replica),
                self.deadline,
            )
            .await?;
        Ok(())
    }
}
