//! Generated protobuf → plain types, for everything the client sends. One function per message, named after it.
//!
//! Client input never makes these fail or panic: proto3 has no required fields, so an absent message becomes the
//! plain type's empty value, and deciding whether that is acceptable is left to code that knows the schema.

use std::collections::HashMap;

use crate::proto::tfplugin6 as pb;
use crate::types::*;

// ---- shared building blocks ----

/// An empty byte string means "this encoding was not used": real msgpack is never empty (null is `c0`).
pub(crate) fn dynamic_value(v: Option<pb::DynamicValue>) -> DynamicValue {
    let Some(v) = v else {
        return DynamicValue::default();
    };
    let non_empty = |b: Vec<u8>| (!b.is_empty()).then_some(b);
    DynamicValue {
        msgpack: non_empty(v.msgpack),
        json: non_empty(v.json),
    }
}

/// `None` for an absent value; an optional field keeps the distinction between "absent" and "null".
pub(crate) fn optional_dynamic_value(v: Option<pb::DynamicValue>) -> Option<DynamicValue> {
    v.map(|v| dynamic_value(Some(v)))
}

pub(crate) fn resource_identity_data(v: Option<pb::ResourceIdentityData>) -> Option<DynamicValue> {
    optional_dynamic_value(v?.identity_data)
}

pub(crate) fn client_capabilities(c: Option<pb::ClientCapabilities>) -> ClientCapabilities {
    let c = c.unwrap_or_default();
    ClientCapabilities {
        deferral_allowed: c.deferral_allowed,
        write_only_attributes_allowed: c.write_only_attributes_allowed,
    }
}

pub(crate) fn raw_state(r: Option<pb::RawState>) -> RawState {
    let r = r.unwrap_or_default();
    RawState {
        json: (!r.json.is_empty()).then_some(r.json),
        flatmap: r.flatmap.into_iter().collect::<HashMap<_, _>>(),
    }
}

// ---- requests, one per RPC ----

pub(crate) fn validate_provider_config_request(
    r: pb::validate_provider_config::Request,
) -> DynamicValue {
    dynamic_value(r.config)
}

pub(crate) fn configure_provider_request(
    r: pb::configure_provider::Request,
) -> ConfigureProviderRequest {
    ConfigureProviderRequest {
        terraform_version: r.terraform_version,
        config: dynamic_value(r.config),
        client_capabilities: client_capabilities(r.client_capabilities),
    }
}

pub(crate) fn validate_resource_config_request(
    r: pb::validate_resource_config::Request,
) -> ValidateResourceConfigRequest {
    ValidateResourceConfigRequest {
        type_name: r.type_name,
        config: dynamic_value(r.config),
        client_capabilities: client_capabilities(r.client_capabilities),
    }
}

pub(crate) fn upgrade_resource_state_request(
    r: pb::upgrade_resource_state::Request,
) -> UpgradeResourceStateRequest {
    UpgradeResourceStateRequest {
        type_name: r.type_name,
        version: r.version,
        raw_state: raw_state(r.raw_state),
    }
}

pub(crate) fn read_resource_request(r: pb::read_resource::Request) -> ReadResourceRequest {
    ReadResourceRequest {
        type_name: r.type_name,
        current_state: dynamic_value(r.current_state),
        private: r.private,
        provider_meta: optional_dynamic_value(r.provider_meta),
        client_capabilities: client_capabilities(r.client_capabilities),
        current_identity: resource_identity_data(r.current_identity),
    }
}

pub(crate) fn plan_resource_change_request(
    r: pb::plan_resource_change::Request,
) -> PlanResourceChangeRequest {
    PlanResourceChangeRequest {
        type_name: r.type_name,
        prior_state: dynamic_value(r.prior_state),
        proposed_new_state: dynamic_value(r.proposed_new_state),
        config: dynamic_value(r.config),
        prior_private: r.prior_private,
        provider_meta: optional_dynamic_value(r.provider_meta),
        client_capabilities: client_capabilities(r.client_capabilities),
        prior_identity: resource_identity_data(r.prior_identity),
    }
}

pub(crate) fn apply_resource_change_request(
    r: pb::apply_resource_change::Request,
) -> ApplyResourceChangeRequest {
    ApplyResourceChangeRequest {
        type_name: r.type_name,
        prior_state: dynamic_value(r.prior_state),
        planned_state: dynamic_value(r.planned_state),
        config: dynamic_value(r.config),
        planned_private: r.planned_private,
        provider_meta: optional_dynamic_value(r.provider_meta),
        planned_identity: resource_identity_data(r.planned_identity),
    }
}

pub(crate) fn import_resource_state_request(
    r: pb::import_resource_state::Request,
) -> ImportResourceStateRequest {
    ImportResourceStateRequest {
        type_name: r.type_name,
        id: r.id,
        client_capabilities: client_capabilities(r.client_capabilities),
        identity: resource_identity_data(r.identity),
    }
}

pub(crate) fn call_function_request(r: pb::call_function::Request) -> CallFunctionRequest {
    CallFunctionRequest {
        name: r.name,
        arguments: r
            .arguments
            .into_iter()
            .map(|a| dynamic_value(Some(a)))
            .collect(),
    }
}

pub(crate) fn list_resource_request(r: pb::list_resource::Request) -> ListResourceRequest {
    ListResourceRequest {
        type_name: r.type_name,
        config: dynamic_value(r.config),
        include_resource_object: r.include_resource_object,
        limit: r.limit,
    }
}

pub(crate) fn validate_list_resource_config_request(
    r: pb::validate_list_resource_config::Request,
) -> ValidateListResourceConfigRequest {
    ValidateListResourceConfigRequest {
        type_name: r.type_name,
        config: dynamic_value(r.config),
    }
}

pub(crate) fn validate_data_resource_config_request(
    r: pb::validate_data_resource_config::Request,
) -> ValidateDataResourceConfigRequest {
    ValidateDataResourceConfigRequest {
        type_name: r.type_name,
        config: dynamic_value(r.config),
    }
}

pub(crate) fn read_data_source_request(r: pb::read_data_source::Request) -> ReadDataSourceRequest {
    ReadDataSourceRequest {
        type_name: r.type_name,
        config: dynamic_value(r.config),
        provider_meta: optional_dynamic_value(r.provider_meta),
        client_capabilities: client_capabilities(r.client_capabilities),
    }
}

pub(crate) fn validate_ephemeral_resource_config_request(
    r: pb::validate_ephemeral_resource_config::Request,
) -> ValidateEphemeralResourceConfigRequest {
    ValidateEphemeralResourceConfigRequest {
        type_name: r.type_name,
        config: dynamic_value(r.config),
    }
}

pub(crate) fn open_ephemeral_resource_request(
    r: pb::open_ephemeral_resource::Request,
) -> OpenEphemeralResourceRequest {
    OpenEphemeralResourceRequest {
        type_name: r.type_name,
        config: dynamic_value(r.config),
        client_capabilities: client_capabilities(r.client_capabilities),
    }
}

pub(crate) fn renew_ephemeral_resource_request(
    r: pb::renew_ephemeral_resource::Request,
) -> RenewEphemeralResourceRequest {
    RenewEphemeralResourceRequest {
        type_name: r.type_name,
        private: r.private,
    }
}

pub(crate) fn close_ephemeral_resource_request(
    r: pb::close_ephemeral_resource::Request,
) -> CloseEphemeralResourceRequest {
    CloseEphemeralResourceRequest {
        type_name: r.type_name,
        private: r.private,
    }
}
