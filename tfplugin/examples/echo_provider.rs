//! The smallest provider: one resource, `echo_thing`, whose plans and applies echo what Terraform proposes.
//!
//! It exists to exercise `tfplugin::serve` end to end (the integration tests in `tests/server.rs` launch it the way
//! Terraform does) and to show the minimum a provider implements. Values stay encoded: echoing needs no decoding.

use async_trait::async_trait;
use tfplugin::ProviderServer;
use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::types::*;
use tfplugin::value::Type;

struct Echo;

#[async_trait]
impl ProviderServer for Echo {
    async fn get_provider_schema(&self) -> GetProviderSchemaResponse {
        let attr = |name: &str, required: bool| Attribute {
            name: name.into(),
            ty: Type::String,
            required,
            computed: !required,
            ..Default::default()
        };
        let thing = Schema {
            version: 0,
            block: Block {
                attributes: vec![attr("id", false), attr("name", true)],
                ..Default::default()
            },
        };
        GetProviderSchemaResponse {
            resource_schemas: vec![("echo_thing".into(), thing)],
            server_capabilities: ServerCapabilities {
                plan_destroy: true,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    async fn validate_provider_config(&self, _config: DynamicValue) -> Diagnostics {
        Diagnostics::new()
    }

    async fn configure_provider(&self, _req: ConfigureProviderRequest) -> Diagnostics {
        Diagnostics::new()
    }

    async fn stop_provider(&self) -> Option<String> {
        None
    }

    /// Refuses one magic type name, so tests can see a diagnostic with a path cross the wire.
    async fn validate_resource_config(&self, req: ValidateResourceConfigRequest) -> Diagnostics {
        let mut diags = Diagnostics::new();
        if req.type_name == "echo_invalid" {
            diags.attr_error(
                AttributePath::attr("name"),
                "Invalid name",
                "echo_invalid never validates.",
            );
        }
        diags
    }

    async fn upgrade_resource_state(
        &self,
        req: UpgradeResourceStateRequest,
    ) -> UpgradeResourceStateResponse {
        UpgradeResourceStateResponse {
            upgraded_state: DynamicValue {
                msgpack: None,
                json: req.raw_state.json,
            },
            diagnostics: Diagnostics::new(),
        }
    }

    async fn read_resource(&self, req: ReadResourceRequest) -> ReadResourceResponse {
        ReadResourceResponse {
            new_state: req.current_state,
            private: req.private,
            ..Default::default()
        }
    }

    async fn plan_resource_change(
        &self,
        req: PlanResourceChangeRequest,
    ) -> PlanResourceChangeResponse {
        PlanResourceChangeResponse {
            planned_state: req.proposed_new_state,
            ..Default::default()
        }
    }

    async fn apply_resource_change(
        &self,
        req: ApplyResourceChangeRequest,
    ) -> ApplyResourceChangeResponse {
        ApplyResourceChangeResponse {
            new_state: req.planned_state,
            ..Default::default()
        }
    }

    async fn import_resource_state(
        &self,
        req: ImportResourceStateRequest,
    ) -> ImportResourceStateResponse {
        let mut diags = Diagnostics::new();
        diags.error(
            "Import not supported",
            format!("echo_thing {:?} cannot be imported.", req.id),
        );
        ImportResourceStateResponse {
            imported_resources: vec![],
            diagnostics: diags,
        }
    }
}

fn main() -> std::process::ExitCode {
    tfplugin::init_logging("echo");
    tfplugin::serve(Echo)
}
