//! The `ha` provider: its configuration, resources and functions.

use std::sync::Arc;

use async_trait::async_trait;
use tfplugin::diag::Diagnostics;
use tfplugin_framework::function::FunctionHandle;
use tfplugin_framework::{Provider, ResourceHandle, Schema, resource};

use crate::config::{self, ProviderConfig, Settings, SharedSettings};
use crate::resources::cluster::ClusterResource;
use crate::resources::replica::ReplicaResource;

#[derive(Default)]
pub struct HaProvider {
    settings: SharedSettings,
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
            }),
        ]
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
        let resolved = Settings::resolve(&cfg, &env);
        tracing::debug!(terraform_version, project = ?resolved.project, region = ?resolved.region, auth = ?resolved.auth, "provider configured");
        if let Ok(mut s) = self.settings.write() {
            *s = resolved;
        }
    }
}
