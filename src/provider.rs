//! The `ha` provider: its configuration, resources, data sources, ephemeral resource and functions.

use std::sync::Arc;

use async_trait::async_trait;
use tfplugin::diag::Diagnostics;
use tfplugin_framework::function::FunctionHandle;
use tfplugin_framework::{
    DataSourceHandle, EphemeralHandle, Provider, ResourceHandle, Schema, data_source, ephemeral,
    resource,
};
use tokio_util::sync::CancellationToken;

use crate::config::{self, ProviderConfig, SharedSettings};
use crate::resources::admin_credentials::{AdminCredentialsDataSource, AdminCredentialsEphemeral};
use crate::resources::cluster::ClusterResource;
use crate::resources::cluster_health::ClusterHealthDataSource;
use crate::resources::replica::ReplicaResource;

#[derive(Default)]
pub struct HaProvider {
    settings: SharedSettings,
    /// Cancelled by StopProvider (Terraform's Ctrl-C): replica creates and deletes in flight return at once with
    /// what they made so far. Never reset: Terraform starts no new operation on a provider it asked to stop.
    stop: CancellationToken,
}

#[async_trait]
impl Provider for HaProvider {
    type Config = ProviderConfig;

    fn schema(&self) -> Schema {
        config::schema()
    }

    fn resources(&self) -> Vec<ResourceHandle> {
        vec![
            resource(ClusterResource {
                settings: Arc::clone(&self.settings),
            }),
            resource(ReplicaResource {
                settings: Arc::clone(&self.settings),
                stop: self.stop.clone(),
            }),
        ]
    }

    fn data_sources(&self) -> Vec<DataSourceHandle> {
        vec![
            data_source(AdminCredentialsDataSource {
                settings: Arc::clone(&self.settings),
            }),
            data_source(ClusterHealthDataSource {
                settings: Arc::clone(&self.settings),
            }),
        ]
    }

    fn ephemeral_resources(&self) -> Vec<EphemeralHandle> {
        vec![ephemeral(AdminCredentialsEphemeral {
            settings: Arc::clone(&self.settings),
        })]
    }

    fn functions(&self) -> Vec<FunctionHandle> {
        crate::functions::all()
    }

    fn validate(&self, cfg: &ProviderConfig, diags: &mut Diagnostics) {
        config::validate(cfg, diags);
    }

    async fn configure(
        &self,
        cfg: ProviderConfig,
        terraform_version: &str,
        diags: &mut Diagnostics,
    ) {
        config::validate(&cfg, diags);
        let env = std::env::vars().collect();
        let mut resolved = config::resolve(&cfg, &env);
        resolved.user_agent = ha_settings::user_agent(terraform_version);
        tracing::debug!(terraform_version, project = ?resolved.project, region = ?resolved.region, auth = ?resolved.auth, "provider configured");
        if let Ok(mut s) = self.settings.write() {
            *s = resolved;
        }
    }

    async fn stop(&self) {
        tracing::info!(
            "Terraform asked the provider to stop: interrupting replica applies in flight"
        );
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use tfplugin::ProviderServer;
    use tfplugin_framework::FrameworkServer;

    use super::*;

    /// The StopProvider RPC reaches the token every replica apply races against.
    #[tokio::test]
    async fn stop_provider_cancels_the_replicas_token() {
        let stop = CancellationToken::new();
        let server = FrameworkServer::new(HaProvider {
            settings: Default::default(),
            stop: stop.clone(),
        });
        assert!(!stop.is_cancelled());
        assert_eq!(server.stop_provider().await, None);
        assert!(stop.is_cancelled());
    }
}
