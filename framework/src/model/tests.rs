use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use tfplugin::value::{Type, Value, msgpack};

use super::{Val, from_value, to_value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Timeouts {
    create: Val<String>,
    delete: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Disk {
    size_gb: i64,
    ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Model {
    id: Val<String>,
    zone: String,
    enabled: bool,
    count: Val<i64>,
    tags: Val<Vec<String>>,
    labels: Val<BTreeMap<String, String>>,
    disks: Vec<Disk>,
    timeouts: Val<Timeouts>,
    note: Option<String>,
}

fn model_type() -> Type {
    Type::object([
        ("id", Type::String),
        ("zone", Type::String),
        ("enabled", Type::Bool),
        ("count", Type::Number),
        ("tags", Type::list(Type::String)),
        ("labels", Type::map(Type::String)),
        (
            "disks",
            Type::list(Type::object([
                ("size_gb", Type::Number),
                ("ratio", Type::Number),
            ])),
        ),
        (
            "timeouts",
            Type::object([("create", Type::String), ("delete", Type::String)]),
        ),
        ("note", Type::String),
    ])
}

fn sample() -> Model {
    Model {
        id: Val::Unknown,
        zone: "europe-west1-b".into(),
        enabled: true,
        count: Val::Known(3),
        tags: Val::Known(vec!["a".into(), "b".into()]),
        labels: Val::Null,
        disks: vec![Disk {
            size_gb: 100,
            ratio: 0.25,
        }],
        timeouts: Val::Known(Timeouts {
            create: Val::Unknown,
            delete: None,
        }),
        note: Some("hi".into()),
    }
}

#[test]
fn round_trips_through_value_and_msgpack() {
    let m = sample();
    let v = to_value(&m).unwrap();
    assert!(v.get("id").unwrap().is_unknown());
    assert!(
        v.get("timeouts")
            .unwrap()
            .get("create")
            .unwrap()
            .is_unknown()
    );
    assert!(v.get("labels").unwrap().is_null());
    assert_eq!(from_value::<Model>(&v).unwrap(), m);
    // And through the wire, where the value gains its schema's types.
    let bytes = msgpack::encode(&model_type(), &v).unwrap();
    let decoded = msgpack::decode(&model_type(), &bytes).unwrap();
    assert_eq!(from_value::<Model>(&decoded).unwrap(), m);
}

#[test]
fn plain_fields_refuse_null_and_unknown_by_name() {
    let mut v = to_value(&sample()).unwrap();
    *v.get_mut("zone").unwrap() = Value::unknown();
    let e = from_value::<Model>(&v).unwrap_err();
    assert_eq!(e.path(), "zone");
    assert_eq!(
        e.to_string(),
        "attribute `zone`: value is unknown, but its model field is not a Val"
    );

    let mut v = to_value(&sample()).unwrap();
    *v.get_mut("disks").unwrap() = Value::list([Value::object([
        ("size_gb", Value::Null),
        ("ratio", 1.0.into()),
    ])]);
    assert_eq!(
        from_value::<Model>(&v).unwrap_err().path(),
        "disks[0].size_gb"
    );

    let mut v = to_value(&sample()).unwrap();
    *v.get_mut("note").unwrap() = Value::unknown();
    assert!(
        from_value::<Model>(&v)
            .unwrap_err()
            .to_string()
            .contains("use Val")
    );
}

#[test]
fn strict_about_fields_on_both_sides() {
    let mut v = to_value(&sample()).unwrap();
    let Value::Object(m) = &mut v else { panic!() };
    m.remove("zone");
    m.remove("note");
    m.insert("region".into(), "x".into());
    let e = from_value::<Model>(&v).unwrap_err();
    assert_eq!(
        e.to_string(),
        "struct Model has fields not in the object: zone, note; object has attributes not in struct Model: region"
    );
    // The same check applies inside nested objects, with the path.
    let mut v = to_value(&sample()).unwrap();
    *v.get_mut("timeouts").unwrap() = Value::object([("create", Value::Null)]);
    let e = from_value::<Model>(&v).unwrap_err();
    assert_eq!(e.path(), "timeouts");
    assert!(
        e.message().contains("fields not in the object: delete"),
        "{e}"
    );
}

#[test]
fn type_mismatches_and_ranges_name_the_attribute() {
    let mut v = to_value(&sample()).unwrap();
    *v.get_mut("count").unwrap() = "three".into();
    let e = from_value::<Model>(&v).unwrap_err();
    assert_eq!(
        (e.path(), e.message()),
        ("count", "expected an i64, found a string")
    );
    // A string for a number cannot come from a config that matches the schema: a bug, not the user's.
    assert!(!e.is_input());
    assert!(
        e.diagnostic("Could not read")
            .detail
            .ends_with("This is a bug in the provider; please report it.")
    );
    *v.get_mut("count").unwrap() = 1.5.into();
    let e = from_value::<Model>(&v).unwrap_err();
    assert_eq!(
        e.message(),
        "must be a whole number between -9223372036854775808 and 9223372036854775807; 1.5 is not"
    );
    assert!(e.is_input());
    assert!(
        to_value(&Disk {
            size_gb: 1,
            ratio: f64::NAN
        })
        .unwrap_err()
        .to_string()
        .starts_with("attribute `ratio`")
    );
}

/// Numbers are arbitrary in cty, so any number the user writes reaches the model; one its Rust type cannot hold is
/// the user's to fix, reported at its attribute (nested, in lists, in a Val) with the range, never as a bug.
#[test]
fn numbers_a_field_cannot_hold_are_input_errors_at_their_attribute() {
    use tfplugin::diag::{AttributePath, Severity};
    use tfplugin::value::Number;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Spec {
        boot_disk_size_gb: Val<i64>,
        api_port: u16,
        mtu: Option<u32>,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        cluster: Spec,
        pools: Vec<Spec>,
    }
    fn spec(attr: &str, n: Number) -> Value {
        let mut m: BTreeMap<String, Value> = [
            ("boot_disk_size_gb", Value::Number(10i64.into())),
            ("api_port", Value::Number(443i64.into())),
            ("mtu", Value::Null),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        m.insert(attr.to_string(), Value::Number(n));
        Value::Object(m)
    }
    let ok = spec("mtu", 1460i64.into());
    let huge: Number = "1e400".parse().unwrap();
    let cases: Vec<(&str, Number, &str)> = vec![
        (
            "boot_disk_size_gb",
            u64::MAX.into(),
            "-9223372036854775808 and 9223372036854775807; 18446744073709551615",
        ),
        (
            "boot_disk_size_gb",
            1.5f64.into(),
            "-9223372036854775808 and 9223372036854775807; 1.5",
        ),
        (
            "boot_disk_size_gb",
            huge.clone(),
            "-9223372036854775808 and 9223372036854775807; 1e400",
        ),
        ("api_port", 70_000i64.into(), "0 and 65535; 70000"),
        ("api_port", (-1i64).into(), "0 and 65535; -1"),
        ("api_port", 80.5f64.into(), "0 and 65535; 80.5"),
        (
            "mtu",
            4_294_967_297i64.into(),
            "0 and 4294967295; 4294967297",
        ),
        ("mtu", (-1i64).into(), "0 and 4294967295; -1"),
        ("mtu", 0.25f64.into(), "0 and 4294967295; 0.25"),
    ];
    for (attr, n, range) in cases {
        // Nested in an object, and in the second element of a list.
        for (v, path, shown) in [
            (
                Value::object([
                    ("cluster", spec(attr, n.clone())),
                    ("pools", Value::list([])),
                ]),
                AttributePath::attr("cluster").then_attr(attr),
                format!("cluster.{attr}"),
            ),
            (
                Value::object([
                    ("cluster", ok.clone()),
                    ("pools", Value::list([ok.clone(), spec(attr, n.clone())])),
                ]),
                AttributePath::attr("pools").then_index(1).then_attr(attr),
                format!("pools[1].{attr}"),
            ),
        ] {
            let e = from_value::<Outer>(&v).unwrap_err();
            assert!(e.is_input(), "{shown} = {n}: {e}");
            assert_eq!(e.attribute_path(), path, "{shown} = {n}");
            let d = e.diagnostic("Could not read the configuration");
            assert_eq!(d.severity, Severity::Error);
            assert_eq!(d.attribute.as_ref(), Some(&path), "{shown} = {n}");
            assert_eq!(d.summary, "Invalid number");
            let want = format!("`{shown}` must be a whole number between {range} is not.");
            assert!(
                d.detail.starts_with(&want),
                "{shown} = {n}: {:?} vs {want:?}",
                d.detail
            );
            assert!(
                d.detail.contains("Set it to a value in that range"),
                "{}",
                d.detail
            );
            assert!(!d.detail.contains("bug"), "{}", d.detail);
        }
    }
    // The edges of each range still fit.
    for (attr, n) in [
        ("boot_disk_size_gb", Number::from(i64::MIN)),
        ("boot_disk_size_gb", Number::from(i64::MAX)),
        ("api_port", Number::from(65_535i64)),
        ("api_port", Number::from(0i64)),
        ("mtu", Number::from(4_294_967_295i64)),
        ("mtu", Number::from(2.0f64)),
    ] {
        let v = Value::object([
            ("cluster", spec(attr, n.clone())),
            ("pools", Value::list([])),
        ]);
        assert!(from_value::<Outer>(&v).is_ok(), "{attr} = {n}");
    }
}

#[test]
fn val_helpers() {
    let v: Val<i64> = 3.into();
    assert_eq!(v.known(), Some(&3));
    assert_eq!(v.clone().map(|x| x * 2), Val::Known(6));
    assert_eq!(Val::<i64>::from(None), Val::Null);
    assert_eq!(Val::<i64>::Unknown.unwrap_or(7), 7);
    assert!(Val::<i64>::default().is_null());
    // Other serde formats see an Option.
    assert_eq!(serde_json::to_string(&v).unwrap(), "3");
    assert_eq!(serde_json::from_str::<Val<i64>>("null").unwrap(), Val::Null);
    assert_eq!(
        serde_json::from_str::<Val<i64>>("4").unwrap(),
        Val::Known(4)
    );
}

#[test]
fn enums_and_dynamic_values() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Zonal,
        Regional { zones: Vec<String> },
    }
    for m in [
        Mode::Zonal,
        Mode::Regional {
            zones: vec!["a".into()],
        },
    ] {
        assert_eq!(from_value::<Mode>(&to_value(&m).unwrap()).unwrap(), m);
    }
    // A dynamic attribute reads as its content.
    let v = Value::dynamic(Type::list(Type::String), Value::list(["x".into()]));
    assert_eq!(from_value::<Vec<String>>(&v).unwrap(), ["x"]);
    assert_eq!(
        from_value::<serde_json::Value>(&v).unwrap(),
        serde_json::json!(["x"])
    );
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        Just(Value::unknown()),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        let names = prop_oneof![
            Just("id"),
            Just("zone"),
            Just("count"),
            Just("tags"),
            Just("timeouts"),
            Just("create"),
            Just("delete"),
            Just("disks"),
            Just("size_gb"),
            Just("ratio"),
            Just("x"),
        ]
        .prop_map(String::from);
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Tuple),
            proptest::collection::btree_map(names.clone(), inner.clone(), 0..10)
                .prop_map(Value::Object),
            proptest::collection::btree_map(names, inner.clone(), 0..4).prop_map(Value::Map),
            (any::<bool>(), inner)
                .prop_map(|(b, v)| Value::dynamic(if b { Type::Dynamic } else { Type::String }, v)),
        ]
    })
}

proptest! {
    #[test]
    fn from_value_never_panics(v in arb_value()) {
        let _ = from_value::<Model>(&v);
        let _ = from_value::<Timeouts>(&v);
        let _ = from_value::<Vec<Val<BTreeMap<String, Option<i64>>>>>(&v);
        let _ = from_value::<serde_json::Value>(&v);
        if let Ok(m) = from_value::<Model>(&v) {
            // Whatever reads successfully writes back to something that reads the same.
            prop_assert_eq!(from_value::<Model>(&to_value(&m).unwrap()).unwrap(), m);
        }
    }
}
