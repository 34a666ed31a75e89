//! The front of the external load balancer: a legacy HTTP health check (target pools accept only those) and a
//! regional forwarding rule on the cluster's static IP.

use super::Compute;
use super::error::{Error, Result, last_segment};
use super::types::*;
use google_cloud_compute_v1::model::{ForwardingRule, HttpHealthCheck};
use google_cloud_gax::options::RequestOptionsBuilder;
use tokio::time::Instant;

fn rule_info(region: &str, f: &ForwardingRule) -> ForwardingRuleInfo {
    ForwardingRuleInfo {
        name: f.name.clone().unwrap_or_default(),
        region: region.to_string(),
        ip_address: f.ip_address.clone().unwrap_or_default(),
        port_range: f.port_range.clone().unwrap_or_default(),
        target_pool: f
            .target
            .as_deref()
            .map(last_segment)
            .unwrap_or_default()
            .to_string(),
        self_link: f.self_link.clone().unwrap_or_default(),
    }
}

/// `"443"` and `"443-443"` are the same range to GCE.
fn same_ports(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let (x, y) = s.split_once('-').unwrap_or((s, s));
        (x.trim().to_string(), y.trim().to_string())
    };
    norm(a) == norm(b)
}

impl Compute {
    fn hc_rel(&self, name: &str) -> String {
        format!(
            "HTTP health check {}",
            self.rel(&format!("global/httpHealthChecks/{name}"))
        )
    }

    fn rule_rel(&self, region: &str, name: &str) -> String {
        format!(
            "forwarding rule {}",
            self.rel(&format!("regions/{region}/forwardingRules/{name}"))
        )
    }

    /// Creates the health check if absent; an existing one must probe the same port and path.
    pub async fn ensure_http_health_check(
        &self,
        spec: &HealthCheckSpec,
        deadline: Instant,
    ) -> Result<String> {
        let project = self.project()?;
        let resource = self.hc_rel(&spec.name);
        let mut body = HttpHealthCheck::new();
        body.name = Some(spec.name.clone());
        body.port = Some(i32::from(spec.port));
        body.request_path = Some(spec.request_path.clone());
        body.check_interval_sec = Some(spec.check_interval_sec);
        body.timeout_sec = Some(spec.timeout_sec);
        body.healthy_threshold = Some(spec.healthy_threshold);
        body.unhealthy_threshold = Some(spec.unhealthy_threshold);
        body.description = spec.description.clone();
        match self
            .mutate(&resource, "insert", deadline, |rid| {
                self.clients
                    .http_health_checks
                    .insert()
                    .set_project(project)
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
            .attempt(&resource, "get", deadline, || {
                self.clients
                    .http_health_checks
                    .get()
                    .set_project(project)
                    .set_http_health_check(&spec.name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        if have.port != body.port || have.request_path != body.request_path {
            return Err(Error::Conflict {
                resource,
                detail: format!(
                    "it probes port {:?} path {:?} (want {} {})",
                    have.port, have.request_path, spec.port, spec.request_path
                ),
            });
        }
        Ok(have.self_link.unwrap_or_default())
    }

    /// Whether the legacy HTTP health check `name` exists.
    pub async fn http_health_check_exists(&self, name: &str, deadline: Instant) -> Result<bool> {
        let project = self.project()?;
        let resource = self.hc_rel(name);
        let got = self
            .read_opt(&resource, deadline, || {
                self.clients
                    .http_health_checks
                    .get()
                    .set_project(project)
                    .set_http_health_check(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got.is_some())
    }

    pub async fn delete_http_health_check(&self, name: &str, deadline: Instant) -> Result<()> {
        let project = self.project()?;
        let resource = self.hc_rel(name);
        self.delete_idempotent(&resource, deadline, |rid| {
            self.clients
                .http_health_checks
                .delete()
                .set_project(project)
                .set_http_health_check(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await
    }

    /// Creates the rule if absent; an existing one must have the same IP, ports and target pool.
    pub async fn ensure_forwarding_rule(
        &self,
        spec: &ForwardingRuleSpec,
        deadline: Instant,
    ) -> Result<ForwardingRuleInfo> {
        let project = self.project()?;
        let resource = self.rule_rel(&spec.region, &spec.name);
        let mut body = ForwardingRule::new();
        body.name = Some(spec.name.clone());
        body.description = spec.description.clone();
        body.ip_address = Some(spec.ip_address.clone());
        body.ip_protocol = Some("TCP".into());
        body.port_range = Some(spec.port_range.clone());
        body.load_balancing_scheme = Some("EXTERNAL".into());
        body.target = Some(self.regional_ref(&spec.region, "targetPools", &spec.target_pool));
        match self
            .mutate(&resource, "insert", deadline, |rid| {
                self.clients
                    .forwarding_rules
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
            .get_forwarding_rule(&spec.region, &spec.name, deadline)
            .await?
            .ok_or_else(|| Error::NotFound {
                resource: resource.clone(),
            })?;
        let mut diffs = Vec::new();
        if have.ip_address != spec.ip_address {
            diffs.push(format!("IP {} (want {})", have.ip_address, spec.ip_address));
        }
        if !same_ports(&have.port_range, &spec.port_range) {
            diffs.push(format!(
                "ports {} (want {})",
                have.port_range, spec.port_range
            ));
        }
        if have.target_pool != last_segment(&spec.target_pool) {
            diffs.push(format!(
                "target pool {} (want {})",
                have.target_pool, spec.target_pool
            ));
        }
        if diffs.is_empty() {
            Ok(have)
        } else {
            Err(Error::Conflict {
                resource,
                detail: diffs.join(", "),
            })
        }
    }

    pub async fn get_forwarding_rule(
        &self,
        region: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<ForwardingRuleInfo>> {
        let project = self.project()?;
        let resource = self.rule_rel(region, name);
        let got = self
            .read_opt(&resource, deadline, || {
                self.clients
                    .forwarding_rules
                    .get()
                    .set_project(project)
                    .set_region(region)
                    .set_forwarding_rule(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got.map(|f| rule_info(region, &f)))
    }

    pub async fn delete_forwarding_rule(
        &self,
        region: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<()> {
        let project = self.project()?;
        let resource = self.rule_rel(region, name);
        self.delete_idempotent(&resource, deadline, |rid| {
            self.clients
                .forwarding_rules
                .delete()
                .set_project(project)
                .set_region(region)
                .set_forwarding_rule(name)
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
    fn port_ranges_compare_as_gce_stores_them() {
        assert!(same_ports("443", "443-443"));
        assert!(!same_ports("443", "80-443"));
    }
}
