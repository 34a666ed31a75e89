//! Firewall rules (global): ensure, get, update, delete. The masters need the API port open to clients and
//! etcd's ports open between replicas.

use super::Compute;
use super::error::{Error, Result, last_segment};
use super::types::{FirewallInfo, FirewallSpec};
use google_cloud_compute_v1::model::Firewall;
use google_cloud_compute_v1::model::firewall::Allowed;
use google_cloud_gax::options::RequestOptionsBuilder;
use std::collections::BTreeSet;
use tokio::time::Instant;

fn info(f: &Firewall) -> FirewallInfo {
    FirewallInfo {
        name: f.name.clone().unwrap_or_default(),
        network: f.network.clone().unwrap_or_default(),
        tcp_ports: f
            .allowed
            .iter()
            .filter(|a| {
                a.ip_protocol
                    .as_deref()
                    .is_some_and(|p| p.eq_ignore_ascii_case("tcp"))
            })
            .flat_map(|a| a.ports.iter().cloned())
            .collect(),
        source_ranges: f.source_ranges.clone(),
        source_tags: f.source_tags.clone(),
        target_tags: f.target_tags.clone(),
        self_link: f.self_link.clone().unwrap_or_default(),
    }
}

fn set(v: &[String]) -> BTreeSet<&str> {
    v.iter().map(String::as_str).collect()
}

/// Why an existing rule is not the one asked for; `None` if it is (order-insensitive, network by name).
fn mismatch(spec: &FirewallSpec, have: &FirewallInfo) -> Option<String> {
    let mut diffs = Vec::new();
    if last_segment(&spec.network) != last_segment(&have.network) {
        diffs.push(format!("network {} (want {})", have.network, spec.network));
    }
    for (what, want, got) in [
        ("tcp ports", &spec.tcp_ports, &have.tcp_ports),
        ("source ranges", &spec.source_ranges, &have.source_ranges),
        ("source tags", &spec.source_tags, &have.source_tags),
        ("target tags", &spec.target_tags, &have.target_tags),
    ] {
        // GCE fills sourceRanges 0.0.0.0/0 for an ingress rule given no source at all.
        let defaulted = what == "source ranges"
            && want.is_empty()
            && spec.source_tags.is_empty()
            && set(got) == BTreeSet::from(["0.0.0.0/0"]);
        if set(want) != set(got) && !defaulted {
            diffs.push(format!("{what} {got:?} (want {want:?})"));
        }
    }
    (!diffs.is_empty()).then(|| diffs.join(", "))
}

impl Compute {
    fn firewall_rel(&self, name: &str) -> String {
        format!("firewall {}", self.rel(&format!("global/firewalls/{name}")))
    }

    fn firewall_body(&self, spec: &FirewallSpec) -> Firewall {
        let mut f = Firewall::new();
        f.name = Some(spec.name.clone());
        f.network = Some(self.global_ref("networks", &spec.network));
        f.direction = Some("INGRESS".into());
        let mut allowed = Allowed::new();
        allowed.ip_protocol = Some("tcp".into());
        allowed.ports = spec.tcp_ports.clone();
        f.allowed = vec![allowed];
        f.source_ranges = spec.source_ranges.clone();
        f.source_tags = spec.source_tags.clone();
        f.target_tags = spec.target_tags.clone();
        f.description = spec.description.clone();
        f
    }

    /// Creates the rule if absent; an existing rule of that name must match, or this is a Conflict.
    pub async fn ensure_firewall(
        &self,
        spec: &FirewallSpec,
        deadline: Instant,
    ) -> Result<FirewallInfo> {
        let project = self.project()?;
        let resource = self.firewall_rel(&spec.name);
        let body = self.firewall_body(spec);
        match self
            .mutate(&resource, "insert", deadline, |rid| {
                self.clients
                    .firewalls
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
            .get_firewall(&spec.name, deadline)
            .await?
            .ok_or_else(|| Error::NotFound {
                resource: resource.clone(),
            })?;
        match mismatch(spec, &have) {
            None => Ok(have),
            Some(detail) => Err(Error::Conflict { resource, detail }),
        }
    }

    /// Makes an existing rule match `spec` (PATCH), e.g. after the user changed the source ranges.
    pub async fn update_firewall(
        &self,
        spec: &FirewallSpec,
        deadline: Instant,
    ) -> Result<FirewallInfo> {
        let project = self.project()?;
        let resource = self.firewall_rel(&spec.name);
        let body = self.firewall_body(spec);
        self.mutate(&resource, "patch", deadline, |rid| {
            self.clients
                .firewalls
                .patch()
                .set_project(project)
                .set_firewall(&spec.name)
                .set_body(body.clone())
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await?;
        self.get_firewall(&spec.name, deadline)
            .await?
            .ok_or(Error::NotFound { resource })
    }

    pub async fn get_firewall(
        &self,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<FirewallInfo>> {
        let project = self.project()?;
        let resource = self.firewall_rel(name);
        let got = self
            .read_opt(&resource, deadline, || {
                self.clients
                    .firewalls
                    .get()
                    .set_project(project)
                    .set_firewall(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got.as_ref().map(info))
    }

    pub async fn delete_firewall(&self, name: &str, deadline: Instant) -> Result<()> {
        let project = self.project()?;
        let resource = self.firewall_rel(name);
        self.delete_idempotent(&resource, deadline, |rid| {
            self.clients
                .firewalls
                .delete()
                .set_project(project)
                .set_firewall(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await
    }
}
