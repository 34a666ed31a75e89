//! Converter tests: the rules clients depend on (severity never 0, paths as steps, absent vs empty values).

use super::{from_proto, to_proto};
use crate::diag::{AttributePath, Diagnostic, Diagnostics};
use crate::proto::tfplugin6 as pb;
use crate::types::*;
use pb::attribute_path::step::Selector;

#[test]
fn diagnostics_are_never_severity_invalid() {
    let mut ds = Diagnostics::new();
    ds.error("bad", "fix it");
    ds.warning("careful", "");
    let wire = to_proto::diagnostics(ds);
    let severities: Vec<i32> = wire.iter().map(|d| d.severity).collect();
    assert_eq!(
        severities,
        vec![
            pb::diagnostic::Severity::Error as i32,
            pb::diagnostic::Severity::Warning as i32
        ]
    );
    assert!(
        wire.iter()
            .all(|d| d.severity != pb::diagnostic::Severity::Invalid as i32)
    );
    assert_eq!(pb::diagnostic::Severity::Error as i32, 1);
    assert_eq!(pb::diagnostic::Severity::Warning as i32, 2);
}

#[test]
fn diagnostic_keeps_summary_detail_and_path() {
    let d = Diagnostic::error("Invalid zone", "Use a zone of the cluster's region.")
        .at(AttributePath::attr("zone"));
    let wire = to_proto::diagnostic(d);
    assert_eq!(wire.summary, "Invalid zone");
    assert_eq!(wire.detail, "Use a zone of the cluster's region.");
    let steps = wire.attribute.expect("path is sent").steps;
    assert_eq!(steps.len(), 1);
    assert_eq!(
        steps[0].selector,
        Some(Selector::AttributeName("zone".into()))
    );
}

#[test]
fn diagnostic_without_path_sends_no_attribute() {
    let wire = to_proto::diagnostic(Diagnostic::warning("w", "d"));
    assert_eq!(wire.attribute, None);
    // A root path carries no information; sending an empty one would still make clients look for a source line.
    let mut d = Diagnostic::warning("w", "d");
    d.attribute = Some(AttributePath::root());
    assert_eq!(to_proto::diagnostic(d).attribute, None);
}

#[test]
fn attribute_path_maps_each_step_kind() {
    let p = AttributePath::attr("labels")
        .then_key("env")
        .then_attr("x")
        .then_index(3);
    let got: Vec<Option<Selector>> = to_proto::attribute_path(p)
        .steps
        .into_iter()
        .map(|s| s.selector)
        .collect();
    assert_eq!(
        got,
        vec![
            Some(Selector::AttributeName("labels".into())),
            Some(Selector::ElementKeyString("env".into())),
            Some(Selector::AttributeName("x".into())),
            Some(Selector::ElementKeyInt(3)),
        ]
    );
}

#[test]
fn requires_replace_paths_are_sent() {
    let resp = PlanResourceChangeResponse {
        planned_state: DynamicValue::msgpack(vec![0x80]),
        requires_replace: vec![
            AttributePath::attr("zone"),
            AttributePath::attr("disk").then_attr("size"),
        ],
        ..Default::default()
    };
    let wire = to_proto::plan_resource_change_response(resp);
    assert_eq!(wire.requires_replace.len(), 2);
    assert_eq!(wire.requires_replace[1].steps.len(), 2);
    assert!(!wire.legacy_type_system);
    assert_eq!(wire.planned_state.unwrap().msgpack, vec![0x80]);
}

#[test]
fn dynamic_value_empty_bytes_mean_absent() {
    let v = from_proto::dynamic_value(Some(pb::DynamicValue {
        msgpack: vec![0xc0],
        json: vec![],
    }));
    assert_eq!(v, DynamicValue::msgpack(vec![0xc0]));
    assert_eq!(from_proto::dynamic_value(None), DynamicValue::default());
    // And back: an entirely absent value is an absent message (clients decode it as null).
    assert_eq!(to_proto::dynamic_value(DynamicValue::default()), None);
    assert_eq!(
        to_proto::dynamic_value(DynamicValue::json(b"{}".to_vec()))
            .unwrap()
            .json,
        b"{}"
    );
}

#[test]
fn optional_values_keep_absent_apart_from_null() {
    assert_eq!(from_proto::optional_dynamic_value(None), None);
    let null = pb::DynamicValue {
        msgpack: vec![0xc0],
        json: vec![],
    };
    assert_eq!(
        from_proto::optional_dynamic_value(Some(null)),
        Some(DynamicValue::msgpack(vec![0xc0]))
    );
    assert_eq!(
        from_proto::resource_identity_data(Some(pb::ResourceIdentityData {
            identity_data: None
        })),
        None
    );
}

#[test]
fn requests_tolerate_absent_messages() {
    let r = from_proto::plan_resource_change_request(pb::plan_resource_change::Request::default());
    assert_eq!(r.prior_state, DynamicValue::default());
    assert!(!r.client_capabilities.deferral_allowed);
    assert_eq!(r.provider_meta, None);
    let u = from_proto::upgrade_resource_state_request(pb::upgrade_resource_state::Request {
        type_name: "t".into(),
        version: 2,
        raw_state: Some(pb::RawState {
            json: br#"{"id":"a"}"#.to_vec(),
            flatmap: Default::default(),
        }),
    });
    assert_eq!(u.raw_state.json.as_deref(), Some(&br#"{"id":"a"}"#[..]));
    assert_eq!(u.version, 2);
}

#[test]
fn client_capabilities_are_read() {
    let r = from_proto::configure_provider_request(pb::configure_provider::Request {
        terraform_version: "1.15.5".into(),
        config: Some(pb::DynamicValue {
            msgpack: vec![0x80],
            json: vec![],
        }),
        client_capabilities: Some(pb::ClientCapabilities {
            deferral_allowed: true,
            write_only_attributes_allowed: true,
        }),
    });
    assert_eq!(r.terraform_version, "1.15.5");
    assert!(
        r.client_capabilities.deferral_allowed
            && r.client_capabilities.write_only_attributes_allowed
    );
}

#[test]
fn schema_attribute_type_is_json_bytes() {
    let s = Schema {
        version: 1,
        block: Block {
            attributes: vec![Attribute {
                name: "id".into(),
                ty: crate::value::Type::String,
                computed: true,
                description_kind: StringKind::Markdown,
                ..Default::default()
            }],
            block_types: vec![NestedBlock {
                type_name: "disk".into(),
                nesting: NestingMode::List,
                ..Default::default()
            }],
            ..Default::default()
        },
    };
    let wire = to_proto::schema(s);
    let block = wire.block.unwrap();
    assert_eq!(block.attributes[0].r#type, b"\"string\"");
    assert_eq!(
        block.attributes[0].description_kind,
        pb::StringKind::Markdown as i32
    );
    assert_eq!(
        block.block_types[0].nesting,
        pb::schema::nested_block::NestingMode::List as i32
    );
}

#[test]
fn stop_provider_error_text() {
    assert_eq!(to_proto::stop_provider_response(None).error, "");
    assert_eq!(
        to_proto::stop_provider_response(Some("stuck".into())).error,
        "stuck"
    );
}

#[test]
fn function_error_keeps_argument_index() {
    let r = CallFunctionResponse {
        result: DynamicValue::default(),
        error: Some(FunctionError {
            text: "n must be odd".into(),
            function_argument: Some(0),
        }),
    };
    let wire = to_proto::call_function_response(r);
    assert_eq!(wire.result, None);
    assert_eq!(wire.error.unwrap().function_argument, Some(0));
}

#[test]
fn ephemeral_resources_are_listed_and_opened_with_their_renewal_time() {
    let schema = GetProviderSchemaResponse {
        ephemeral_resource_schemas: vec![("ha_admin_credentials".into(), Schema::default())],
        data_source_schemas: vec![("ha_admin_credentials".into(), Schema::default())],
        ..Default::default()
    };
    let wire = to_proto::get_provider_schema_response(schema.clone());
    assert!(
        wire.ephemeral_resource_schemas
            .contains_key("ha_admin_credentials")
    );
    assert!(
        wire.data_source_schemas
            .contains_key("ha_admin_credentials")
    );
    let meta = to_proto::get_metadata_response(schema);
    assert_eq!(
        meta.ephemeral_resources[0].type_name,
        "ha_admin_credentials"
    );

    let at = std::time::UNIX_EPOCH + std::time::Duration::new(1_800_000_000, 5);
    let opened = to_proto::open_ephemeral_resource_response(OpenEphemeralResourceResponse {
        result: DynamicValue::msgpack(vec![0xc0]),
        renew_at: Some(at),
        private: None,
        diagnostics: Diagnostics::new(),
    });
    let ts = opened.renew_at.expect("renew_at sent");
    assert_eq!((ts.seconds, ts.nanos), (1_800_000_000, 5));
    assert_eq!(opened.result.expect("result").msgpack, vec![0xc0]);
    // No renewal and no private bytes stay absent, not empty.
    let never =
        to_proto::open_ephemeral_resource_response(OpenEphemeralResourceResponse::default());
    assert!(never.renew_at.is_none() && never.private.is_none());

    let close =
        from_proto::close_ephemeral_resource_request(pb::close_ephemeral_resource::Request {
            type_name: "ha_admin_credentials".into(),
            private: Some(b"lease".to_vec()),
        });
    assert_eq!(close.private.as_deref(), Some(&b"lease"[..]));
}
