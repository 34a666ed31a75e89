//! The tfplugin6 `Provider` gRPC service, adapting each RPC to [`ProviderServer`].
//!
//! Every handler has the same shape: log the RPC name (never its payload: values may be sensitive) → convert the
//! request with `from_proto` → call the provider → convert the response with `to_proto`. Problems a user should
//! read travel as diagnostics inside the response; a gRPC error status is never produced here. RPCs not listed
//! answer UNIMPLEMENTED through the generated default stubs, which clients tolerate for optional features.

use std::sync::Arc;
use std::time::Instant;

use tonic::{Request, Response, Status};

use crate::ProviderServer;
use crate::convert::{from_proto, to_proto};
use crate::proto::tfplugin6 as pb;
use pb::provider_server::Provider;
use tonic::codegen::BoxStream;

/// The generated service's implementation, holding the provider.
pub(crate) struct ProviderService<P> {
    provider: Arc<P>,
}

impl<P: ProviderServer> ProviderService<P> {
    pub(crate) fn new(provider: Arc<P>) -> Self {
        Self { provider }
    }
}

/// Logs the start and the duration of one RPC at debug level.
struct RpcLog {
    rpc: &'static str,
    start: Instant,
}

impl RpcLog {
    fn start(rpc: &'static str) -> Self {
        tracing::debug!(rpc, "rpc started");
        Self {
            rpc,
            start: Instant::now(),
        }
    }
}

impl Drop for RpcLog {
    fn drop(&mut self) {
        tracing::debug!(
            rpc = self.rpc,
            elapsed_us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX),
            "rpc finished"
        );
    }
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl<P: ProviderServer> Provider for ProviderService<P> {
    async fn get_metadata(
        &self,
        _: Request<pb::get_metadata::Request>,
    ) -> Reply<pb::get_metadata::Response> {
        let _log = RpcLog::start("GetMetadata");
        let schema = self.provider.get_provider_schema().await;
        Ok(Response::new(to_proto::get_metadata_response(schema)))
    }

    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> Reply<pb::get_provider_schema::Response> {
        let _log = RpcLog::start("GetProviderSchema");
        let schema = self.provider.get_provider_schema().await;
        Ok(Response::new(to_proto::get_provider_schema_response(
            schema,
        )))
    }

    /// Answered even by a provider without identities (empty), which spares Terraform 1.12+ a logged error on
    /// every process start.
    async fn get_resource_identity_schemas(
        &self,
        _: Request<pb::get_resource_identity_schemas::Request>,
    ) -> Reply<pb::get_resource_identity_schemas::Response> {
        let _log = RpcLog::start("GetResourceIdentitySchemas");
        let r = self.provider.get_resource_identity_schemas().await;
        Ok(Response::new(
            to_proto::get_resource_identity_schemas_response(r),
        ))
    }

    async fn list_resource(
        &self,
        req: Request<pb::list_resource::Request>,
    ) -> Reply<BoxStream<pb::list_resource::Event>> {
        let _log = RpcLog::start("ListResource");
        let req = from_proto::list_resource_request(req.into_inner());
        let events = self.provider.list_resource(req).await;
        let stream = tokio_stream::iter(
            events
                .into_iter()
                .map(|e| Ok(to_proto::list_resource_event(e))),
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn validate_list_resource_config(
        &self,
        req: Request<pb::validate_list_resource_config::Request>,
    ) -> Reply<pb::validate_list_resource_config::Response> {
        let _log = RpcLog::start("ValidateListResourceConfig");
        let req = from_proto::validate_list_resource_config_request(req.into_inner());
        let diags = self.provider.validate_list_resource_config(req).await;
        Ok(Response::new(
            to_proto::validate_list_resource_config_response(diags),
        ))
    }

    async fn get_functions(
        &self,
        _: Request<pb::get_functions::Request>,
    ) -> Reply<pb::get_functions::Response> {
        let _log = RpcLog::start("GetFunctions");
        let schema = self.provider.get_provider_schema().await;
        Ok(Response::new(to_proto::get_functions_response(schema)))
    }

    async fn validate_provider_config(
        &self,
        req: Request<pb::validate_provider_config::Request>,
    ) -> Reply<pb::validate_provider_config::Response> {
        let _log = RpcLog::start("ValidateProviderConfig");
        let config = from_proto::validate_provider_config_request(req.into_inner());
        let diags = self.provider.validate_provider_config(config).await;
        Ok(Response::new(to_proto::validate_provider_config_response(
            diags,
        )))
    }

    async fn configure_provider(
        &self,
        req: Request<pb::configure_provider::Request>,
    ) -> Reply<pb::configure_provider::Response> {
        let _log = RpcLog::start("ConfigureProvider");
        let req = from_proto::configure_provider_request(req.into_inner());
        let diags = self.provider.configure_provider(req).await;
        Ok(Response::new(to_proto::configure_provider_response(diags)))
    }

    async fn stop_provider(
        &self,
        _: Request<pb::stop_provider::Request>,
    ) -> Reply<pb::stop_provider::Response> {
        let _log = RpcLog::start("StopProvider");
        let error = self.provider.stop_provider().await;
        Ok(Response::new(to_proto::stop_provider_response(error)))
    }

    async fn validate_resource_config(
        &self,
        req: Request<pb::validate_resource_config::Request>,
    ) -> Reply<pb::validate_resource_config::Response> {
        let _log = RpcLog::start("ValidateResourceConfig");
        let req = from_proto::validate_resource_config_request(req.into_inner());
        let diags = self.provider.validate_resource_config(req).await;
        Ok(Response::new(to_proto::validate_resource_config_response(
            diags,
        )))
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<pb::upgrade_resource_state::Request>,
    ) -> Reply<pb::upgrade_resource_state::Response> {
        let _log = RpcLog::start("UpgradeResourceState");
        let req = from_proto::upgrade_resource_state_request(req.into_inner());
        let resp = self.provider.upgrade_resource_state(req).await;
        Ok(Response::new(to_proto::upgrade_resource_state_response(
            resp,
        )))
    }

    async fn read_resource(
        &self,
        req: Request<pb::read_resource::Request>,
    ) -> Reply<pb::read_resource::Response> {
        let _log = RpcLog::start("ReadResource");
        let req = from_proto::read_resource_request(req.into_inner());
        let resp = self.provider.read_resource(req).await;
        Ok(Response::new(to_proto::read_resource_response(resp)))
    }

    async fn plan_resource_change(
        &self,
        req: Request<pb::plan_resource_change::Request>,
    ) -> Reply<pb::plan_resource_change::Response> {
        let _log = RpcLog::start("PlanResourceChange");
        let req = from_proto::plan_resource_change_request(req.into_inner());
        let resp = self.provider.plan_resource_change(req).await;
        Ok(Response::new(to_proto::plan_resource_change_response(resp)))
    }

    async fn apply_resource_change(
        &self,
        req: Request<pb::apply_resource_change::Request>,
    ) -> Reply<pb::apply_resource_change::Response> {
        let _log = RpcLog::start("ApplyResourceChange");
        let req = from_proto::apply_resource_change_request(req.into_inner());
        let resp = self.provider.apply_resource_change(req).await;
        Ok(Response::new(to_proto::apply_resource_change_response(
            resp,
        )))
    }

    async fn import_resource_state(
        &self,
        req: Request<pb::import_resource_state::Request>,
    ) -> Reply<pb::import_resource_state::Response> {
        let _log = RpcLog::start("ImportResourceState");
        let req = from_proto::import_resource_state_request(req.into_inner());
        let resp = self.provider.import_resource_state(req).await;
        Ok(Response::new(to_proto::import_resource_state_response(
            resp,
        )))
    }

    async fn call_function(
        &self,
        req: Request<pb::call_function::Request>,
    ) -> Reply<pb::call_function::Response> {
        let _log = RpcLog::start("CallFunction");
        let req = from_proto::call_function_request(req.into_inner());
        let resp = self.provider.call_function(req).await;
        Ok(Response::new(to_proto::call_function_response(resp)))
    }

    async fn validate_data_resource_config(
        &self,
        req: Request<pb::validate_data_resource_config::Request>,
    ) -> Reply<pb::validate_data_resource_config::Response> {
        let _log = RpcLog::start("ValidateDataResourceConfig");
        let req = from_proto::validate_data_resource_config_request(req.into_inner());
        let diags = self.provider.validate_data_resource_config(req).await;
        Ok(Response::new(
            to_proto::validate_data_resource_config_response(diags),
        ))
    }

    async fn read_data_source(
        &self,
        req: Request<pb::read_data_source::Request>,
    ) -> Reply<pb::read_data_source::Response> {
        let _log = RpcLog::start("ReadDataSource");
        let req = from_proto::read_data_source_request(req.into_inner());
        let resp = self.provider.read_data_source(req).await;
        Ok(Response::new(to_proto::read_data_source_response(resp)))
    }

    async fn validate_ephemeral_resource_config(
        &self,
        req: Request<pb::validate_ephemeral_resource_config::Request>,
    ) -> Reply<pb::validate_ephemeral_resource_config::Response> {
        let _log = RpcLog::start("ValidateEphemeralResourceConfig");
        let req = from_proto::validate_ephemeral_resource_config_request(req.into_inner());
        let diags = self.provider.validate_ephemeral_resource_config(req).await;
        Ok(Response::new(
            to_proto::validate_ephemeral_resource_config_response(diags),
        ))
    }

    async fn open_ephemeral_resource(
        &self,
        req: Request<pb::open_ephemeral_resource::Request>,
    ) -> Reply<pb::open_ephemeral_resource::Response> {
        let _log = RpcLog::start("OpenEphemeralResource");
        let req = from_proto::open_ephemeral_resource_request(req.into_inner());
        let resp = self.provider.open_ephemeral_resource(req).await;
        Ok(Response::new(to_proto::open_ephemeral_resource_response(
            resp,
        )))
    }

    async fn renew_ephemeral_resource(
        &self,
        req: Request<pb::renew_ephemeral_resource::Request>,
    ) -> Reply<pb::renew_ephemeral_resource::Response> {
        let _log = RpcLog::start("RenewEphemeralResource");
        let req = from_proto::renew_ephemeral_resource_request(req.into_inner());
        let resp = self.provider.renew_ephemeral_resource(req).await;
        Ok(Response::new(to_proto::renew_ephemeral_resource_response(
            resp,
        )))
    }

    async fn close_ephemeral_resource(
        &self,
        req: Request<pb::close_ephemeral_resource::Request>,
    ) -> Reply<pb::close_ephemeral_resource::Response> {
        let _log = RpcLog::start("CloseEphemeralResource");
        let req = from_proto::close_ephemeral_resource_request(req.into_inner());
        let diags = self.provider.close_ephemeral_resource(req).await;
        Ok(Response::new(to_proto::close_ephemeral_resource_response(
            diags,
        )))
    }
}
