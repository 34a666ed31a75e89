//! The executor of the cluster's foundation (`ha_domain::step::FoundationStep`): its static address, firewall
//! rules and keys' secret, and what its delete sweeps. Its own run, since a cluster being created has no
//! `ClusterCtx` yet (the context needs the static IP this run reserves).

use tokio::time::Instant;

use crate::cloud::Cloud;
use crate::cluster_keys::{self, ClusterKeys};
use crate::error::{OpError, Result};
use ha_domain::firewall_rule::FirewallRule;
use ha_domain::names::{DerivedNames, cluster_keys_secret};
use ha_domain::step::FoundationStep;
use ha_gce::FirewallSpec;

/// One change to a cluster's foundation, in `region`, by `deadline`.
pub struct FoundationRun<'a> {
    pub cloud: &'a Cloud,
    pub cluster: &'a str,
    pub region: &'a str,
    pub deadline: Instant,
    /// The keys `WriteKeysSecret` writes: held here, never in a step, since steps are logged.
    pub keys: Option<&'a ClusterKeys>,
    /// The static IP, once `ReserveStaticAddress` reserved or found it.
    pub static_ip: Option<String>,
    /// The keys' secret's path, once `WriteKeysSecret` wrote it.
    pub keys_secret: Option<String>,
}

impl<'a> FoundationRun<'a> {
    pub fn new(cloud: &'a Cloud, cluster: &'a str, region: &'a str, deadline: Instant) -> Self {
        FoundationRun {
            cloud,
            cluster,
            region,
            deadline,
            keys: None,
            static_ip: None,
            keys_secret: None,
        }
    }

    /// A run that may write the cluster's keys to their secret.
    pub fn with_keys(mut self, keys: &'a ClusterKeys) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Carries out `steps` in order; stops at the first that fails.
    pub async fn execute(&mut self, steps: &[FoundationStep]) -> Result<()> {
        for step in steps {
            tracing::debug!(cluster = %self.cluster, step = ?step, "step");
            self.step(step).await?;
        }
        Ok(())
    }

    async fn step(&mut self, step: &FoundationStep) -> Result<()> {
        use FoundationStep::*;
        let c = &self.cloud.compute;
        let (region, deadline) = (self.region, self.deadline);
        let names = DerivedNames::for_cluster(self.cluster);
        match step {
            ReserveStaticAddress => {
                let address = c
                    .reserve_external_address(region, &names.address, deadline)
                    .await?;
                self.static_ip = Some(address.ip);
            }
            CreateFirewall { rule } => {
                c.ensure_firewall(&spec(rule), deadline).await?;
            }
            PatchFirewall { rule } => {
                tracing::info!("{}: firewall rule {} back in line", self.cluster, rule.name);
                c.update_firewall(&spec(rule), deadline).await?;
            }
            DeleteFirewall { name } => c.delete_firewall(name, deadline).await?,
            ReleaseAddress { name } => c.delete_address(region, name, deadline).await?,
            DeleteSecret { id } => {
                self.cloud.secrets().await?.delete(id).await?;
            }
            DeleteForwardingRule => {
                c.delete_forwarding_rule(region, &names.forwarding_rule, deadline)
                    .await?
            }
            DeletePool => {
                c.delete_target_pool(region, &names.target_pool, deadline)
                    .await?
            }
            DeleteHealthCheck => {
                c.delete_http_health_check(&names.health_check, deadline)
                    .await?
            }
            WriteKeysSecret => {
                let keys = self.keys.ok_or_else(|| {
                    OpError::Other(format!(
                        "cluster {}'s run was given no keys to write; this is a bug",
                        self.cluster
                    ))
                })?;
                self.keys_secret = Some(cluster_keys::write(self.cloud, self.cluster, keys).await?);
            }
            DeleteKeysSecret => {
                match self
                    .cloud
                    .secrets()
                    .await?
                    .delete(&cluster_keys_secret(self.cluster))
                    .await
                {
                    // A cluster made before the keys' secret, in a project that never enabled the API: nothing
                    // to delete.
                    Err(e) if e.is_disabled() => {}
                    other => {
                        other?;
                    }
                }
            }
            ReleaseStaticAddress => c.delete_address(region, &names.address, deadline).await?,
        }
        Ok(())
    }
}

fn spec(rule: &FirewallRule) -> FirewallSpec {
    FirewallSpec {
        name: rule.name.clone(),
        network: rule.network.clone(),
        tcp_ports: rule.tcp_ports.clone(),
        source_ranges: rule.source_ranges.clone(),
        source_tags: rule.source_tags.clone(),
        target_tags: rule.target_tags.clone(),
        description: Some(rule.description.clone()),
    }
}
