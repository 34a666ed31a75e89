//! Properties over arbitrary (type, value) pairs, nulls and refined unknowns at any depth: both codecs round-trip,
//! and no input, random or a mutated valid encoding, makes a decoder panic.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

use crate::value::{Number, Refinements, Type, Value, json, msgpack};

fn arb_type() -> impl Strategy<Value = Type> {
    let leaf = prop_oneof![
        Just(Type::Bool),
        Just(Type::Number),
        Just(Type::String),
        Just(Type::Dynamic)
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(Type::list),
            inner.clone().prop_map(Type::set),
            inner.clone().prop_map(Type::map),
            btree_map("[a-z_]{1,6}", inner.clone(), 0..4).prop_map(Type::object),
            vec(inner, 0..3).prop_map(Type::Tuple),
        ]
    })
}

#[derive(Clone, Copy)]
struct Gen {
    /// JSON cannot carry unknowns or infinities.
    json: bool,
    /// How many more dynamic values may nest.
    dynamic_depth: u32,
}

fn arb_number(g: Gen) -> BoxedStrategy<Number> {
    let mut options = vec![
        any::<i64>().prop_map(Number::from).boxed(),
        any::<u64>().prop_map(Number::from).boxed(),
        any::<f64>()
            .prop_filter("NaN is not a cty number", |f| !f.is_nan())
            .prop_map(Number::from)
            .boxed(),
        "-?[0-9]{1,30}(\\.[0-9]{1,30})?(e-?[0-9]{1,3})?"
            .prop_map(|s| s.parse::<Number>().unwrap())
            .boxed(),
    ];
    if g.json {
        options[2] = any::<f64>()
            .prop_filter("JSON needs finite", |f| f.is_finite())
            .prop_map(Number::from)
            .boxed();
    }
    proptest::strategy::Union::new(options).boxed()
}

fn arb_refinements() -> impl Strategy<Value = Refinements> {
    let bound = || {
        proptest::option::of((
            arb_number(Gen {
                json: false,
                dynamic_depth: 0,
            }),
            any::<bool>(),
        ))
    };
    let raw = prop_oneof![
        any::<i64>().prop_map(|i| msgpack::encode(&Type::Number, &i.into()).unwrap()),
        ".{0,8}".prop_map(|s| msgpack::encode(&Type::String, &s.into()).unwrap()),
    ];
    (
        proptest::option::of(any::<bool>()),
        proptest::option::of(".{1,8}"),
        bound(),
        bound(),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        btree_map(prop_oneof![-20i64..1, 7i64..1000], raw, 0..2),
    )
        .prop_map(
            |(
                nullness,
                string_prefix,
                number_lower,
                number_upper,
                length_lower,
                length_upper,
                other,
            )| {
                Refinements {
                    nullness,
                    string_prefix,
                    number_lower,
                    number_upper,
                    length_lower,
                    length_upper,
                    other,
                }
            },
        )
}

/// The refinements cty accepts for an unknown of type `ty` (its decoder rejects the others).
fn only_for(ty: &Type, mut r: Refinements) -> Refinements {
    if *ty == Type::Dynamic {
        return Refinements::default();
    }
    if *ty != Type::String {
        r.string_prefix = None;
    }
    if *ty != Type::Number {
        (r.number_lower, r.number_upper) = (None, None);
    }
    if !matches!(ty, Type::List(_) | Type::Set(_) | Type::Map(_)) {
        (r.length_lower, r.length_upper) = (None, None);
    }
    r
}

/// A value of type `ty`, possibly null or unknown (with refinements) at any depth.
fn arb_value(ty: &Type, g: Gen) -> BoxedStrategy<Value> {
    let ty2 = ty.clone();
    let known: BoxedStrategy<Value> = match ty {
        Type::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Type::Number => arb_number(g).prop_map(Value::Number).boxed(),
        Type::String => ".{0,12}".prop_map(Value::String).boxed(),
        Type::List(t) => vec(arb_value(t, g), 0..4).prop_map(Value::List).boxed(),
        Type::Set(t) => vec(arb_value(t, g), 0..4).prop_map(Value::Set).boxed(),
        Type::Map(t) => btree_map(".{0,4}", arb_value(t, g), 0..4)
            .prop_map(Value::Map)
            .boxed(),
        Type::Object { attrs, .. } => {
            let fields: Vec<_> = attrs
                .iter()
                .map(|(k, t)| (Just(k.clone()), arb_value(t, g)))
                .collect();
            fields
                .prop_map(|kvs| Value::Object(kvs.into_iter().collect()))
                .boxed()
        }
        Type::Tuple(ts) => ts
            .iter()
            .map(|t| arb_value(t, g))
            .collect::<Vec<_>>()
            .prop_map(Value::Tuple)
            .boxed(),
        Type::Dynamic if g.dynamic_depth == 0 => Just(Value::Null).boxed(),
        Type::Dynamic => {
            let inner = Gen {
                dynamic_depth: g.dynamic_depth - 1,
                ..g
            };
            arb_type()
                .prop_flat_map(move |t| {
                    arb_value(&t, inner).prop_map(move |v| Value::dynamic(t.clone(), v))
                })
                .boxed()
        }
    };
    if g.json {
        prop_oneof![1 => Just(Value::Null), 6 => known].boxed()
    } else {
        prop_oneof![1 => Just(Value::Null), 1 => arb_refinements().prop_map(move |r| Value::Unknown(Box::new(only_for(&ty2, r)))), 6 => known]
            .boxed()
    }
}

fn typed_value(g: Gen) -> impl Strategy<Value = (Type, Value)> {
    arb_type().prop_flat_map(move |t| (Just(t.clone()), arb_value(&t, g)))
}

/// JSON carries numbers as decimal text, which cty (and we) read back at full precision: a float64 like 0.1 comes
/// back as the decimal 0.1. This is what the JSON round trip preserves.
fn through_text(v: Value) -> Value {
    match v {
        Value::Number(n) => Value::Number(n.to_string().parse().unwrap()),
        Value::List(items) => Value::List(items.into_iter().map(through_text).collect()),
        Value::Set(items) => Value::Set(items.into_iter().map(through_text).collect()),
        Value::Tuple(items) => Value::Tuple(items.into_iter().map(through_text).collect()),
        Value::Map(m) => Value::Map(m.into_iter().map(|(k, v)| (k, through_text(v))).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, through_text(v))).collect())
        }
        Value::Dynamic(d) => Value::dynamic(d.ty, through_text(d.value)),
        other => other,
    }
}

fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(pos, byte, op) in edits {
        let at = if bytes.is_empty() {
            0
        } else {
            pos % bytes.len()
        };
        match op % 4 {
            0 if !bytes.is_empty() => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            2 if !bytes.is_empty() => {
                bytes.remove(at);
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn msgpack_round_trips((ty, v) in typed_value(Gen { json: false, dynamic_depth: 2 })) {
        let bytes = msgpack::encode(&ty, &v).unwrap();
        prop_assert_eq!(msgpack::decode(&ty, &bytes).unwrap(), v);
    }

    #[test]
    fn json_round_trips((ty, v) in typed_value(Gen { json: true, dynamic_depth: 2 })) {
        let bytes = json::encode(&ty, &v).unwrap();
        let back = json::decode(&ty, &bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)));
        prop_assert_eq!(back, through_text(v));
    }

    #[test]
    fn garbage_never_panics(ty in arb_type(), bytes in vec(any::<u8>(), 0..256)) {
        let _ = msgpack::decode(&ty, &bytes);
        let _ = json::decode(&ty, &bytes);
    }

    #[test]
    fn mutated_encodings_never_panic(
        (ty, v) in typed_value(Gen { json: true, dynamic_depth: 2 }),
        edits in vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..4),
    ) {
        for bytes in [msgpack::encode(&ty, &v).unwrap(), json::encode(&ty, &v).unwrap()] {
            let bad = mutate(bytes, &edits);
            let _ = msgpack::decode(&ty, &bad);
            let _ = json::decode(&ty, &bad);
        }
    }
}
