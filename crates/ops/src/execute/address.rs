//! Steps that move the static IP between a VM's access config and the forwarding rule, and the wait for it to serve.

use super::*;

impl Run<'_> {
    /// `ClusterStep::AttachEphemeralIp`.
    pub(super) async fn attach_ephemeral_ip(&mut self, to: &str) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        tracing::info!(
            "{}: giving {to} an ephemeral external IP again, which an interrupted IP move took away",
            spec.name
        );
        c.swap_access_config(&self.zone_of(to), to, None, deadline)
            .await?;
        Ok(())
    }

    /// `ClusterStep::DetachStaticIp`.
    pub(super) async fn detach_static_ip(&mut self, from: &str) -> Result<()> {
        let ctx = self.ctx;
        let c = &ctx.compute;
        let deadline = self.deadline;
        tracing::info!("moving the static IP off {from}, which gets an ephemeral IP");
        c.swap_access_config(&self.zone_of(from), from, None, deadline)
            .await?;
        Ok(())
    }

    /// `ClusterStep::AttachStaticIp`.
    pub(super) async fn attach_static_ip(&mut self, to: &str) -> Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let c = &ctx.compute;
        let deadline = self.deadline;
        tracing::info!("{}: giving the static IP to {to}", spec.name);
        c.swap_access_config(&self.zone_of(to), to, Some(&spec.external_ip), deadline)
            .await?;
        Ok(())
    }

    /// `ClusterStep::AwaitEndpoint`.
    pub(super) async fn await_endpoint(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let deadline = self.deadline;
        await_static_ip(ctx, deadline).await?;
        Ok(())
    }
}
