//! Resource-level tests through the framework server, with values encoded exactly as clients send them.

use std::collections::BTreeMap;

use tfplugin::ProviderServer;
use tfplugin::types::{DynamicValue, PlanResourceChangeRequest, ValidateResourceConfigRequest};
use tfplugin::value::{Type, Value, msgpack};
use tfplugin_framework::{FrameworkServer, Resource};

use super::cluster::ClusterResource;
use super::cluster_model::ClusterModel;
use super::replica::ReplicaResource;
use super::replica_model::ReplicaModel;
use crate::provider::HaProvider;

/// An object of the schema's type with every attribute null, plus the given values.
fn object(ty: &Type, set: &[(&str, Value)]) -> Value {
    let Type::Object { attrs, .. } = ty else {
        panic!("resource types are objects")
    };
    let mut m: BTreeMap<String, Value> = attrs.keys().map(|k| (k.clone(), Value::Null)).collect();
    for (k, v) in set {
        assert!(m.contains_key(*k), "no attribute {k}");
        m.insert(k.to_string(), v.clone());
    }
    Value::Object(m)
}

fn mp(ty: &Type, v: &Value) -> DynamicValue {
    DynamicValue::msgpack(msgpack::encode(ty, v).expect("encodes"))
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

#[test]
fn models_match_schemas_one_to_one() {
    let cluster_ty = ClusterResource {
        settings: Default::default(),
    }
    .schema()
    .value_type();
    let m: ClusterModel = tfplugin_framework::model::from_value(&object(&cluster_ty, &[]))
        .expect("cluster model matches schema");
    let back = tfplugin_framework::model::to_value(&m).unwrap();
    msgpack::encode(&cluster_ty, &back).expect("cluster model encodes with its schema type");

    let replica_ty = ReplicaResource {
        settings: Default::default(),
        stop: Default::default(),
    }
    .schema()
    .value_type();
    let m: ReplicaModel = tfplugin_framework::model::from_value(&object(&replica_ty, &[]))
        .expect("replica model matches schema");
    let back = tfplugin_framework::model::to_value(&m).unwrap();
    msgpack::encode(&replica_ty, &back).expect("replica model encodes with its schema type");
}

async fn plan_cluster(
    server: &FrameworkServer<HaProvider>,
    config: &[(&str, Value)],
) -> (Value, tfplugin::diag::Diagnostics) {
    let ty = ClusterResource {
        settings: Default::default(),
    }
    .schema()
    .value_type();
    let cfg = object(&ty, config);
    let resp = server
        .plan_resource_change(PlanResourceChangeRequest {
            type_name: "ha_master_cluster".into(),
            prior_state: DynamicValue::msgpack(vec![0xc0]),
            proposed_new_state: mp(&ty, &cfg),
            config: mp(&ty, &cfg),
            ..Default::default()
        })
        .await;
    let planned = msgpack::decode(
        &ty,
        resp.planned_state.msgpack.as_deref().unwrap_or(&[0xc0]),
    )
    .unwrap();
    (planned, resp.diagnostics)
}

/// A cluster's configuration with only what has no default: a name, a project, a zone and where etcd admits
/// Terraform from.
pub(super) fn minimal_cluster() -> Vec<(&'static str, Value)> {
    vec![
        ("name", s("prod")),
        ("project", s("p")),
        ("zone", s("europe-west1-b")),
        (
            "etcd_client_source_ranges",
            Value::List(vec![s("10.0.0.0/8")]),
        ),
    ]
}

#[tokio::test]
async fn cluster_create_plan_knows_settings_and_not_generated_material() {
    let server = FrameworkServer::new(HaProvider::default());
    let (planned, diags) = plan_cluster(&server, &minimal_cluster()).await;
    assert!(!diags.has_error(), "{diags:?}");
    // The defaults run the masters as the project's default service account, open the API to the Internet and
    // put the masters on the default network: a create says so.
    assert_eq!(
        warned_at(&diags),
        ["service_account", "api_source_ranges", "network"],
        "{diags:?}"
    );
    let get = |k: &str| tfplugin_framework::plan::attr(&planned, k).clone();
    assert_eq!(get("id"), s("p/europe-west1/prod"));
    assert_eq!(
        get("region"),
        s("europe-west1"),
        "region derives from the zone"
    );
    assert_eq!(
        get("machine_type"),
        s("e2-standard-2"),
        "defaults are planned"
    );
    // Unset versions: the provider's release for new clusters, and the etcd that release calls for.
    assert_eq!(
        get("kubernetes_version"),
        s(ha_domain::kubernetes_version::DEFAULT_FOR_NEW)
    );
    assert_eq!(get("etcd_version"), s("3.5"));
    // An image the startup contract runs on (cloud-init and apt; the masters install the rest).
    assert_eq!(get("image"), s(ha_domain::image::DEFAULT_FOR_NEW));
    assert!(get("external_ip").is_unknown());
    let spec = get("spec");
    assert_eq!(
        tfplugin_framework::plan::attr(&spec, "region"),
        &s("europe-west1")
    );
    assert!(tfplugin_framework::plan::attr(&spec, "ca_private_key").is_unknown());
}

/// The attributes the plan's warnings are at, in order.
fn warned_at(diags: &tfplugin::diag::Diagnostics) -> Vec<String> {
    diags
        .iter()
        .filter(|d| d.severity == tfplugin::diag::Severity::Warning)
        .filter_map(|d| d.attribute.as_ref().map(|p| p.to_string()))
        .collect()
}

#[tokio::test]
async fn masters_with_their_own_service_account_are_not_warned_of_it() {
    let server = FrameworkServer::new(HaProvider::default());
    let (_, diags) = plan_cluster(
        &server,
        &[
            minimal_cluster(),
            vec![("service_account", s("masters@p.iam.gserviceaccount.com"))],
        ]
        .concat(),
    )
    .await;
    assert!(!diags.has_error(), "{diags:?}");
    assert_eq!(
        warned_at(&diags),
        ["api_source_ranges", "network"],
        "{diags:?}"
    );
}

#[tokio::test]
async fn cluster_plan_errors_name_the_attribute() {
    let server = FrameworkServer::new(HaProvider::default());
    let (_, diags) = plan_cluster(
        &server,
        &[
            ("name", s("Prod_1")),
            ("project", s("p")),
            ("region", s("us-central1")),
            ("zone", s("europe-west1-b")),
            ("machine_type", s("e2-huge")),
            (
                "etcd_client_source_ranges",
                Value::List(vec![s("10.0.0.1/8")]),
            ),
        ],
    )
    .await;
    let at = |path: &str| {
        diags
            .iter()
            .any(|d| d.attribute.as_ref().map(|p| p.to_string()).as_deref() == Some(path))
    };
    assert!(at("name"), "{diags:?}");
    assert!(at("zone"), "{diags:?}");
    assert!(at("machine_type"), "{diags:?}");
    assert!(at("etcd_client_source_ranges[0]"), "{diags:?}");
}

#[tokio::test]
async fn replica_zone_must_follow_the_cluster() {
    let server = FrameworkServer::new(HaProvider::default());
    let (cluster_plan, _) = plan_cluster(&server, &minimal_cluster()).await;
    let spec = tfplugin_framework::plan::attr(&cluster_plan, "spec").clone();
    let ty = ReplicaResource {
        settings: Default::default(),
        stop: Default::default(),
    }
    .schema()
    .value_type();
    for (zone, expect) in [
        ("europe-west1-b", None),
        ("europe-west1-c", Some("multizone = true")),
        ("us-central1-a", Some("region")),
    ] {
        let cfg = object(&ty, &[("cluster", spec.clone()), ("zone", s(zone))]);
        let diags = server
            .validate_resource_config(ValidateResourceConfigRequest {
                type_name: "ha_master_replica".into(),
                config: mp(&ty, &cfg),
                ..Default::default()
            })
            .await;
        match expect {
            None => assert!(!diags.has_error(), "{zone}: {diags:?}"),
            Some(text) => {
                let d = diags
                    .iter()
                    .next()
                    .unwrap_or_else(|| panic!("{zone}: expected an error"));
                assert_eq!(
                    d.attribute.as_ref().map(|p| p.to_string()).as_deref(),
                    Some("zone")
                );
                assert!(
                    format!("{} {}", d.summary, d.detail).contains(text),
                    "{zone}: {d:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn identities_and_the_list_resource_are_declared_and_an_identity_becomes_the_import_id() {
    use tfplugin::types::ImportResourceStateRequest;
    let server = FrameworkServer::new(HaProvider::default());
    let schemas = server
        .get_resource_identity_schemas()
        .await
        .identity_schemas;
    let names = |ty: &str| -> Vec<String> {
        let (_, s) = schemas
            .iter()
            .find(|(n, _)| n == ty)
            .expect("an identity schema");
        s.attributes.iter().map(|a| a.name.clone()).collect()
    };
    assert_eq!(names("ha_master_cluster"), ["project", "region", "name"]);
    assert_eq!(names("ha_master_replica"), ["project", "zone", "name"]);
    let listed: Vec<String> = server
        .get_provider_schema()
        .await
        .list_resource_schemas
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(listed, ["ha_master_replica"]);

    // `import { identity = … }` sends no id: the identity is turned into `<project>/<zone>/<name>`, which import
    // then parses (here it stops at the zone, before any API call).
    let ty = Type::object([
        ("project", Type::String),
        ("zone", Type::String),
        ("name", Type::String),
    ]);
    let import = |identity: Value| ImportResourceStateRequest {
        type_name: "ha_master_replica".into(),
        id: String::new(),
        identity: Some(mp(&ty, &identity)),
        ..Default::default()
    };
    let identity = |zone: &str, name: &str| {
        Value::Object(
            [("project", s("p")), ("zone", s(zone)), ("name", s(name))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    };
    let resp = server
        .import_resource_state(import(identity("nowhere", "x")))
        .await;
    let d = resp.diagnostics.iter().next().expect("an error");
    assert!(
        d.detail
            .contains("\"nowhere\" in \"p/nowhere/x\" is not a GCE zone"),
        "{d:?}"
    );
    let resp = server
        .import_resource_state(import(identity("europe-west1-b", "")))
        .await;
    let d = resp.diagnostics.iter().next().expect("an error");
    assert_eq!(d.summary, "Invalid import identity", "{d:?}");
    assert!(d.detail.contains("the identity has no name"), "{d:?}");
}
