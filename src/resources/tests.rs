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
    assert!(tfplugin_framework::plan::attr(&spec, "ca_certificate").is_unknown());
    // The keys stay out of the spec a replica copies: it names their secret, known at plan.
    for key in [
        "ca_private_key",
        "etcd_peer_ca_private_key",
        "etcd_client_ca_private_key",
        "service_account_key",
    ] {
        assert!(
            tfplugin_framework::plan::attr(&spec, key).is_null(),
            "{key}"
        );
    }
    assert_eq!(
        tfplugin_framework::plan::attr(&spec, "keys_secret"),
        &s("projects/p/secrets/prod-cluster-keys")
    );
    assert_eq!(get("ca_key_store"), s("secret_manager"));
    assert!(get("private_keys").is_unknown());
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

/// Where a cluster's keys are planned (`cluster::plan_key_store`), from a prior state and a configuration.
mod key_store {
    use tfplugin::diag::{Diagnostics, Severity};
    use tfplugin_framework::Val;
    use tfplugin_framework::model::TfType;

    use super::super::cluster::plan_key_store;
    use super::super::cluster_model::{ClusterModel, PrivateKeys, spec_of};
    use super::super::spec::ClusterSpec;
    use super::*;

    /// A cluster named `prod` in project `p`, with its spec: its keys in the spec (`keys`), or none at all
    /// (imported).
    fn prior(store: Option<&str>, keys: bool) -> ClusterModel {
        let ty = <ClusterSpec as TfType>::tf_type();
        let mut spec: ClusterSpec =
            tfplugin_framework::model::from_value(&object(&ty, &[])).unwrap();
        let key = |k: &str| {
            Val::Known(if keys {
                format!("-----BEGIN PRIVATE KEY-----{k}")
            } else {
                String::new()
            })
        };
        spec.ca_private_key = key("ca");
        spec.etcd_peer_ca_private_key = key("peer");
        spec.etcd_client_ca_private_key = key("client");
        spec.service_account_key = key("sa");
        let mut m = ClusterModel {
            name: Val::Known("prod".into()),
            project: Val::Known("p".into()),
            ca_key_store: store.map_or(Val::Null, |s| Val::Known(s.into())),
            ..ClusterModel::default()
        };
        // As the cluster's plan made it: the settings from the model, the keys carried.
        m.spec = Val::Known(spec_of(&m, Some(&spec)));
        m
    }

    fn plan(prior: &ClusterModel, asked: Option<&str>) -> (ClusterModel, Diagnostics) {
        let config = ClusterModel {
            ca_key_store: asked.map_or(Val::Null, |s| Val::Known(s.into())),
            ..prior.clone()
        };
        let mut p = ClusterModel {
            ca_key_store: Val::Unknown,
            private_keys: Val::Unknown,
            ..prior.clone()
        };
        p.spec = Val::Known(spec_of(&p, prior.spec.known()));
        let mut diags = Diagnostics::new();
        plan_key_store(&config, Some(prior), &mut p, &mut diags);
        (p, diags)
    }

    fn at(diags: &Diagnostics, severity: Severity) -> Vec<String> {
        diags
            .iter()
            .filter(|d| d.severity == severity)
            .filter_map(|d| d.attribute.as_ref().map(|p| p.to_string()))
            .collect()
    }

    #[test]
    fn an_older_cluster_keeps_its_keys_where_they_are_and_is_warned() {
        for store in [Some("terraform_state"), None] {
            let prior = prior(store, true);
            let (p, diags) = plan(&prior, None);
            assert_eq!(
                p.ca_key_store, prior.ca_key_store,
                "{store:?}: nothing changes"
            );
            assert_eq!(p.private_keys, Val::Null);
            assert_eq!(p.spec, prior.spec, "{store:?}: replicas see no change");
            assert_eq!(at(&diags, Severity::Warning), ["ca_key_store"], "{store:?}");
            assert!(!diags.has_error());
        }
    }

    #[test]
    fn an_older_state_not_yet_refreshed_plans_the_store_its_configuration_names() {
        let prior = prior(None, true);
        let (p, diags) = plan(&prior, Some("terraform_state"));
        assert_eq!(p.ca_key_store, Val::Known("terraform_state".into()));
        assert_eq!(p.spec, prior.spec, "replicas see no change");
        assert_eq!(at(&diags, Severity::Warning), ["ca_key_store"]);
        assert!(!diags.has_error());
    }

    #[test]
    fn asking_for_secret_manager_moves_the_keys_out_of_the_spec_with_everything_known() {
        let prior = prior(Some("terraform_state"), true);
        let (p, diags) = plan(&prior, Some("secret_manager"));
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(p.ca_key_store, Val::Known("secret_manager".into()));
        let keys = p.private_keys.known().expect("known at plan");
        assert_eq!(
            Some(keys),
            prior.spec.known().and_then(PrivateKeys::from_spec).as_ref()
        );
        let spec = p.spec.known().unwrap();
        for key in [
            &spec.ca_private_key,
            &spec.etcd_peer_ca_private_key,
            &spec.etcd_client_ca_private_key,
            &spec.service_account_key,
        ] {
            assert_eq!(key, &Val::Null);
        }
        assert_eq!(
            spec.keys_secret,
            Val::Known("projects/p/secrets/prod-cluster-keys".into())
        );
    }

    #[test]
    fn keys_in_the_secret_stay_there_and_never_move_back() {
        let mut moved = prior(Some("secret_manager"), false);
        if let Val::Known(spec) = &mut moved.spec {
            spec.ca_private_key = Val::Null;
            spec.keys_secret = Val::Known("projects/p/secrets/prod-cluster-keys".into());
        }
        let (p, diags) = plan(&moved, None);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(p.ca_key_store, Val::Known("secret_manager".into()));
        assert_eq!(p.spec, moved.spec);
        let (_, diags) = plan(&moved, Some("terraform_state"));
        assert_eq!(at(&diags, Severity::Error), ["ca_key_store"]);
    }

    #[test]
    fn an_imported_cluster_has_no_keys_to_store() {
        let imported = prior(None, false);
        let (p, diags) = plan(&imported, None);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(p.ca_key_store, Val::Null);
        let (_, diags) = plan(&imported, Some("secret_manager"));
        assert_eq!(at(&diags, Severity::Error), ["ca_key_store"]);
    }

    /// An imported cluster whose spec carries the service-account key import read from a master: warned of while
    /// it stays there, and moved to the secret alone on `secret_manager`, the CA keys staying empty (a replica's
    /// plan reads "cannot sign" from them). `terraform_state` is no store it can have.
    #[test]
    fn an_imported_clusters_service_account_key_moves_to_the_secret_alone() {
        let mut imported = prior(None, false);
        if let Val::Known(spec) = &mut imported.spec {
            spec.service_account_key = Val::Known("-----BEGIN PRIVATE KEY-----sa".into());
        }
        let (p, diags) = plan(&imported, None);
        assert_eq!(p.ca_key_store, Val::Null);
        assert_eq!(p.spec, imported.spec, "nothing moves unasked");
        assert_eq!(at(&diags, Severity::Warning), ["ca_key_store"]);

        let (p, diags) = plan(&imported, Some("secret_manager"));
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(p.ca_key_store, Val::Known("secret_manager".into()));
        let keys = p.private_keys.known().and_then(PrivateKeys::keys).unwrap();
        assert_eq!(keys.service_account_key, "-----BEGIN PRIVATE KEY-----sa");
        assert!(
            keys.ca_key.is_empty()
                && keys.etcd_peer_ca_key.is_empty()
                && keys.etcd_client_ca_key.is_empty()
        );
        let spec = p.spec.known().unwrap();
        assert_eq!(spec.service_account_key, Val::Null);
        for key in [
            &spec.ca_private_key,
            &spec.etcd_peer_ca_private_key,
            &spec.etcd_client_ca_private_key,
        ] {
            assert_eq!(key, &Val::Known(String::new()));
        }
        assert_eq!(
            spec.keys_secret,
            Val::Known("projects/p/secrets/prod-cluster-keys".into())
        );

        let (_, diags) = plan(&imported, Some("terraform_state"));
        assert_eq!(at(&diags, Severity::Error), ["ca_key_store"]);
    }

    #[tokio::test]
    async fn a_new_cluster_starts_in_secret_manager_and_cannot_start_in_state() {
        let server = FrameworkServer::new(HaProvider::default());
        let (_, diags) = plan_cluster(
            &server,
            &[
                minimal_cluster(),
                vec![("ca_key_store", s("terraform_state"))],
            ]
            .concat(),
        )
        .await;
        assert!(
            diags.iter().any(|d| d.severity == Severity::Error
                && d.attribute.as_ref().map(|p| p.to_string()).as_deref() == Some("ca_key_store")),
            "{diags:?}"
        );
    }
}

/// A replica's `cluster` input must spell only the cluster's identity (so a Terragrunt mock is four lines), and a
/// value that spells no more is told from the cluster's planned spec: the one plans with a warning and never
/// applies, the other is what replicas run on.
#[tokio::test]
async fn a_cluster_input_needs_only_its_identity_and_a_stand_in_is_told_from_a_spec() {
    use super::spec::ClusterSpec;
    let Type::Object { attrs, optional } = ClusterSpec::input_type() else {
        panic!("the input is an object");
    };
    let required: Vec<&str> = attrs
        .keys()
        .filter(|k| !optional.contains(*k))
        .map(String::as_str)
        .collect();
    assert_eq!(required, ["name", "project", "region", "zone"]);

    let server = FrameworkServer::new(HaProvider::default());
    let (cluster_plan, _) = plan_cluster(&server, &minimal_cluster()).await;
    let planned = tfplugin_framework::plan::attr(&cluster_plan, "spec").clone();
    let spec: ClusterSpec = tfplugin_framework::model::from_value(&planned).unwrap();
    assert!(
        !spec.stand_in(),
        "a planned spec, its CAs unknown, is a spec"
    );

    let ty = <ClusterSpec as tfplugin_framework::model::TfType>::tf_type();
    let identity = [
        ("name", s("prod")),
        ("project", s("p")),
        ("region", s("europe-west1")),
        ("zone", s("europe-west1-b")),
    ];
    let mock: ClusterSpec = tfplugin_framework::model::from_value(&object(&ty, &identity)).unwrap();
    assert!(mock.stand_in());
    let (summary, detail) = mock.stand_in_words();
    assert!(
        summary.contains("names cluster prod but is not its spec"),
        "{summary}"
    );
    assert!(detail.contains("cannot be applied"), "{detail}");
}
