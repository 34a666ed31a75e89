//! The interface a provider implements. One method per tfplugin6 RPC that a resource-only provider needs; every
//! other RPC is answered UNIMPLEMENTED by the server, which both clients tolerate.

use async_trait::async_trait;

use crate::diag::Diagnostics;
use crate::types::*;

#[async_trait]
pub trait ProviderServer: Send + Sync + 'static {
    /// Every schema the provider has. Called first by every client process, so it must be cheap.
    async fn get_provider_schema(&self) -> GetProviderSchemaResponse;
    async fn validate_provider_config(&self, config: DynamicValue) -> Diagnostics;
    async fn configure_provider(&self, req: ConfigureProviderRequest) -> Diagnostics;
    /// Cancels work in flight. Returns an error text only for a system fault.
    async fn stop_provider(&self) -> Option<String>;

    async fn validate_resource_config(&self, req: ValidateResourceConfigRequest) -> Diagnostics;
    async fn upgrade_resource_state(
        &self,
        req: UpgradeResourceStateRequest,
    ) -> UpgradeResourceStateResponse;
    async fn read_resource(&self, req: ReadResourceRequest) -> ReadResourceResponse;
    async fn plan_resource_change(
        &self,
        req: PlanResourceChangeRequest,
    ) -> PlanResourceChangeResponse;
    async fn apply_resource_change(
        &self,
        req: ApplyResourceChangeRequest,
    ) -> ApplyResourceChangeResponse;
    async fn import_resource_state(
        &self,
        req: ImportResourceStateRequest,
    ) -> ImportResourceStateResponse;

    /// Identity schemas (Terraform 1.12+). The default: no resource type has one.
    async fn get_resource_identity_schemas(&self) -> GetResourceIdentitySchemasResponse {
        GetResourceIdentitySchemasResponse::default()
    }

    /// `terraform query`: the objects a list block selects. The protocol streams them; they are collected here
    /// first (a listing is small), and the server sends them one event each. The default lists nothing.
    async fn list_resource(&self, _req: ListResourceRequest) -> Vec<ListResourceEvent> {
        Vec::new()
    }

    async fn validate_list_resource_config(
        &self,
        _req: ValidateListResourceConfigRequest,
    ) -> Diagnostics {
        Diagnostics::new()
    }

    /// Data sources. The default has none, so any type name is unknown.
    async fn validate_data_resource_config(
        &self,
        req: ValidateDataResourceConfigRequest,
    ) -> Diagnostics {
        unknown_type("data source", &req.type_name)
    }

    async fn read_data_source(&self, req: ReadDataSourceRequest) -> ReadDataSourceResponse {
        ReadDataSourceResponse {
            diagnostics: unknown_type("data source", &req.type_name),
            ..Default::default()
        }
    }

    /// Ephemeral resources (Terraform 1.10+). The default has none.
    async fn validate_ephemeral_resource_config(
        &self,
        req: ValidateEphemeralResourceConfigRequest,
    ) -> Diagnostics {
        unknown_type("ephemeral resource", &req.type_name)
    }

    async fn open_ephemeral_resource(
        &self,
        req: OpenEphemeralResourceRequest,
    ) -> OpenEphemeralResourceResponse {
        OpenEphemeralResourceResponse {
            diagnostics: unknown_type("ephemeral resource", &req.type_name),
            ..Default::default()
        }
    }

    async fn renew_ephemeral_resource(
        &self,
        req: RenewEphemeralResourceRequest,
    ) -> RenewEphemeralResourceResponse {
        RenewEphemeralResourceResponse {
            diagnostics: unknown_type("ephemeral resource", &req.type_name),
            ..Default::default()
        }
    }

    async fn close_ephemeral_resource(&self, req: CloseEphemeralResourceRequest) -> Diagnostics {
        unknown_type("ephemeral resource", &req.type_name)
    }

    /// Provider-defined functions. The default has none.
    async fn call_function(&self, req: CallFunctionRequest) -> CallFunctionResponse {
        CallFunctionResponse {
            result: DynamicValue::default(),
            error: Some(FunctionError {
                text: format!("this provider has no function {:?}", req.name),
                function_argument: None,
            }),
        }
    }
}

/// The answer for a type name the provider does not have.
fn unknown_type(kind: &str, type_name: &str) -> Diagnostics {
    let mut d = Diagnostics::new();
    d.error(
        format!("Unknown {kind} type {type_name:?}"),
        format!("This provider has no {kind} of that type. Check the spelling, and that the provider version supports it."),
    );
    d
}
