//! `DynamicValue.msgpack`: cty's msgpack encoding of a [`Value`] against a [`Type`].
//!
//! Wire facts (docs/research, tfplugin.md): null is nil for every type; any extension value is unknown (ext 12
//! carries refinements); objects are maps that must hold every attribute; numbers are int, float or decimal
//! string; a `dynamic` slot holds `[bin(type JSON), value]`.
//!
//! Decoding never trusts the input: lengths are checked against the bytes left before anything is allocated, and
//! nesting is capped at [`MAX_DEPTH`] (dynamic values can nest types arbitrarily).

use std::collections::BTreeMap;

use rmp::Marker;

use super::error::{DecodeError, EncodeError};
use super::{Type, Value};

mod read;
mod refine;
mod write;
use read::Reader;
use write::{write_array_len, write_bin, write_map_len, write_number, write_str};

/// Deeper than any real schema (Terraform nests blocks a handful of levels); bounds stack use on hostile input.
pub const MAX_DEPTH: usize = 128;

/// Decodes `bytes` as a value of type `ty`. Trailing bytes are an error.
pub fn decode(ty: &Type, bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut r = Reader::new(bytes);
    let v = decode_value(&mut r, ty, 0)?;
    if !r.rest().is_empty() {
        return Err(DecodeError::new(format!(
            "{} unexpected bytes after the value",
            r.rest().len()
        )));
    }
    Ok(v)
}

/// Encodes `v` as type `ty`, as cty would.
pub fn encode(ty: &Type, v: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_value(&mut out, ty, v)?;
    Ok(out)
}

fn describe(m: Marker) -> String {
    format!("msgpack {m:?}")
}

fn decode_value(r: &mut Reader, ty: &Type, depth: usize) -> Result<Value, DecodeError> {
    if depth > MAX_DEPTH {
        return Err(DecodeError::new(format!(
            "nested more than {MAX_DEPTH} levels deep"
        )));
    }
    let m = r.marker()?;
    if let Marker::Null = m {
        return Ok(Value::Null);
    }
    if let Some((code, payload)) = r.ext(m)? {
        return Ok(Value::Unknown(Box::new(refine::decode(code, payload))));
    }
    let mismatch =
        |m: Marker| DecodeError::new(format!("expected {}, found {}", ty.to_json(), describe(m)));
    match ty {
        Type::Bool => match m {
            Marker::True => Ok(Value::Bool(true)),
            Marker::False => Ok(Value::Bool(false)),
            _ => Err(mismatch(m)),
        },
        Type::Number => r.number(m)?.map(Value::Number).ok_or_else(|| mismatch(m)),
        Type::String => match r.bytes(m)? {
            Some(b) => String::from_utf8(b.to_vec())
                .map(Value::String)
                .map_err(|_| DecodeError::new("string is not UTF-8")),
            None => Err(mismatch(m)),
        },
        Type::List(elem) | Type::Set(elem) => {
            let items = decode_array(r, m, depth, |_| Some(&**elem))
                .map_err(|e| e.unwrap_or_else(|| mismatch(m)))?;
            Ok(if matches!(ty, Type::List(_)) {
                Value::List(items)
            } else {
                Value::Set(items)
            })
        }
        Type::Tuple(elems) => {
            let items = decode_array(r, m, depth, |i| elems.get(i))
                .map_err(|e| e.unwrap_or_else(|| mismatch(m)))?;
            if items.len() != elems.len() {
                return Err(DecodeError::new(format!(
                    "a tuple of {} elements is required ({} given)",
                    elems.len(),
                    items.len()
                )));
            }
            Ok(Value::Tuple(items))
        }
        Type::Map(elem) => decode_map(r, m, depth, |_| Some(&**elem))
            .map(Value::Map)
            .map_err(|e| e.unwrap_or_else(|| mismatch(m))),
        Type::Object { attrs, .. } => {
            let got = decode_map(r, m, depth, |k| attrs.get(k))
                .map_err(|e| e.unwrap_or_else(|| mismatch(m)))?;
            // cty reads an empty map as an object whatever the attributes (clients send `80` for an empty
            // provider block); every attribute is then null.
            if got.is_empty() {
                return Ok(Value::Object(
                    attrs.keys().map(|k| (k.clone(), Value::Null)).collect(),
                ));
            }
            let missing: Vec<&str> = attrs
                .keys()
                .filter(|k| !got.contains_key(*k))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(DecodeError::new(format!(
                    "object is missing attributes: {}",
                    missing.join(", ")
                )));
            }
            Ok(Value::Object(got))
        }
        Type::Dynamic => {
            if !matches!(r.container_len(m)?, Some((false, 2))) {
                return Err(DecodeError::new(format!(
                    "a dynamic value is [type, value]; found {}",
                    describe(m)
                )));
            }
            let tm = r.marker()?;
            let type_json = r
                .bytes(tm)?
                .ok_or_else(|| DecodeError::new("a dynamic value's type must be bin"))?;
            let t = Type::from_json_bytes(type_json)
                .map_err(|e| DecodeError::new(format!("dynamic value type: {e}")))?;
            let v = decode_value(r, &t, depth + 1)?;
            Ok(Value::dynamic(t, v))
        }
    }
}

/// Decodes an array whose i-th element has type `elem(i)`. `Err(None)` means "not an array".
fn decode_array<'t>(
    r: &mut Reader,
    m: Marker,
    depth: usize,
    elem: impl Fn(usize) -> Option<&'t Type>,
) -> Result<Vec<Value>, Option<DecodeError>> {
    let Some((false, len)) = r.container_len(m)? else {
        return Err(None);
    };
    let n = r.count(len, 1)?;
    let mut items = Vec::with_capacity(n);
    for i in 0..n {
        let t = elem(i).ok_or_else(|| DecodeError::new(format!("unexpected element {i}")))?;
        items.push(decode_value(r, t, depth + 1).map_err(|e| e.within_index(i))?);
    }
    Ok(items)
}

/// Decodes a map with string keys whose value for key k has type `elem(k)`. `Err(None)` means "not a map".
fn decode_map<'t>(
    r: &mut Reader,
    m: Marker,
    depth: usize,
    elem: impl Fn(&str) -> Option<&'t Type>,
) -> Result<BTreeMap<String, Value>, Option<DecodeError>> {
    let Some((true, len)) = r.container_len(m)? else {
        return Err(None);
    };
    let n = r.count(len, 2)?;
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let km = r.marker()?;
        let key = r.bytes(km)?.ok_or_else(|| {
            DecodeError::new(format!("map keys must be strings, found {}", describe(km)))
        })?;
        let key = std::str::from_utf8(key).map_err(|_| DecodeError::new("map key is not UTF-8"))?;
        let t =
            elem(key).ok_or_else(|| DecodeError::new(format!("unsupported attribute {key:?}")))?;
        let v = decode_value(r, t, depth + 1).map_err(|e| e.within_key(key))?;
        if out.insert(key.to_owned(), v).is_some() {
            return Err(DecodeError::new(format!("duplicate key {key:?}")).into());
        }
    }
    Ok(out)
}

fn encode_value(out: &mut Vec<u8>, ty: &Type, v: &Value) -> Result<(), EncodeError> {
    let mismatch = || EncodeError::new(format!("expected {}, found {}", ty.to_json(), variant(v)));
    match (ty, v) {
        (_, Value::Null) => out.push(0xc0),
        (_, Value::Unknown(r)) => refine::encode(out, ty, r)?,
        (Type::Dynamic, Value::Dynamic(d)) => encode_dynamic(out, &d.ty, &d.value)?,
        (Type::Dynamic, v) => {
            let t = v.infer_type().map_err(EncodeError::new)?;
            encode_dynamic(out, &t, v)?;
        }
        // A typed value in a typed slot: its type is already known, so write just the value.
        (_, Value::Dynamic(d)) => encode_value(out, ty, &d.value)?,
        (Type::Bool, Value::Bool(b)) => out.push(if *b { 0xc3 } else { 0xc2 }),
        (Type::Number, Value::Number(n)) => write_number(out, n)?,
        (Type::String, Value::String(s)) => write_str(out, s)?,
        (
            Type::List(elem) | Type::Set(elem),
            Value::List(items) | Value::Set(items) | Value::Tuple(items),
        ) => {
            write_array_len(out, items.len())?;
            for (i, item) in items.iter().enumerate() {
                encode_value(out, elem, item).map_err(|e| e.within_index(i))?;
            }
        }
        (Type::Tuple(elems), Value::List(items) | Value::Set(items) | Value::Tuple(items)) => {
            if elems.len() != items.len() {
                return Err(EncodeError::new(format!(
                    "a tuple of {} elements is required ({} given)",
                    elems.len(),
                    items.len()
                )));
            }
            write_array_len(out, items.len())?;
            for (i, (t, item)) in elems.iter().zip(items).enumerate() {
                encode_value(out, t, item).map_err(|e| e.within_index(i))?;
            }
        }
        (Type::Map(elem), Value::Map(m) | Value::Object(m)) => {
            write_map_len(out, m.len())?;
            for (k, item) in m {
                write_str(out, k)?;
                encode_value(out, elem, item).map_err(|e| e.within_key(k))?;
            }
        }
        (Type::Object { attrs, .. }, Value::Map(m) | Value::Object(m)) => {
            check_attrs(attrs, m)?;
            write_map_len(out, attrs.len())?;
            for (k, t) in attrs {
                write_str(out, k)?;
                // check_attrs guarantees presence; `Null` keeps this total without a panic path.
                encode_value(out, t, m.get(k).unwrap_or(&Value::Null))
                    .map_err(|e| e.within_attr(k))?;
            }
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

fn encode_dynamic(out: &mut Vec<u8>, t: &Type, v: &Value) -> Result<(), EncodeError> {
    write_array_len(out, 2)?;
    write_bin(out, &t.to_json_bytes())?;
    encode_value(out, t, v)
}

/// Clients reject an object that lacks any attribute of its type, so both directions of mismatch are errors.
pub(super) fn check_attrs(
    attrs: &BTreeMap<String, Type>,
    m: &BTreeMap<String, Value>,
) -> Result<(), EncodeError> {
    let missing: Vec<&str> = attrs
        .keys()
        .filter(|k| !m.contains_key(*k))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(EncodeError::new(format!(
            "object is missing attributes: {}",
            missing.join(", ")
        )));
    }
    let extra: Vec<&str> = m
        .keys()
        .filter(|k| !attrs.contains_key(*k))
        .map(String::as_str)
        .collect();
    if !extra.is_empty() {
        return Err(EncodeError::new(format!(
            "object has attributes not in its type: {}",
            extra.join(", ")
        )));
    }
    Ok(())
}

/// A value's variant, for messages.
pub(super) fn variant(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Unknown(_) => "unknown",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::List(_) => "a list",
        Value::Set(_) => "a set",
        Value::Map(_) => "a map",
        Value::Object(_) => "an object",
        Value::Tuple(_) => "a tuple",
        Value::Dynamic(_) => "a dynamic value",
    }
}
