//! Plain Rust forms of the tfplugin6 messages a provider handles. The gRPC adapter converts to and from the
//! generated protobuf types; nothing outside this crate sees those.
//!
//! Values stay encoded ([`DynamicValue`]) at this layer: only code that knows the schema can decode them.

use crate::diag::{AttributePath, Diagnostics};
use crate::value::Type;

/// A value as the client sent it: msgpack (the usual form) or JSON (upgraded state, some older paths).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicValue {
    pub msgpack: Option<Vec<u8>>,
    pub json: Option<Vec<u8>>,
}

impl DynamicValue {
    pub fn msgpack(bytes: Vec<u8>) -> Self {
        Self {
            msgpack: Some(bytes),
            json: None,
        }
    }
    pub fn json(bytes: Vec<u8>) -> Self {
        Self {
            msgpack: None,
            json: Some(bytes),
        }
    }
}

/// Stored state before upgrade: cty JSON (or legacy flatmap, which we never wrote).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawState {
    pub json: Option<Vec<u8>>,
    pub flatmap: std::collections::HashMap<String, String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StringKind {
    #[default]
    Plain,
    Markdown,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    pub version: i64,
    pub block: Block,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Block {
    pub version: i64,
    pub attributes: Vec<Attribute>,
    pub block_types: Vec<NestedBlock>,
    pub description: String,
    pub description_kind: StringKind,
    pub deprecated: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attribute {
    pub name: String,
    /// The cty type (sent as JSON bytes).
    pub ty: Type,
    pub description: String,
    pub description_kind: StringKind,
    pub required: bool,
    pub optional: bool,
    pub computed: bool,
    pub sensitive: bool,
    pub deprecated: bool,
    pub write_only: bool,
}

// `Type` is declared in `value::ty`; deriving there would move this rule away from the schema types using it.
#[allow(clippy::derivable_impls)]
impl Default for Type {
    fn default() -> Self {
        Type::Dynamic
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NestingMode {
    #[default]
    Single,
    List,
    Set,
    Map,
    Group,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NestedBlock {
    pub type_name: String,
    pub block: Block,
    pub nesting: NestingMode,
    pub min_items: i64,
    pub max_items: i64,
}

/// A provider-defined function's signature (`provider::ha::quorum(n)`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Function {
    pub parameters: Vec<FunctionParameter>,
    pub variadic_parameter: Option<FunctionParameter>,
    pub return_type: Type,
    pub summary: String,
    pub description: String,
    pub description_kind: StringKind,
    pub deprecation_message: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionParameter {
    pub name: String,
    pub ty: Type,
    pub allow_null_value: bool,
    pub allow_unknown_values: bool,
    pub description: String,
    pub description_kind: StringKind,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCapabilities {
    pub plan_destroy: bool,
    pub get_provider_schema_optional: bool,
    pub move_resource_state: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCapabilities {
    pub deferral_allowed: bool,
    pub write_only_attributes_allowed: bool,
}

#[derive(Debug, Clone, Default)]
pub struct GetProviderSchemaResponse {
    pub provider: Schema,
    pub provider_meta: Option<Schema>,
    /// Resource type name → schema, in the order to list them.
    pub resource_schemas: Vec<(String, Schema)>,
    pub data_source_schemas: Vec<(String, Schema)>,
    /// List resource type name → the schema of its `config` block (`terraform query`, Terraform 1.14+).
    pub list_resource_schemas: Vec<(String, Schema)>,
    /// Ephemeral resource type name → schema (Terraform 1.10+; OpenTofu 1.6 never asks for them).
    pub ephemeral_resource_schemas: Vec<(String, Schema)>,
    pub functions: Vec<(String, Function)>,
    pub server_capabilities: ServerCapabilities,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Default)]
pub struct ConfigureProviderRequest {
    pub terraform_version: String,
    pub config: DynamicValue,
    pub client_capabilities: ClientCapabilities,
}

#[derive(Debug, Clone, Default)]
pub struct ValidateResourceConfigRequest {
    pub type_name: String,
    pub config: DynamicValue,
    pub client_capabilities: ClientCapabilities,
}

#[derive(Debug, Clone, Default)]
pub struct UpgradeResourceStateRequest {
    pub type_name: String,
    pub version: i64,
    pub raw_state: RawState,
}

#[derive(Debug, Clone, Default)]
pub struct UpgradeResourceStateResponse {
    pub upgraded_state: DynamicValue,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Default)]
pub struct ReadResourceRequest {
    pub type_name: String,
    pub current_state: DynamicValue,
    pub private: Vec<u8>,
    pub provider_meta: Option<DynamicValue>,
    pub client_capabilities: ClientCapabilities,
    pub current_identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct ReadResourceResponse {
    pub new_state: DynamicValue,
    pub diagnostics: Diagnostics,
    pub private: Vec<u8>,
    pub new_identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct PlanResourceChangeRequest {
    pub type_name: String,
    pub prior_state: DynamicValue,
    pub proposed_new_state: DynamicValue,
    pub config: DynamicValue,
    pub prior_private: Vec<u8>,
    pub provider_meta: Option<DynamicValue>,
    pub client_capabilities: ClientCapabilities,
    pub prior_identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct PlanResourceChangeResponse {
    pub planned_state: DynamicValue,
    pub requires_replace: Vec<AttributePath>,
    pub planned_private: Vec<u8>,
    pub diagnostics: Diagnostics,
    pub planned_identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct ApplyResourceChangeRequest {
    pub type_name: String,
    pub prior_state: DynamicValue,
    pub planned_state: DynamicValue,
    pub config: DynamicValue,
    pub planned_private: Vec<u8>,
    pub provider_meta: Option<DynamicValue>,
    pub planned_identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct ApplyResourceChangeResponse {
    pub new_state: DynamicValue,
    pub private: Vec<u8>,
    pub diagnostics: Diagnostics,
    pub new_identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct ImportResourceStateRequest {
    pub type_name: String,
    pub id: String,
    pub client_capabilities: ClientCapabilities,
    pub identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct ImportedResource {
    pub type_name: String,
    pub state: DynamicValue,
    pub private: Vec<u8>,
    pub identity: Option<DynamicValue>,
}

#[derive(Debug, Clone, Default)]
pub struct ImportResourceStateResponse {
    pub imported_resources: Vec<ImportedResource>,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Default)]
pub struct CallFunctionRequest {
    pub name: String,
    pub arguments: Vec<DynamicValue>,
}

/// A function error: a message and, optionally, which argument caused it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionError {
    pub text: String,
    pub function_argument: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct CallFunctionResponse {
    pub result: DynamicValue,
    pub error: Option<FunctionError>,
}

/// One attribute of a resource identity (Terraform 1.12+): a value that names the remote object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdentityAttribute {
    pub name: String,
    pub ty: Type,
    pub required_for_import: bool,
    pub optional_for_import: bool,
    pub description: String,
}

/// A resource type's identity schema. Its version moves only when the identity's shape changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdentitySchema {
    pub version: i64,
    pub attributes: Vec<IdentityAttribute>,
}

#[derive(Debug, Clone, Default)]
pub struct GetResourceIdentitySchemasResponse {
    /// Resource type name → identity schema, for the resource types that have one.
    pub identity_schemas: Vec<(String, IdentitySchema)>,
    pub diagnostics: Diagnostics,
}

/// `terraform query` (Terraform 1.14+): list the remote objects of a type that a `list` block's `config` selects.
#[derive(Debug, Clone, Default)]
pub struct ListResourceRequest {
    pub type_name: String,
    pub config: DynamicValue,
    /// Whether each result should carry the full resource object (for `-generate-config-out`).
    pub include_resource_object: bool,
    /// At most this many results (0: no limit given).
    pub limit: i64,
}

/// One found object, or (with only diagnostics) a failure of the listing.
#[derive(Debug, Clone, Default)]
pub struct ListResourceEvent {
    pub identity: Option<DynamicValue>,
    pub display_name: String,
    pub resource_object: Option<DynamicValue>,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Default)]
pub struct ValidateListResourceConfigRequest {
    pub type_name: String,
    pub config: DynamicValue,
}

#[derive(Debug, Clone, Default)]
pub struct ValidateDataResourceConfigRequest {
    pub type_name: String,
    pub config: DynamicValue,
}

/// A data source read: the configuration in, the whole object (config plus computed values) out.
#[derive(Debug, Clone, Default)]
pub struct ReadDataSourceRequest {
    pub type_name: String,
    pub config: DynamicValue,
    pub provider_meta: Option<DynamicValue>,
    pub client_capabilities: ClientCapabilities,
}

#[derive(Debug, Clone, Default)]
pub struct ReadDataSourceResponse {
    pub state: DynamicValue,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Default)]
pub struct ValidateEphemeralResourceConfigRequest {
    pub type_name: String,
    pub config: DynamicValue,
}

/// Opens an ephemeral resource (Terraform 1.10+): a value made for this run only, never written to state or plan.
#[derive(Debug, Clone, Default)]
pub struct OpenEphemeralResourceRequest {
    pub type_name: String,
    pub config: DynamicValue,
    pub client_capabilities: ClientCapabilities,
}

#[derive(Debug, Clone, Default)]
pub struct OpenEphemeralResourceResponse {
    pub result: DynamicValue,
    pub diagnostics: Diagnostics,
    /// When the client should call Renew while it still uses the value; `None`: never.
    pub renew_at: Option<std::time::SystemTime>,
    /// Opaque bytes the client hands back to Renew and Close.
    pub private: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Default)]
pub struct RenewEphemeralResourceRequest {
    pub type_name: String,
    pub private: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Default)]
pub struct RenewEphemeralResourceResponse {
    pub diagnostics: Diagnostics,
    pub renew_at: Option<std::time::SystemTime>,
    pub private: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Default)]
pub struct CloseEphemeralResourceRequest {
    pub type_name: String,
    pub private: Option<Vec<u8>>,
}
