//! Codec tests: the wire facts recorded against real clients (docs/research, tfplugin.md) and hostile input that
//! must fail cleanly. Property tests are in `props`.

use std::collections::BTreeMap;

use super::{Type, Value, json, msgpack};

fn obj_ty(attrs: &[(&str, Type)]) -> Type {
    Type::object(attrs.iter().cloned())
}

// ---- wire facts -------------------------------------------------------------------------------------------------

#[test]
fn unknown_is_fixext1_zero() {
    assert_eq!(
        msgpack::encode(&Type::String, &Value::unknown()).unwrap(),
        [0xd4, 0, 0]
    );
    assert_eq!(
        msgpack::decode(&Type::String, &[0xd4, 0, 0]).unwrap(),
        Value::unknown()
    );
    // Any extension type is an unknown, whatever the slot's type.
    assert!(
        msgpack::decode(&Type::list(Type::Bool), &[0xd5, 7, 1, 2])
            .unwrap()
            .is_unknown()
    );
}

#[test]
fn refined_unknown_from_clients_round_trips() {
    let wire = b"\xc7\x09\x0c\x82\x01\xc2\x02\xa4pre-";
    let v = msgpack::decode(&Type::String, wire).unwrap();
    let Value::Unknown(r) = &v else {
        panic!("{v:?}")
    };
    assert!(r.definitely_not_null());
    assert_eq!(r.string_prefix.as_deref(), Some("pre-"));
    assert_eq!(msgpack::encode(&Type::String, &v).unwrap(), wire);
}

#[test]
fn dynamic_is_bin_type_then_value() {
    let t =
        Type::from_json_bytes(br#"["object",{"l":["tuple",["bool"]],"n":"number","s":"string"}]"#)
            .unwrap();
    let inner = Value::object([
        ("l", Value::Tuple(vec![true.into()])),
        ("n", 1i64.into()),
        ("s", "x".into()),
    ]);
    let v = Value::dynamic(t.clone(), inner);
    let bytes = msgpack::encode(&Type::Dynamic, &v).unwrap();
    let ty_json = t.to_json_bytes();
    assert_eq!(&bytes[..3], &[0x92, 0xc4, ty_json.len() as u8]);
    assert_eq!(&bytes[3..3 + ty_json.len()], &ty_json[..]);
    assert_eq!(msgpack::decode(&Type::Dynamic, &bytes).unwrap(), v);
    // Null and unknown dynamic values carry no type.
    assert_eq!(
        msgpack::encode(&Type::Dynamic, &Value::Null).unwrap(),
        [0xc0]
    );
    assert_eq!(
        msgpack::decode(&Type::Dynamic, &[0xd4, 0, 0]).unwrap(),
        Value::unknown()
    );
    // JSON form, as state stores it.
    let j = json::encode(
        &Type::Dynamic,
        &Value::dynamic(Type::list(Type::String), Value::list(["a".into()])),
    )
    .unwrap();
    assert_eq!(j, br#"{"value":["a"],"type":["list","string"]}"#);
    assert!(
        json::decode(&Type::Dynamic, &j)
            .unwrap()
            .get("missing")
            .is_none()
    );
}

#[test]
fn plain_values_in_dynamic_slots_get_an_inferred_type() {
    let v = Value::object([("a", Value::list(["x".into()]))]);
    let bytes = msgpack::encode(&Type::Dynamic, &v).unwrap();
    let back = msgpack::decode(&Type::Dynamic, &bytes).unwrap();
    assert_eq!(
        back,
        Value::dynamic(obj_ty(&[("a", Type::list(Type::String))]), v)
    );
}

#[test]
fn whole_object_null_and_empty_object() {
    let t = obj_ty(&[("id", Type::String)]);
    assert_eq!(msgpack::decode(&t, &[0xc0]).unwrap(), Value::Null);
    // An empty provider block arrives as an empty map even when the schema has attributes.
    assert_eq!(
        msgpack::decode(&t, &[0x80]).unwrap(),
        Value::object([("id", Value::Null)])
    );
    assert_eq!(msgpack::encode(&t, &Value::Null).unwrap(), [0xc0]);
    let empty = Type::object::<[(&str, Type); 0], &str>([]);
    assert_eq!(
        msgpack::decode(&empty, &[0x80]).unwrap(),
        Value::Object(BTreeMap::new())
    );
    assert_eq!(
        msgpack::encode(&empty, &Value::Object(BTreeMap::new())).unwrap(),
        [0x80]
    );
}

#[test]
fn numbers_keep_their_wire_form() {
    let cases: [(&[u8], &str); 5] = [
        (&[0x2a], "42"),
        (&[0xd0, 0x80], "-128"),
        (
            &[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            "18446744073709551615",
        ),
        (
            &[0xcb, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a],
            "0.1",
        ),
        (b"\xa50.1e1", "1"), // decimal strings are parsed and normalised
    ];
    for (wire, text) in cases {
        let v = msgpack::decode(&Type::Number, wire).unwrap();
        assert_eq!(v.as_number().unwrap().to_string(), text);
    }
    // A decimal that no f64 holds stays a string, so it reaches the client unrounded.
    let big = b"\xb70.100000000000000000001";
    let v = msgpack::decode(&Type::Number, big).unwrap();
    assert_eq!(msgpack::encode(&Type::Number, &v).unwrap(), big);
    // float64 0.1 goes back as float64 0.1, not as the text "0.1" (which cty would read as a different number).
    let f = msgpack::encode(&Type::Number, &Value::from(0.1)).unwrap();
    assert_eq!(f[0], 0xcb);
    assert!(msgpack::encode(&Type::Number, &Value::from(f64::NAN)).is_err());
}

#[test]
fn encoders_accept_serde_shapes() {
    let items = vec![Value::from("a"), Value::from("b")];
    for v in [
        Value::List(items.clone()),
        Value::Set(items.clone()),
        Value::Tuple(items.clone()),
    ] {
        assert!(msgpack::encode(&Type::set(Type::String), &v).is_ok());
        assert!(msgpack::encode(&Type::Tuple(vec![Type::String, Type::String]), &v).is_ok());
    }
    let m: BTreeMap<String, Value> = [("a".to_string(), Value::from("x"))].into();
    assert!(msgpack::encode(&Type::map(Type::String), &Value::Object(m.clone())).is_ok());
    assert!(msgpack::encode(&obj_ty(&[("a", Type::String)]), &Value::Map(m)).is_ok());
}

#[test]
fn errors_name_the_path() {
    let t = obj_ty(&[(
        "timeouts",
        obj_ty(&[("create", Type::String), ("delete", Type::String)]),
    )]);
    let v = Value::object([("timeouts", Value::object([("delete", Value::Null)]))]);
    let e = msgpack::encode(&t, &v).unwrap_err();
    assert_eq!(
        e.to_string(),
        "at .timeouts: object is missing attributes: create"
    );
    let v = Value::object([(
        "timeouts",
        Value::object([("create", Value::unknown()), ("delete", Value::Null)]),
    )]);
    let e = json::encode(&t, &v).unwrap_err();
    assert_eq!(e.path(), ".timeouts.create");
    let e = msgpack::decode(&Type::list(Type::String), &[0x92, 0xa0, 0x01]).unwrap_err();
    assert_eq!(e.path(), "[1]");
    let e = msgpack::decode(&t, &[0x81, 0xa1, b'x', 0xc0]).unwrap_err();
    assert!(e.to_string().contains("unsupported attribute \"x\""), "{e}");
}

#[test]
fn json_follows_cty_leniency() {
    let t = obj_ty(&[
        ("n", Type::Number),
        ("b", Type::Bool),
        ("s", Type::String),
        ("new", Type::String),
    ]);
    let v = json::decode(&t, br#"{"n": "1e400", "b": "true", "s": 12.50}"#).unwrap();
    assert_eq!(
        v.get("n").unwrap().as_number().unwrap().to_string(),
        "1e400"
    );
    assert_eq!(v.get("b"), Some(&Value::Bool(true)));
    assert_eq!(v.get("s").and_then(Value::as_str), Some("12.50"));
    assert_eq!(v.get("new"), Some(&Value::Null)); // attributes added since the state was written
    assert!(json::decode(&t, br#"{"gone": 1}"#).is_err());
}

#[test]
fn hostile_lengths_and_depth_fail_cleanly() {
    // An array32 claiming four billion elements, in five bytes.
    assert!(msgpack::decode(&Type::list(Type::Bool), &[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err());
    assert!(msgpack::decode(&Type::String, &[0xdb, 0xff, 0xff, 0xff, 0xff, b'a']).is_err());
    let mut deep = Type::Bool;
    for _ in 0..300 {
        deep = Type::list(deep);
    }
    let e = msgpack::decode(&deep, &[0x91; 300]).unwrap_err();
    assert!(e.to_string().contains("nested"), "{e}");
    assert!(msgpack::decode(&Type::Bool, &[0xc3, 0xc3]).is_err()); // trailing bytes

    // Dynamic values choose their own types, so only the depth cap stops [list(dynamic), [[list(dynamic), …]]].
    let ty_json = br#"["list","dynamic"]"#;
    let mut bytes = vec![0xc0];
    for _ in 0..200 {
        let mut level = vec![0x92, 0xc4, ty_json.len() as u8];
        level.extend_from_slice(ty_json);
        level.push(0x91);
        level.extend_from_slice(&bytes);
        bytes = level;
    }
    let e = msgpack::decode(&Type::Dynamic, &bytes).unwrap_err();
    assert!(e.to_string().contains("nested"), "{e}");
}

mod props;
