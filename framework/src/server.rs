//! `FrameworkServer` implements the protocol's `ProviderServer` for any [`Provider`]: it finds the resource, decodes
//! values against its schema, runs the shared planning and validation, calls the resource and encodes the answer.

use std::collections::HashMap;

use async_trait::async_trait;
use tfplugin::ProviderServer;
use tfplugin::diag::Diagnostics;
use tfplugin::types::*;
use tfplugin::value::Value;
use tracing::debug;

use crate::codec::{decode, decode_known, encode};
use crate::data_source::DataSourceHandle;
use crate::ephemeral::EphemeralHandle;
use crate::erased::{ResourceHandle, identity_type};
use crate::function::FunctionHandle;
use crate::model::from_value;
use crate::plan::validate_config;
use crate::provider::Provider;
use crate::schema::Schema;

pub struct FrameworkServer<P: Provider> {
    provider: P,
    provider_schema: Schema,
    resources: HashMap<&'static str, ResourceHandle>,
    /// Listing order for the schema response.
    resource_order: Vec<&'static str>,
    /// Data sources and ephemeral resources, in listing order (few: a linear search finds them).
    data_sources: Vec<DataSourceHandle>,
    ephemerals: Vec<EphemeralHandle>,
    functions: Vec<FunctionHandle>,
}

impl<P: Provider> FrameworkServer<P> {
    pub fn new(provider: P) -> Self {
        let handles = provider.resources();
        let resource_order = handles.iter().map(|r| r.type_name()).collect();
        Self {
            provider_schema: provider.schema(),
            resources: handles.into_iter().map(|r| (r.type_name(), r)).collect(),
            resource_order,
            data_sources: provider.data_sources(),
            ephemerals: provider.ephemeral_resources(),
            functions: provider.functions(),
            provider,
        }
    }

    fn find(&self, type_name: &str, diags: &mut Diagnostics) -> Option<&ResourceHandle> {
        let r = self.resources.get(type_name);
        if r.is_none() {
            diags.error(
                format!("Unknown resource type {type_name:?}"),
                "This provider does not have that resource type. Check the spelling, and that the provider version supports it.",
            );
        }
        r
    }

    fn find_data_source(
        &self,
        type_name: &str,
        diags: &mut Diagnostics,
    ) -> Option<&DataSourceHandle> {
        let d = self
            .data_sources
            .iter()
            .find(|d| d.type_name() == type_name);
        if d.is_none() {
            diags.error(
                format!("Unknown data source type {type_name:?}"),
                "This provider does not have that data source. Check the spelling, and that the provider version supports it.",
            );
        }
        d
    }

    fn find_ephemeral(&self, type_name: &str, diags: &mut Diagnostics) -> Option<&EphemeralHandle> {
        let e = self.ephemerals.iter().find(|e| e.type_name() == type_name);
        if e.is_none() {
            diags.error(
                format!("Unknown ephemeral resource type {type_name:?}"),
                "This provider does not have that ephemeral resource. Check the spelling, and that the provider version supports it (ephemeral resources need Terraform 1.10 or later).",
            );
        }
        e
    }
}

/// The identity of `state` encoded for the wire, when the resource type has one and it is known.
fn encode_identity(
    r: &ResourceHandle,
    state: &Value,
    diags: &mut Diagnostics,
) -> Option<DynamicValue> {
    let schema = r.identity_schema()?;
    let identity = r.identity_of(state)?;
    Some(encode(
        &identity_type(&schema),
        &identity,
        "identity",
        diags,
    ))
}

#[async_trait]
impl<P: Provider> ProviderServer for FrameworkServer<P> {
    async fn get_resource_identity_schemas(&self) -> GetResourceIdentitySchemasResponse {
        GetResourceIdentitySchemasResponse {
            identity_schemas: self
                .resource_order
                .iter()
                .filter_map(|name| {
                    Some((name.to_string(), self.resources[name].identity_schema()?))
                })
                .collect(),
            diagnostics: Diagnostics::new(),
        }
    }

    async fn get_provider_schema(&self) -> GetProviderSchemaResponse {
        GetProviderSchemaResponse {
            provider: self.provider_schema.to_wire(),
            provider_meta: None,
            resource_schemas: self
                .resource_order
                .iter()
                .map(|name| (name.to_string(), self.resources[name].schema().to_wire()))
                .collect(),
            data_source_schemas: self
                .data_sources
                .iter()
                .map(|d| (d.type_name().to_string(), d.schema().to_wire()))
                .collect(),
            ephemeral_resource_schemas: self
                .ephemerals
                .iter()
                .map(|e| (e.type_name().to_string(), e.schema().to_wire()))
                .collect(),
            list_resource_schemas: self
                .resource_order
                .iter()
                .filter_map(|name| {
                    let s = self.resources[name].list_config_schema()?;
                    Some((name.to_string(), s.to_wire()))
                })
                .collect(),
            functions: self
                .functions
                .iter()
                .map(|f| (f.name.to_string(), f.to_wire()))
                .collect(),
            server_capabilities: ServerCapabilities {
                plan_destroy: true,
                // The schema is the same in every process of a command, so a client that cached it from the
                // first process may skip asking the next ones (each plan starts three).
                get_provider_schema_optional: true,
                ..Default::default()
            },
            diagnostics: Diagnostics::new(),
        }
    }

    async fn validate_provider_config(&self, config: DynamicValue) -> Diagnostics {
        let mut diags = Diagnostics::new();
        let Some(v) = decode(
            &self.provider_schema.value_type(),
            &config,
            "provider configuration",
            &mut diags,
        ) else {
            return diags;
        };
        diags.extend(validate_config(&self.provider_schema, &v));
        match from_value::<P::Config>(&v) {
            Ok(cfg) => self.provider.validate(&cfg, &mut diags),
            Err(e) => diags.push(e.diagnostic("Could not read the provider configuration")),
        }
        diags
    }

    async fn configure_provider(&self, req: ConfigureProviderRequest) -> Diagnostics {
        let mut diags = Diagnostics::new();
        debug!(terraform_version = %req.terraform_version, "configuring provider");
        let Some(v) = decode(
            &self.provider_schema.value_type(),
            &req.config,
            "provider configuration",
            &mut diags,
        ) else {
            return diags;
        };
        match from_value::<P::Config>(&v) {
            Ok(cfg) => {
                self.provider
                    .configure(cfg, &req.terraform_version, &mut diags)
                    .await
            }
            Err(e) => diags.push(e.diagnostic("Could not read the provider configuration")),
        }
        diags
    }

    async fn stop_provider(&self) -> Option<String> {
        self.provider.stop().await;
        None
    }

    async fn validate_resource_config(&self, req: ValidateResourceConfigRequest) -> Diagnostics {
        let mut diags = Diagnostics::new();
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return diags;
        };
        if let Some(config) = decode(
            &r.schema().value_type(),
            &req.config,
            "configuration",
            &mut diags,
        ) {
            diags.extend(r.validate(&config));
            if !req.client_capabilities.write_only_attributes_allowed {
                diags.extend(crate::write_only::refused(r.schema(), &config));
            }
        }
        diags
    }

    async fn upgrade_resource_state(
        &self,
        req: UpgradeResourceStateRequest,
    ) -> UpgradeResourceStateResponse {
        let mut diags = Diagnostics::new();
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return UpgradeResourceStateResponse {
                diagnostics: diags,
                ..Default::default()
            };
        };
        // Older schema versions are rewritten by the resource, one version at a time; decoding checks the result.
        let ty = r.schema().value_type();
        let raw = match r.upgrade(req.version, &req.raw_state.json.unwrap_or_default()) {
            Ok(json) => DynamicValue::json(json),
            Err(e) => {
                diags.error(
                    format!("Could not upgrade the stored state of {}", req.type_name),
                    e,
                );
                return UpgradeResourceStateResponse {
                    diagnostics: diags,
                    ..Default::default()
                };
            }
        };
        let upgraded = match decode(&ty, &raw, "stored state", &mut diags) {
            Some(v) => encode(&ty, &v, "upgraded state", &mut diags),
            None => DynamicValue::default(),
        };
        UpgradeResourceStateResponse {
            upgraded_state: upgraded,
            diagnostics: diags,
        }
    }

    async fn read_resource(&self, req: ReadResourceRequest) -> ReadResourceResponse {
        let mut diags = Diagnostics::new();
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return ReadResourceResponse {
                new_state: req.current_state,
                diagnostics: diags,
                ..Default::default()
            };
        };
        let ty = r.schema().value_type();
        let Some(state) = decode_known(&ty, &req.current_state, "state", &mut diags) else {
            return ReadResourceResponse {
                new_state: req.current_state,
                diagnostics: diags,
                ..Default::default()
            };
        };
        let (new, d) = r.read(state).await;
        diags.extend(d);
        let new = new.unwrap_or(Value::Null);
        let new_identity = encode_identity(r, &new, &mut diags);
        let new_state = encode(&ty, &new, "state", &mut diags);
        ReadResourceResponse {
            new_state,
            diagnostics: diags,
            private: req.private,
            new_identity,
        }
    }

    async fn plan_resource_change(
        &self,
        req: PlanResourceChangeRequest,
    ) -> PlanResourceChangeResponse {
        let mut diags = Diagnostics::new();
        let fail = |diags| PlanResourceChangeResponse {
            diagnostics: diags,
            ..Default::default()
        };
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return fail(diags);
        };
        let ty = r.schema().value_type();
        let (Some(prior), Some(proposed), Some(config)) = (
            decode(&ty, &req.prior_state, "prior state", &mut diags),
            decode(&ty, &req.proposed_new_state, "proposed state", &mut diags),
            decode(&ty, &req.config, "configuration", &mut diags),
        ) else {
            return fail(diags);
        };
        if proposed.is_null() {
            // Destroy: nothing to plan but the resource may refuse (a quorum guard).
            if !prior.is_null() {
                diags.extend(r.plan_destroy(&prior).await);
            }
            return PlanResourceChangeResponse {
                planned_state: req.proposed_new_state,
                planned_private: req.prior_private,
                diagnostics: diags,
                ..Default::default()
            };
        }
        let prior = (!prior.is_null()).then_some(prior);
        let planned = r.plan(&config, prior.as_ref(), &proposed).await;
        diags.extend(planned.diagnostics);
        let planned_state = encode(&ty, &planned.planned, "plan", &mut diags);
        // An object keeps its identity; a new one has it once its id is known (often only after apply).
        let planned_identity =
            encode_identity(r, &planned.planned, &mut diags).or(req.prior_identity);
        PlanResourceChangeResponse {
            planned_state,
            requires_replace: planned.requires_replace,
            planned_private: req.prior_private,
            diagnostics: diags,
            planned_identity,
        }
    }

    async fn apply_resource_change(
        &self,
        req: ApplyResourceChangeRequest,
    ) -> ApplyResourceChangeResponse {
        let mut diags = Diagnostics::new();
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return ApplyResourceChangeResponse {
                new_state: req.prior_state,
                diagnostics: diags,
                ..Default::default()
            };
        };
        let ty = r.schema().value_type();
        let (Some(prior), Some(planned), Some(config)) = (
            decode_known(&ty, &req.prior_state, "prior state", &mut diags),
            decode(&ty, &req.planned_state, "planned state", &mut diags),
            decode_known(&ty, &req.config, "configuration", &mut diags),
        ) else {
            return ApplyResourceChangeResponse {
                new_state: req.prior_state,
                diagnostics: diags,
                ..Default::default()
            };
        };
        let prior = (!prior.is_null()).then_some(prior);
        let planned = (!planned.is_null()).then_some(planned);
        let (new, d) = r.apply(&config, prior, planned).await;
        diags.extend(d);
        let new = new.unwrap_or(Value::Null);
        let new_identity = encode_identity(r, &new, &mut diags);
        let new_state = encode(&ty, &new, "new state", &mut diags);
        ApplyResourceChangeResponse {
            new_state,
            private: req.planned_private,
            diagnostics: diags,
            new_identity,
        }
    }

    async fn import_resource_state(
        &self,
        req: ImportResourceStateRequest,
    ) -> ImportResourceStateResponse {
        let mut diags = Diagnostics::new();
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return ImportResourceStateResponse {
                diagnostics: diags,
                ..Default::default()
            };
        };
        // `import { identity = { … } }` (Terraform 1.12+) sends an identity and no id.
        let id = match (&req.identity, req.id.is_empty(), r.identity_schema()) {
            (Some(identity), true, Some(schema)) => {
                let value = decode(&identity_type(&schema), identity, "identity", &mut diags);
                match value.map(|v| r.import_id(&v)) {
                    Some(Ok(id)) => id,
                    Some(Err(e)) => {
                        diags.error("Invalid import identity", format!("{e}."));
                        String::new()
                    }
                    None => String::new(),
                }
            }
            _ => req.id.clone(),
        };
        if diags.has_error() {
            return ImportResourceStateResponse {
                diagnostics: diags,
                ..Default::default()
            };
        }
        let (state, d) = r.import(&id).await;
        diags.extend(d);
        let imported_resources = match state {
            Some(v) => vec![ImportedResource {
                type_name: req.type_name.clone(),
                identity: encode_identity(r, &v, &mut diags),
                state: encode(&r.schema().value_type(), &v, "imported state", &mut diags),
                private: Vec::new(),
            }],
            None => Vec::new(),
        };
        ImportResourceStateResponse {
            imported_resources,
            diagnostics: diags,
        }
    }

    async fn validate_list_resource_config(
        &self,
        req: ValidateListResourceConfigRequest,
    ) -> Diagnostics {
        let mut diags = Diagnostics::new();
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return diags;
        };
        if let Some(schema) = r.list_config_schema()
            && let Some(config) = decode(
                &schema.value_type(),
                &req.config,
                "list configuration",
                &mut diags,
            )
        {
            diags.extend(validate_config(schema, &config));
        }
        diags
    }

    async fn list_resource(&self, req: ListResourceRequest) -> Vec<ListResourceEvent> {
        let mut diags = Diagnostics::new();
        let failed = |diagnostics| {
            vec![ListResourceEvent {
                diagnostics,
                ..Default::default()
            }]
        };
        let Some(r) = self.find(&req.type_name, &mut diags) else {
            return failed(diags);
        };
        let Some(schema) = r.list_config_schema() else {
            diags.error(
                format!("{} cannot be listed", req.type_name),
                "This resource type has no list resource.",
            );
            return failed(diags);
        };
        let Some(config) = decode(
            &schema.value_type(),
            &req.config,
            "list configuration",
            &mut diags,
        ) else {
            return failed(diags);
        };
        let (found, d) = r.list(&config).await;
        diags.extend(d);
        if diags.has_error() {
            return failed(diags);
        }
        let limit = usize::try_from(req.limit)
            .ok()
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let ty = r.schema().value_type();
        let mut events: Vec<ListResourceEvent> = found
            .into_iter()
            .take(limit)
            .map(|(state, display_name)| {
                let mut d = Diagnostics::new();
                ListResourceEvent {
                    identity: encode_identity(r, &state, &mut d),
                    display_name,
                    resource_object: req
                        .include_resource_object
                        .then(|| encode(&ty, &state, "listed state", &mut d)),
                    diagnostics: d,
                }
            })
            .collect();
        // Warnings of the listing travel with the first event.
        if let Some(first) = events.first_mut() {
            first.diagnostics.extend(diags);
        }
        events
    }

    async fn call_function(&self, req: CallFunctionRequest) -> CallFunctionResponse {
        let Some(f) = self.functions.iter().find(|f| f.name == req.name) else {
            return CallFunctionResponse {
                result: DynamicValue::default(),
                error: Some(FunctionError {
                    text: format!("this provider has no function {:?}", req.name),
                    function_argument: None,
                }),
            };
        };
        let ty = tfplugin::value::Type::Number;
        let mut args = Vec::with_capacity(req.arguments.len());
        for (i, a) in req.arguments.iter().enumerate() {
            let mut d = Diagnostics::new();
            match decode(&ty, a, "function argument", &mut d) {
                Some(v) => args.push(v),
                None => {
                    return CallFunctionResponse {
                        result: DynamicValue::default(),
                        error: Some(FunctionError {
                            text: "the argument is not a number".into(),
                            function_argument: Some(i as i64),
                        }),
                    };
                }
            }
        }
        match f.invoke(&args) {
            Ok(v) => {
                let mut d = Diagnostics::new();
                CallFunctionResponse {
                    result: encode(&ty, &v, "function result", &mut d),
                    error: None,
                }
            }
            Err((text, i)) => CallFunctionResponse {
                result: DynamicValue::default(),
                error: Some(FunctionError {
                    text,
                    function_argument: Some(i as i64),
                }),
            },
        }
    }

    async fn validate_data_resource_config(
        &self,
        req: ValidateDataResourceConfigRequest,
    ) -> Diagnostics {
        let mut diags = Diagnostics::new();
        let Some(d) = self.find_data_source(&req.type_name, &mut diags) else {
            return diags;
        };
        if let Some(config) = decode(
            &d.schema().value_type(),
            &req.config,
            "configuration",
            &mut diags,
        ) {
            diags.extend(d.validate(&config));
        }
        diags
    }

    async fn read_data_source(&self, req: ReadDataSourceRequest) -> ReadDataSourceResponse {
        let mut diags = Diagnostics::new();
        let Some(d) = self.find_data_source(&req.type_name, &mut diags) else {
            return ReadDataSourceResponse {
                diagnostics: diags,
                ..Default::default()
            };
        };
        let ty = d.schema().value_type();
        let Some(config) = decode(&ty, &req.config, "configuration", &mut diags) else {
            return ReadDataSourceResponse {
                diagnostics: diags,
                ..Default::default()
            };
        };
        let (state, d) = d.read(&config).await;
        diags.extend(d);
        let state = match state {
            Some(v) if !diags.has_error() => encode(&ty, &v, "data source state", &mut diags),
            _ => DynamicValue::default(),
        };
        ReadDataSourceResponse {
            state,
            diagnostics: diags,
        }
    }

    async fn validate_ephemeral_resource_config(
        &self,
        req: ValidateEphemeralResourceConfigRequest,
    ) -> Diagnostics {
        let mut diags = Diagnostics::new();
        let Some(e) = self.find_ephemeral(&req.type_name, &mut diags) else {
            return diags;
        };
        if let Some(config) = decode(
            &e.schema().value_type(),
            &req.config,
            "configuration",
            &mut diags,
        ) {
            diags.extend(e.validate(&config));
        }
        diags
    }

    async fn open_ephemeral_resource(
        &self,
        req: OpenEphemeralResourceRequest,
    ) -> OpenEphemeralResourceResponse {
        let mut diags = Diagnostics::new();
        let fail = |diagnostics| OpenEphemeralResourceResponse {
            diagnostics,
            ..Default::default()
        };
        let Some(e) = self.find_ephemeral(&req.type_name, &mut diags) else {
            return fail(diags);
        };
        let ty = e.schema().value_type();
        let Some(config) = decode(&ty, &req.config, "configuration", &mut diags) else {
            return fail(diags);
        };
        let (opened, d) = e.open(&config).await;
        diags.extend(d);
        match opened {
            Some(o) if !diags.has_error() => OpenEphemeralResourceResponse {
                result: encode(&ty, &o.result, "ephemeral result", &mut diags),
                renew_at: o.renew_at,
                private: o.private,
                diagnostics: diags,
            },
            _ => fail(diags),
        }
    }

    async fn renew_ephemeral_resource(
        &self,
        req: RenewEphemeralResourceRequest,
    ) -> RenewEphemeralResourceResponse {
        let mut diags = Diagnostics::new();
        let Some(e) = self.find_ephemeral(&req.type_name, &mut diags) else {
            return RenewEphemeralResourceResponse {
                diagnostics: diags,
                ..Default::default()
            };
        };
        let (renewed, d) = e.renew(req.private).await;
        diags.extend(d);
        RenewEphemeralResourceResponse {
            diagnostics: diags,
            renew_at: renewed.renew_at,
            private: renewed.private,
        }
    }

    async fn close_ephemeral_resource(&self, req: CloseEphemeralResourceRequest) -> Diagnostics {
        let mut diags = Diagnostics::new();
        let Some(e) = self.find_ephemeral(&req.type_name, &mut diags) else {
            return diags;
        };
        diags.extend(e.close(req.private).await);
        diags
    }
}
