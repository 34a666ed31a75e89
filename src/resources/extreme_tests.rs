//! Fail closed: every numeric and duration attribute of both resources and of the provider block, fed extreme
//! values through the same validate and plan calls the server answers, gives an error at that attribute and never
//! panics (the release binary aborts on a panic, taking every sibling operation with it).

use std::collections::BTreeMap;

use tfplugin::ProviderServer;
use tfplugin::diag::Diagnostics;
use tfplugin::types::{DynamicValue, PlanResourceChangeRequest, ValidateResourceConfigRequest};
use tfplugin::value::{Number, Type, Value, msgpack};
use tfplugin_framework::{FrameworkServer, Resource};

use super::cluster::ClusterResource;
use super::replica::ReplicaResource;
use super::tests::minimal_cluster;
use crate::provider::HaProvider;

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

fn num(n: impl Into<Number>) -> Value {
    Value::Number(n.into())
}

/// Numbers a user (or a hand-written spec) can send: huge, negative, zero, fractional, beyond f64.
fn extreme_numbers() -> Vec<(&'static str, Value)> {
    vec![
        ("i64::MAX", num(i64::MAX)),
        ("i64::MIN", num(i64::MIN)),
        ("u64::MAX", num(u64::MAX)),
        ("-1", num(-1i64)),
        ("0", num(0i64)),
        ("1.5", num(1.5f64)),
        ("1e308", num(1e308f64)),
        (
            "1e400",
            Value::Number("1e400".parse().expect("cty accepts it")),
        ),
        ("70000", num(70_000i64)),
        ("4294967297", num(4_294_967_297i64)),
    ]
}

const EXTREME_DURATIONS: &[&str] = &[
    "99999999999999999999999h",
    "4000000000000000h",
    "9223372036854775807s",
    "25h",
    "-1h",
    "0s",
    "",
    "1e308h",
    "5d",
    "1h 30m",
    "h",
];

fn timeouts(op: &str, v: &str) -> Value {
    Value::Object(
        ["create", "update", "delete"]
            .into_iter()
            .map(|k| (k.to_string(), if k == op { s(v) } else { Value::Null }))
            .collect(),
    )
}

/// Validate, then plan a create, as a client does; every diagnostic of both.
async fn validate_and_plan(
    server: &FrameworkServer<HaProvider>,
    type_name: &str,
    ty: &Type,
    cfg: &Value,
) -> Diagnostics {
    let mut all = server
        .validate_resource_config(ValidateResourceConfigRequest {
            type_name: type_name.into(),
            config: mp(ty, cfg),
            ..Default::default()
        })
        .await;
    let plan = server
        .plan_resource_change(PlanResourceChangeRequest {
            type_name: type_name.into(),
            prior_state: DynamicValue::msgpack(vec![0xc0]),
            proposed_new_state: mp(ty, cfg),
            config: mp(ty, cfg),
            ..Default::default()
        })
        .await;
    all.extend(plan.diagnostics);
    all
}

/// A number the user wrote is never reported as a bug in the provider.
fn assert_no_bug_report(diags: &Diagnostics, case: &str) {
    assert!(
        !diags
            .iter()
            .any(|d| d.detail.contains("bug in the provider")),
        "{case}: a user's number is reported as a provider bug: {diags:?}"
    );
}

fn assert_error_at(diags: &Diagnostics, path: &str, case: &str) {
    assert!(
        diags
            .iter()
            .any(|d| d.severity == tfplugin::diag::Severity::Error
                && d.attribute.as_ref().map(|p| p.to_string()).as_deref() == Some(path)),
        "{case}: want an error at {path}, got {diags:?}"
    );
}

#[tokio::test]
async fn cluster_numbers_and_durations_fail_closed_at_their_attribute() {
    let server = FrameworkServer::new(HaProvider::default());
    let ty = ClusterResource {
        settings: Default::default(),
    }
    .schema()
    .value_type();
    for attr in ["boot_disk_size_gb", "data_disk_size_gb", "api_port"] {
        for (label, v) in extreme_numbers() {
            let mut set = minimal_cluster();
            set.push((attr, v));
            let diags =
                validate_and_plan(&server, "ha_master_cluster", &ty, &object(&ty, &set)).await;
            assert_error_at(&diags, attr, &format!("{attr} = {label}"));
            assert_no_bug_report(&diags, &format!("{attr} = {label}"));
        }
    }
    for op in ["create", "update", "delete"] {
        for d in EXTREME_DURATIONS {
            let mut set = minimal_cluster();
            set.push(("timeouts", timeouts(op, d)));
            let diags =
                validate_and_plan(&server, "ha_master_cluster", &ty, &object(&ty, &set)).await;
            assert_error_at(
                &diags,
                &format!("timeouts.{op}"),
                &format!("timeouts.{op} = {d:?}"),
            );
        }
    }
}

#[tokio::test]
async fn replica_durations_and_spec_numbers_fail_closed() {
    let server = FrameworkServer::new(HaProvider::default());
    let cluster_ty = ClusterResource {
        settings: Default::default(),
    }
    .schema()
    .value_type();
    let plan = server
        .plan_resource_change(PlanResourceChangeRequest {
            type_name: "ha_master_cluster".into(),
            prior_state: DynamicValue::msgpack(vec![0xc0]),
            proposed_new_state: mp(&cluster_ty, &object(&cluster_ty, &minimal_cluster())),
            config: mp(&cluster_ty, &object(&cluster_ty, &minimal_cluster())),
            ..Default::default()
        })
        .await;
    let planned =
        msgpack::decode(&cluster_ty, plan.planned_state.msgpack.as_deref().unwrap()).unwrap();
    let spec = tfplugin_framework::plan::attr(&planned, "spec").clone();
    let ty = ReplicaResource {
        settings: Default::default(),
        stop: Default::default(),
    }
    .schema()
    .value_type();
    for op in ["create", "update", "delete"] {
        for d in EXTREME_DURATIONS {
            let cfg = object(
                &ty,
                &[("cluster", spec.clone()), ("timeouts", timeouts(op, d))],
            );
            let diags = validate_and_plan(&server, "ha_master_replica", &ty, &cfg).await;
            assert_error_at(
                &diags,
                &format!("timeouts.{op}"),
                &format!("timeouts.{op} = {d:?}"),
            );
        }
    }
    // A hand-written `cluster` object: numbers that are no integer cannot become a spec, and say where.
    for attr in ["boot_disk_size_gb", "data_disk_size_gb", "api_port"] {
        for (label, v) in extreme_numbers() {
            let Value::Object(mut m) = spec.clone() else {
                panic!("spec is an object")
            };
            m.insert(attr.into(), v.clone());
            let cfg = object(&ty, &[("cluster", Value::Object(m))]);
            let diags = validate_and_plan(&server, "ha_master_replica", &ty, &cfg).await;
            assert_no_bug_report(&diags, &format!("cluster.{attr} = {label}"));
            let integer = matches!(&v, Value::Number(n) if n.as_i64().is_some());
            if !integer {
                assert!(diags.has_error(), "cluster.{attr} = {label}: {diags:?}");
                assert!(
                    diags.iter().any(|d| d
                        .attribute
                        .as_ref()
                        .is_some_and(|p| p.to_string().starts_with("cluster"))),
                    "cluster.{attr} = {label}: the error names the attribute: {diags:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn provider_durations_fail_closed_at_their_attribute() {
    let server = FrameworkServer::new(HaProvider::default());
    let ty = crate::config::schema().value_type();
    for d in EXTREME_DURATIONS {
        let cfg = object(&ty, &[("etcd_dial_timeout", s(d))]);
        let diags = server.validate_provider_config(mp(&ty, &cfg)).await;
        assert_error_at(
            &diags,
            "etcd_dial_timeout",
            &format!("etcd_dial_timeout = {d:?}"),
        );
    }
}
