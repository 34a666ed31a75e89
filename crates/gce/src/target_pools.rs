//! Target pools: the members of the kube-up style external load balancer, their health as it sees them.

use super::Compute;
use super::error::{Error, Result, last_segment};
use super::types::*;
use google_cloud_compute_v1::model::{
    InstanceReference, TargetPool, TargetPoolsAddInstanceRequest, TargetPoolsRemoveInstanceRequest,
};
use google_cloud_gax::options::RequestOptionsBuilder;
use tokio::time::Instant;

/// `…/zones/z/instances/i` → InstanceRef.
pub(crate) fn instance_ref(url: &str) -> InstanceRef {
    let parts: Vec<&str> = url.trim_end_matches('/').rsplit('/').collect();
    InstanceRef {
        name: parts.first().copied().unwrap_or_default().to_string(),
        zone: parts.get(2).copied().unwrap_or_default().to_string(),
    }
}

fn pool_info(region: &str, p: &TargetPool) -> TargetPoolInfo {
    TargetPoolInfo {
        name: p.name.clone().unwrap_or_default(),
        region: region.to_string(),
        self_link: p.self_link.clone().unwrap_or_default(),
        instances: p.instances.iter().map(|u| instance_ref(u)).collect(),
        health_checks: p
            .health_checks
            .iter()
            .map(|h| last_segment(h).to_string())
            .collect(),
    }
}

impl Compute {
    pub(crate) fn pool_rel(&self, region: &str, name: &str) -> String {
        format!(
            "target pool {}",
            self.rel(&format!("regions/{region}/targetPools/{name}"))
        )
    }

    fn instance_partial(&self, r: &InstanceRef) -> String {
        self.rel(&format!("zones/{}/instances/{}", r.zone, r.name))
    }

    /// Creates the pool if absent (with its health check and initial instances); an existing one must use the
    /// same health check. Membership of an existing pool is left alone: use add/remove for that.
    pub async fn ensure_target_pool(
        &self,
        spec: &TargetPoolSpec,
        deadline: Instant,
    ) -> Result<TargetPoolInfo> {
        let project = self.project()?;
        let resource = self.pool_rel(&spec.region, &spec.name);
        let mut body = TargetPool::new();
        body.name = Some(spec.name.clone());
        body.description = spec.description.clone();
        body.health_checks = spec
            .health_check
            .iter()
            .map(|h| self.global_ref("httpHealthChecks", h))
            .collect();
        body.instances = spec
            .instances
            .iter()
            .map(|r| self.instance_partial(r))
            .collect();
        match self
            .mutate(&resource, "insert", deadline, |rid| {
                self.clients
                    .target_pools
                    .insert()
                    .set_project(project)
                    .set_region(&spec.region)
                    .set_body(body.clone())
                    .set_request_id(rid)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await
        {
            Ok(_) | Err(Error::Api { status: 409, .. }) => {}
            Err(e) => return Err(e),
        }
        let have = self
            .get_target_pool(&spec.region, &spec.name, deadline)
            .await?
            .ok_or_else(|| Error::NotFound {
                resource: resource.clone(),
            })?;
        let want_hc: Vec<String> = spec
            .health_check
            .iter()
            .map(|h| last_segment(h).to_string())
            .collect();
        if have.health_checks != want_hc {
            return Err(Error::Conflict {
                resource,
                detail: format!("health checks {:?} (want {want_hc:?})", have.health_checks),
            });
        }
        Ok(have)
    }

    pub async fn get_target_pool(
        &self,
        region: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<TargetPoolInfo>> {
        let project = self.project()?;
        let resource = self.pool_rel(region, name);
        let got = self
            .read_opt(&resource, deadline, || {
                self.clients
                    .target_pools
                    .get()
                    .set_project(project)
                    .set_region(region)
                    .set_target_pool(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got.map(|p| pool_info(region, &p)))
    }

    /// Adds an instance to the pool (already a member = no call).
    pub async fn add_target_pool_instance(
        &self,
        region: &str,
        pool: &str,
        instance: &InstanceRef,
        deadline: Instant,
    ) -> Result<()> {
        self.change_membership(region, pool, instance, true, deadline)
            .await
    }

    /// Removes an instance from the pool (not a member = no call).
    pub async fn remove_target_pool_instance(
        &self,
        region: &str,
        pool: &str,
        instance: &InstanceRef,
        deadline: Instant,
    ) -> Result<()> {
        self.change_membership(region, pool, instance, false, deadline)
            .await
    }

    async fn change_membership(
        &self,
        region: &str,
        pool: &str,
        instance: &InstanceRef,
        add: bool,
        deadline: Instant,
    ) -> Result<()> {
        let project = self.project()?;
        let resource = self.pool_rel(region, pool);
        let now = self
            .get_target_pool(region, pool, deadline)
            .await?
            .ok_or_else(|| Error::NotFound {
                resource: resource.clone(),
            })?;
        if now.instances.contains(instance) == add {
            return Ok(());
        }
        let mut reference = InstanceReference::new();
        reference.instance = Some(self.instance_partial(instance));
        let action = if add { "addInstance" } else { "removeInstance" };
        self.mutate(&resource, action, deadline, |rid| {
            let pool_call = self.clients.target_pools.clone();
            let reference = reference.clone();
            let rid = rid.clone();
            async move {
                if add {
                    let mut body = TargetPoolsAddInstanceRequest::new();
                    body.instances = vec![reference];
                    pool_call
                        .add_instance()
                        .set_project(project)
                        .set_region(region)
                        .set_target_pool(pool)
                        .set_body(body)
                        .set_request_id(rid)
                        .with_user_agent(self.user_agent())
                        .send()
                        .await
                } else {
                    let mut body = TargetPoolsRemoveInstanceRequest::new();
                    body.instances = vec![reference];
                    pool_call
                        .remove_instance()
                        .set_project(project)
                        .set_region(region)
                        .set_target_pool(pool)
                        .set_body(body)
                        .set_request_id(rid)
                        .with_user_agent(self.user_agent())
                        .send()
                        .await
                }
            }
        })
        .await?;
        Ok(())
    }

    /// The load balancer's view of one member: one entry per forwarding rule that targets the pool.
    pub async fn target_pool_health(
        &self,
        region: &str,
        pool: &str,
        instance: &InstanceRef,
        deadline: Instant,
    ) -> Result<Vec<InstanceHealth>> {
        let project = self.project()?;
        let resource = self.pool_rel(region, pool);
        let mut reference = InstanceReference::new();
        reference.instance = Some(self.instance_partial(instance));
        let got = self
            .attempt(&resource, "getHealth", deadline, || {
                self.clients
                    .target_pools
                    .get_health()
                    .set_project(project)
                    .set_region(region)
                    .set_target_pool(pool)
                    .set_body(reference.clone())
                    // getHealth is a read sent as POST; retrying it is safe.
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got
            .health_status
            .iter()
            .map(|h| InstanceHealth {
                instance: h
                    .instance
                    .as_deref()
                    .map(instance_ref)
                    .unwrap_or_else(|| instance.clone()),
                state: h
                    .health_state
                    .as_ref()
                    .and_then(|s| s.name())
                    .unwrap_or("UNKNOWN")
                    .to_string(),
                ip_address: h.ip_address.clone(),
                port: h.port,
            })
            .collect())
    }

    pub async fn delete_target_pool(
        &self,
        region: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<()> {
        let project = self.project()?;
        let resource = self.pool_rel(region, name);
        self.delete_idempotent(&resource, deadline, |rid| {
            self.clients
                .target_pools
                .delete()
                .set_project(project)
                .set_region(region)
                .set_target_pool(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_urls_parse() {
        let r = instance_ref("http://h/compute/v1/projects/p/zones/us-central1-a/instances/m-1");
        assert_eq!((r.zone.as_str(), r.name.as_str()), ("us-central1-a", "m-1"));
    }
}
