//! The `Provider` trait: provider configuration and the list of resources, data sources, ephemeral resources and
//! functions.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use tfplugin::diag::Diagnostics;

use crate::data_source::DataSourceHandle;
use crate::ephemeral::EphemeralHandle;
use crate::erased::ResourceHandle;
use crate::function::FunctionHandle;
use crate::schema::Schema;

#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The provider block, mirroring [`Provider::schema`] one-to-one.
    type Config: DeserializeOwned + Send;

    fn schema(&self) -> Schema;
    fn resources(&self) -> Vec<ResourceHandle>;
    fn data_sources(&self) -> Vec<DataSourceHandle> {
        Vec::new()
    }
    /// Ephemeral resources (Terraform 1.10+).
    fn ephemeral_resources(&self) -> Vec<EphemeralHandle> {
        Vec::new()
    }
    fn functions(&self) -> Vec<FunctionHandle> {
        Vec::new()
    }

    /// Checks across provider attributes (attribute validators have already run).
    fn validate(&self, _config: &Self::Config, _diags: &mut Diagnostics) {}

    /// Builds what resources need (clients, credentials) from the provider block and environment.
    async fn configure(
        &self,
        config: Self::Config,
        terraform_version: &str,
        diags: &mut Diagnostics,
    );

    /// Cancels work in flight (Terraform's StopProvider, sent on Ctrl-C).
    async fn stop(&self) {}
}
