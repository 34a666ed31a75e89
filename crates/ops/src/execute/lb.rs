//! Steps on the load balancer (health check, target pool, forwarding rule) and a replica's place behind it.

use super::*;

impl Run<'_> {
    /// `ClusterStep::CreateHealthCheck`.
    pub(super) async fn create_health_check(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let mut hc = HealthCheckSpec::new(ctx.names.health_check.clone());
        hc.port = HEALTH_PORT;
        hc.request_path = "/healthz".into();
        c.ensure_http_health_check(&hc, deadline).await?;
        Ok(())
    }

    /// `ClusterStep::CreatePool`.
    pub(super) async fn create_pool(&mut self, instances: &[String]) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        tracing::info!("{}: creating the load balancer's target pool", spec.name);
        let pool = TargetPoolSpec {
            name: ctx.names.target_pool.clone(),
            region: spec.region.clone(),
            health_check: Some(ctx.names.health_check.clone()),
            instances: instances.iter().map(|n| self.instance_ref(n)).collect(),
            description: Some(format!("API servers of {}", spec.name)),
        };
        c.ensure_target_pool(&pool, deadline).await?;
        Ok(())
    }

    /// `ClusterStep::AddPoolMember`.
    pub(super) async fn add_pool_member(&mut self, name: &str) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        tracing::info!("{}: putting {name} back into the load balancer", spec.name);
        c.add_target_pool_instance(
            &spec.region,
            &ctx.names.target_pool,
            &self.instance_ref(name),
            deadline,
        )
        .await?;
        Ok(())
    }

    /// `ClusterStep::RemovePoolMember`.
    pub(super) async fn remove_pool_member(&mut self, name: &str) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        // Not a replica VM, so it is not in `instances`: the pool's own reference says its zone.
        let member = self
            .snap
            .pool_members
            .iter()
            .find(|r| r.name == name)
            .cloned()
            .unwrap_or_else(|| self.instance_ref(name));
        tracing::info!(
            "{}: removing {name}, which is not a replica VM, from the load balancer",
            spec.name
        );
        c.remove_target_pool_instance(&spec.region, &ctx.names.target_pool, &member, deadline)
            .await?;
        Ok(())
    }

    /// `ClusterStep::CreateForwardingRule`.
    pub(super) async fn create_forwarding_rule(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let rule = ForwardingRuleSpec {
            name: ctx.names.forwarding_rule.clone(),
            region: spec.region.clone(),
            ip_address: spec.external_ip.clone(),
            port_range: format!("{0}-{0}", spec.master.api_port),
            target_pool: ctx.names.target_pool.clone(),
            description: Some(format!("API endpoint of {}", spec.name)),
        };
        c.ensure_forwarding_rule(&rule, deadline).await?;
        tracing::info!(
            "{}: forwarding rule on the static IP, waiting for traffic to flow",
            spec.name
        );
        Ok(())
    }

    /// `ClusterStep::DeleteForwardingRule`.
    pub(super) async fn delete_forwarding_rule(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        tracing::info!("{}: deleting the forwarding rule", spec.name);
        c.delete_forwarding_rule(&spec.region, &ctx.names.forwarding_rule, deadline)
            .await?;
        Ok(())
    }

    /// `ClusterStep::DeletePool`.
    pub(super) async fn delete_pool(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        c.delete_target_pool(&spec.region, &ctx.names.target_pool, deadline)
            .await?;
        Ok(())
    }

    /// `ClusterStep::DeleteHealthCheck`.
    pub(super) async fn delete_health_check(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let c = &ctx.compute;
        let deadline = self.deadline;
        c.delete_http_health_check(&ctx.names.health_check, deadline)
            .await?;
        Ok(())
    }
}

impl ReplicaRun<'_> {
    /// `ReplicaStep::AwaitApi`.
    pub(super) async fn await_api(&mut self) -> Result<()> {
        let deadline = self.deadline;
        let me = self.me();
        let vm = self.fresh_vm(&me.name).await?;
        self.api_serves(&me, &vm, deadline).await?;
        self.progress.instance = Some(vm);
        Ok(())
    }

    /// `ReplicaStep::AddToPool`.
    pub(super) async fn add_to_pool(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
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
        Ok(())
    }

    /// `ReplicaStep::RemoveFromPool`.
    pub(super) async fn remove_from_pool(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        let me = self.me();
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
        Ok(())
    }

    /// The replica's own API server answers `/healthz` over TLS at the VM's external IP (verified against the
    /// cluster CA for its internal IP) by `until`.
    pub(super) async fn api_serves(
        &self,
        me: &Replica,
        vm: &InstanceInfo,
        until: Instant,
    ) -> Result<()> {
        let spec = &self.ctx.spec;
        let cas = spec.trusted_cas()?;
        await_serving(
            &own_api(me, vm, &cas.cluster_ca, spec.master.api_port)?,
            until,
        )
        .await?;
        Ok(())
    }
}
