//! Plain types → generated protobuf, for everything the provider sends back. One function per message, named
//! after it; none can fail, because every plain value has a wire form.

use crate::diag::{AttributePath, Diagnostic, Diagnostics, PathStep, Severity};
use crate::proto::tfplugin6 as pb;
use crate::types::*;

// ---- shared building blocks ----

/// `None` when neither encoding is set, so an absent value is sent as an absent message rather than as an
/// empty one (clients decode an absent value as null).
pub(crate) fn dynamic_value(v: DynamicValue) -> Option<pb::DynamicValue> {
    if v.msgpack.is_none() && v.json.is_none() {
        return None;
    }
    Some(pb::DynamicValue {
        msgpack: v.msgpack.unwrap_or_default(),
        json: v.json.unwrap_or_default(),
    })
}

pub(crate) fn resource_identity_data(v: Option<DynamicValue>) -> Option<pb::ResourceIdentityData> {
    let identity_data = dynamic_value(v?)?;
    Some(pb::ResourceIdentityData {
        identity_data: Some(identity_data),
    })
}

/// Severity is always ERROR or WARNING: [`Severity`] has no "invalid" variant, and severity 0 would be printed
/// as a bare line without failing the command.
pub(crate) fn severity(s: Severity) -> pb::diagnostic::Severity {
    match s {
        Severity::Error => pb::diagnostic::Severity::Error,
        Severity::Warning => pb::diagnostic::Severity::Warning,
    }
}

pub(crate) fn diagnostic(d: Diagnostic) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: severity(d.severity) as i32,
        summary: d.summary,
        detail: d.detail,
        attribute: d.attribute.filter(|p| !p.is_root()).map(attribute_path),
    }
}

pub(crate) fn diagnostics(ds: Diagnostics) -> Vec<pb::Diagnostic> {
    ds.0.into_iter().map(diagnostic).collect()
}

pub(crate) fn attribute_path(p: AttributePath) -> pb::AttributePath {
    use pb::attribute_path::step::Selector;
    let steps =
        p.0.into_iter()
            .map(|s| pb::attribute_path::Step {
                selector: Some(match s {
                    PathStep::Attribute(name) => Selector::AttributeName(name),
                    PathStep::Key(key) => Selector::ElementKeyString(key),
                    PathStep::Index(i) => Selector::ElementKeyInt(i),
                }),
            })
            .collect();
    pb::AttributePath { steps }
}

// ---- schemas ----

pub(crate) fn string_kind(k: StringKind) -> i32 {
    match k {
        StringKind::Plain => pb::StringKind::Plain as i32,
        StringKind::Markdown => pb::StringKind::Markdown as i32,
    }
}

pub(crate) fn schema(s: Schema) -> pb::Schema {
    pb::Schema {
        version: s.version,
        block: Some(schema_block(s.block)),
    }
}

pub(crate) fn schema_block(b: Block) -> pb::schema::Block {
    pb::schema::Block {
        version: b.version,
        attributes: b.attributes.into_iter().map(schema_attribute).collect(),
        block_types: b.block_types.into_iter().map(schema_nested_block).collect(),
        description: b.description,
        description_kind: string_kind(b.description_kind),
        deprecated: b.deprecated,
    }
}

pub(crate) fn schema_attribute(a: Attribute) -> pb::schema::Attribute {
    pb::schema::Attribute {
        name: a.name,
        r#type: a.ty.to_json_bytes(),
        nested_type: None,
        description: a.description,
        required: a.required,
        optional: a.optional,
        computed: a.computed,
        sensitive: a.sensitive,
        description_kind: string_kind(a.description_kind),
        deprecated: a.deprecated,
        write_only: a.write_only,
    }
}

pub(crate) fn nesting_mode(m: NestingMode) -> pb::schema::nested_block::NestingMode {
    use pb::schema::nested_block::NestingMode as N;
    match m {
        NestingMode::Single => N::Single,
        NestingMode::List => N::List,
        NestingMode::Set => N::Set,
        NestingMode::Map => N::Map,
        NestingMode::Group => N::Group,
    }
}

pub(crate) fn schema_nested_block(b: NestedBlock) -> pb::schema::NestedBlock {
    pb::schema::NestedBlock {
        type_name: b.type_name,
        block: Some(schema_block(b.block)),
        nesting: nesting_mode(b.nesting) as i32,
        min_items: b.min_items,
        max_items: b.max_items,
    }
}

pub(crate) fn function(f: Function) -> pb::Function {
    pb::Function {
        parameters: f.parameters.into_iter().map(function_parameter).collect(),
        variadic_parameter: f.variadic_parameter.map(function_parameter),
        r#return: Some(pb::function::Return {
            r#type: f.return_type.to_json_bytes(),
        }),
        summary: f.summary,
        description: f.description,
        description_kind: string_kind(f.description_kind),
        deprecation_message: f.deprecation_message,
    }
}

pub(crate) fn function_parameter(p: FunctionParameter) -> pb::function::Parameter {
    pb::function::Parameter {
        name: p.name,
        r#type: p.ty.to_json_bytes(),
        allow_null_value: p.allow_null_value,
        allow_unknown_values: p.allow_unknown_values,
        description: p.description,
        description_kind: string_kind(p.description_kind),
    }
}

pub(crate) fn server_capabilities(c: ServerCapabilities) -> pb::ServerCapabilities {
    pb::ServerCapabilities {
        plan_destroy: c.plan_destroy,
        get_provider_schema_optional: c.get_provider_schema_optional,
        move_resource_state: c.move_resource_state,
        generate_resource_config: false,
    }
}

// ---- responses, one per RPC ----

pub(crate) fn get_provider_schema_response(
    r: GetProviderSchemaResponse,
) -> pb::get_provider_schema::Response {
    pb::get_provider_schema::Response {
        provider: Some(schema(r.provider)),
        resource_schemas: r
            .resource_schemas
            .into_iter()
            .map(|(n, s)| (n, schema(s)))
            .collect(),
        data_source_schemas: r
            .data_source_schemas
            .into_iter()
            .map(|(n, s)| (n, schema(s)))
            .collect(),
        diagnostics: diagnostics(r.diagnostics),
        provider_meta: r.provider_meta.map(schema),
        list_resource_schemas: r
            .list_resource_schemas
            .into_iter()
            .map(|(n, s)| (n, schema(s)))
            .collect(),
        ephemeral_resource_schemas: r
            .ephemeral_resource_schemas
            .into_iter()
            .map(|(n, s)| (n, schema(s)))
            .collect(),
        server_capabilities: Some(server_capabilities(r.server_capabilities)),
        functions: r
            .functions
            .into_iter()
            .map(|(n, f)| (n, function(f)))
            .collect(),
        ..Default::default()
    }
}

/// GetMetadata is answered from the full schema: it lists names only, and nothing calls it on a hot path.
pub(crate) fn get_metadata_response(r: GetProviderSchemaResponse) -> pb::get_metadata::Response {
    use pb::get_metadata::{DataSourceMetadata, FunctionMetadata, ResourceMetadata};
    pb::get_metadata::Response {
        server_capabilities: Some(server_capabilities(r.server_capabilities)),
        diagnostics: diagnostics(r.diagnostics),
        data_sources: r
            .data_source_schemas
            .into_iter()
            .map(|(type_name, _)| DataSourceMetadata { type_name })
            .collect(),
        resources: r
            .resource_schemas
            .into_iter()
            .map(|(type_name, _)| ResourceMetadata { type_name })
            .collect(),
        functions: r
            .functions
            .into_iter()
            .map(|(name, _)| FunctionMetadata { name })
            .collect(),
        list_resources: r
            .list_resource_schemas
            .into_iter()
            .map(|(type_name, _)| pb::get_metadata::ListResourceMetadata { type_name })
            .collect(),
        ephemeral_resources: r
            .ephemeral_resource_schemas
            .into_iter()
            .map(|(type_name, _)| pb::get_metadata::EphemeralMetadata { type_name })
            .collect(),
        ..Default::default()
    }
}

pub(crate) fn get_functions_response(r: GetProviderSchemaResponse) -> pb::get_functions::Response {
    pb::get_functions::Response {
        functions: r
            .functions
            .into_iter()
            .map(|(n, f)| (n, function(f)))
            .collect(),
        diagnostics: diagnostics(r.diagnostics),
    }
}

pub(crate) fn validate_provider_config_response(
    d: Diagnostics,
) -> pb::validate_provider_config::Response {
    pb::validate_provider_config::Response {
        diagnostics: diagnostics(d),
    }
}

pub(crate) fn configure_provider_response(d: Diagnostics) -> pb::configure_provider::Response {
    pb::configure_provider::Response {
        diagnostics: diagnostics(d),
    }
}

pub(crate) fn validate_resource_config_response(
    d: Diagnostics,
) -> pb::validate_resource_config::Response {
    pb::validate_resource_config::Response {
        diagnostics: diagnostics(d),
    }
}

pub(crate) fn stop_provider_response(error: Option<String>) -> pb::stop_provider::Response {
    pb::stop_provider::Response {
        error: error.unwrap_or_default(),
    }
}

pub(crate) fn upgrade_resource_state_response(
    r: UpgradeResourceStateResponse,
) -> pb::upgrade_resource_state::Response {
    pb::upgrade_resource_state::Response {
        upgraded_state: dynamic_value(r.upgraded_state),
        diagnostics: diagnostics(r.diagnostics),
    }
}

pub(crate) fn read_resource_response(r: ReadResourceResponse) -> pb::read_resource::Response {
    pb::read_resource::Response {
        new_state: dynamic_value(r.new_state),
        diagnostics: diagnostics(r.diagnostics),
        private: r.private,
        deferred: None,
        new_identity: resource_identity_data(r.new_identity),
    }
}

pub(crate) fn plan_resource_change_response(
    r: PlanResourceChangeResponse,
) -> pb::plan_resource_change::Response {
    pb::plan_resource_change::Response {
        planned_state: dynamic_value(r.planned_state),
        requires_replace: r.requires_replace.into_iter().map(attribute_path).collect(),
        planned_private: r.planned_private,
        diagnostics: diagnostics(r.diagnostics),
        legacy_type_system: false,
        deferred: None,
        planned_identity: resource_identity_data(r.planned_identity),
    }
}

pub(crate) fn apply_resource_change_response(
    r: ApplyResourceChangeResponse,
) -> pb::apply_resource_change::Response {
    pb::apply_resource_change::Response {
        new_state: dynamic_value(r.new_state),
        private: r.private,
        diagnostics: diagnostics(r.diagnostics),
        legacy_type_system: false,
        new_identity: resource_identity_data(r.new_identity),
    }
}

pub(crate) fn imported_resource(
    r: ImportedResource,
) -> pb::import_resource_state::ImportedResource {
    pb::import_resource_state::ImportedResource {
        type_name: r.type_name,
        state: dynamic_value(r.state),
        private: r.private,
        identity: resource_identity_data(r.identity),
    }
}

pub(crate) fn import_resource_state_response(
    r: ImportResourceStateResponse,
) -> pb::import_resource_state::Response {
    pb::import_resource_state::Response {
        imported_resources: r
            .imported_resources
            .into_iter()
            .map(imported_resource)
            .collect(),
        diagnostics: diagnostics(r.diagnostics),
        deferred: None,
    }
}

pub(crate) fn function_error(e: FunctionError) -> pb::FunctionError {
    pb::FunctionError {
        text: e.text,
        function_argument: e.function_argument,
    }
}

pub(crate) fn call_function_response(r: CallFunctionResponse) -> pb::call_function::Response {
    pb::call_function::Response {
        result: dynamic_value(r.result),
        error: r.error.map(function_error),
    }
}

pub(crate) fn get_resource_identity_schemas_response(
    r: GetResourceIdentitySchemasResponse,
) -> pb::get_resource_identity_schemas::Response {
    pb::get_resource_identity_schemas::Response {
        identity_schemas: r
            .identity_schemas
            .into_iter()
            .map(|(n, s)| (n, identity_schema(s)))
            .collect(),
        diagnostics: diagnostics(r.diagnostics),
    }
}

pub(crate) fn identity_schema(s: IdentitySchema) -> pb::ResourceIdentitySchema {
    pb::ResourceIdentitySchema {
        version: s.version,
        identity_attributes: s
            .attributes
            .into_iter()
            .map(|a| pb::resource_identity_schema::IdentityAttribute {
                name: a.name,
                r#type: a.ty.to_json_bytes(),
                required_for_import: a.required_for_import,
                optional_for_import: a.optional_for_import,
                description: a.description,
            })
            .collect(),
    }
}

pub(crate) fn list_resource_event(e: ListResourceEvent) -> pb::list_resource::Event {
    pb::list_resource::Event {
        identity: resource_identity_data(e.identity),
        display_name: e.display_name,
        resource_object: e.resource_object.and_then(dynamic_value),
        diagnostic: diagnostics(e.diagnostics),
    }
}

pub(crate) fn validate_list_resource_config_response(
    d: Diagnostics,
) -> pb::validate_list_resource_config::Response {
    pb::validate_list_resource_config::Response {
        diagnostics: diagnostics(d),
    }
}

pub(crate) fn validate_data_resource_config_response(
    d: Diagnostics,
) -> pb::validate_data_resource_config::Response {
    pb::validate_data_resource_config::Response {
        diagnostics: diagnostics(d),
    }
}

pub(crate) fn read_data_source_response(
    r: ReadDataSourceResponse,
) -> pb::read_data_source::Response {
    pb::read_data_source::Response {
        state: dynamic_value(r.state),
        diagnostics: diagnostics(r.diagnostics),
        deferred: None,
    }
}

pub(crate) fn validate_ephemeral_resource_config_response(
    d: Diagnostics,
) -> pb::validate_ephemeral_resource_config::Response {
    pb::validate_ephemeral_resource_config::Response {
        diagnostics: diagnostics(d),
    }
}

/// A time as protobuf's Timestamp; a time before 1970 (never produced here) is sent as the epoch.
pub(crate) fn timestamp(t: std::time::SystemTime) -> prost_types::Timestamp {
    let since = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    prost_types::Timestamp {
        seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
    }
}

pub(crate) fn open_ephemeral_resource_response(
    r: OpenEphemeralResourceResponse,
) -> pb::open_ephemeral_resource::Response {
    pb::open_ephemeral_resource::Response {
        diagnostics: diagnostics(r.diagnostics),
        renew_at: r.renew_at.map(timestamp),
        result: dynamic_value(r.result),
        private: r.private,
        deferred: None,
    }
}

pub(crate) fn renew_ephemeral_resource_response(
    r: RenewEphemeralResourceResponse,
) -> pb::renew_ephemeral_resource::Response {
    pb::renew_ephemeral_resource::Response {
        diagnostics: diagnostics(r.diagnostics),
        renew_at: r.renew_at.map(timestamp),
        private: r.private,
    }
}

pub(crate) fn close_ephemeral_resource_response(
    d: Diagnostics,
) -> pb::close_ephemeral_resource::Response {
    pb::close_ephemeral_resource::Response {
        diagnostics: diagnostics(d),
    }
}
