//! `DynamicValue.json`: cty's JSON encoding of a [`Value`] against a [`Type`], as state files store values and
//! `UpgradeResourceState` receives them.
//!
//! It follows cty's `json` package: JSON cannot carry unknowns (encoding one is an error naming its path); a
//! `dynamic` slot holds `{"value": …, "type": …}`; decoding is lenient where cty is (numbers and bools may arrive
//! as strings, strings as numbers or bools, and object attributes missing from old state are null).

use std::collections::BTreeMap;

use super::error::{DecodeError, EncodeError};
use super::jsontext::{self, Json};
use super::msgpack::{check_attrs, variant};
use super::number::Number;
use super::{Type, Value};

pub fn decode(ty: &Type, bytes: &[u8]) -> Result<Value, DecodeError> {
    from_json(ty, &jsontext::parse(bytes)?)
}

pub fn encode(ty: &Type, v: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut out = String::new();
    write(&mut out, ty, v)?;
    Ok(out.into_bytes())
}

fn from_json(ty: &Type, j: &Json) -> Result<Value, DecodeError> {
    let mismatch = || DecodeError::new(format!("expected {}, found {}", ty.to_json(), kind(j)));
    Ok(match (ty, j) {
        (_, Json::Null) => Value::Null,
        (Type::Dynamic, Json::Object(entries)) => {
            let field = |name: &str| {
                entries
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v)
            };
            let (Some(t), Some(v)) = (field("type"), field("value")) else {
                return Err(DecodeError::new(
                    "a dynamic value is {\"value\": …, \"type\": …}",
                ));
            };
            let t = Type::from_json(&t.to_serde())
                .map_err(|e| DecodeError::new(format!("dynamic value type: {e}")))?;
            let v = from_json(&t, v)?;
            Value::dynamic(t, v)
        }
        (Type::Bool, Json::Bool(b)) => Value::Bool(*b),
        (Type::Bool, Json::String(s)) => match s.as_str() {
            "true" | "1" => Value::Bool(true),
            "false" | "0" => Value::Bool(false),
            _ => return Err(mismatch()),
        },
        (Type::Number, Json::Number(s) | Json::String(s)) => {
            Value::Number(s.parse::<Number>().map_err(DecodeError::new)?)
        }
        (Type::String, Json::String(s) | Json::Number(s)) => Value::String(s.clone()),
        (Type::String, Json::Bool(b)) => Value::String(b.to_string()),
        (Type::List(elem) | Type::Set(elem), Json::Array(items)) => {
            let items = items
                .iter()
                .enumerate()
                .map(|(i, item)| from_json(elem, item).map_err(|e| e.within_index(i)))
                .collect::<Result<_, _>>()?;
            if matches!(ty, Type::List(_)) {
                Value::List(items)
            } else {
                Value::Set(items)
            }
        }
        (Type::Tuple(elems), Json::Array(items)) => {
            if elems.len() != items.len() {
                return Err(DecodeError::new(format!(
                    "a tuple of {} elements is required ({} given)",
                    elems.len(),
                    items.len()
                )));
            }
            let items = elems
                .iter()
                .zip(items)
                .enumerate()
                .map(|(i, (t, item))| from_json(t, item).map_err(|e| e.within_index(i)))
                .collect::<Result<_, _>>()?;
            Value::Tuple(items)
        }
        (Type::Map(elem), Json::Object(entries)) => {
            let mut m = BTreeMap::new();
            for (k, item) in entries {
                m.insert(
                    k.clone(),
                    from_json(elem, item).map_err(|e| e.within_key(k))?,
                );
            }
            Value::Map(m)
        }
        (Type::Object { attrs, .. }, Json::Object(entries)) => {
            let mut m = BTreeMap::new();
            for (k, item) in entries {
                let t = attrs
                    .get(k)
                    .ok_or_else(|| DecodeError::new(format!("unsupported attribute {k:?}")))?;
                m.insert(k.clone(), from_json(t, item).map_err(|e| e.within_attr(k))?);
            }
            // State written by an older schema lacks newer attributes; cty reads them as null.
            for k in attrs.keys() {
                m.entry(k.clone()).or_insert(Value::Null);
            }
            Value::Object(m)
        }
        _ => return Err(mismatch()),
    })
}

fn kind(j: &Json) -> &'static str {
    match j {
        Json::Null => "null",
        Json::Bool(_) => "a bool",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write(out: &mut String, ty: &Type, v: &Value) -> Result<(), EncodeError> {
    let mismatch = || EncodeError::new(format!("expected {}, found {}", ty.to_json(), variant(v)));
    match (ty, v) {
        (_, Value::Null) => out.push_str("null"),
        (_, Value::Unknown(_)) => {
            return Err(EncodeError::new(
                "value is unknown, which JSON cannot represent",
            ));
        }
        (Type::Dynamic, Value::Dynamic(d)) => write_dynamic(out, &d.ty, &d.value)?,
        (Type::Dynamic, v) => write_dynamic(out, &v.infer_type().map_err(EncodeError::new)?, v)?,
        (_, Value::Dynamic(d)) => write(out, ty, &d.value)?,
        (Type::Bool, Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        (Type::Number, Value::Number(n)) => {
            // JSON has no NaN or infinities; cty refuses them too.
            if n.as_f64().is_some_and(|f| !f.is_finite()) {
                return Err(EncodeError::new(format!("{n} cannot be written as JSON")));
            }
            out.push_str(&n.to_string());
        }
        (Type::String, Value::String(s)) => write_str(out, s),
        (
            Type::List(elem) | Type::Set(elem),
            Value::List(items) | Value::Set(items) | Value::Tuple(items),
        ) => {
            write_array(out, items.iter().map(|item| (&**elem, item)))?;
        }
        (Type::Tuple(elems), Value::List(items) | Value::Set(items) | Value::Tuple(items)) => {
            if elems.len() != items.len() {
                return Err(EncodeError::new(format!(
                    "a tuple of {} elements is required ({} given)",
                    elems.len(),
                    items.len()
                )));
            }
            write_array(out, elems.iter().zip(items))?;
        }
        (Type::Map(elem), Value::Map(m) | Value::Object(m)) => {
            write_object(
                out,
                m.iter().map(|(k, item)| (k, &**elem, item)),
                EncodeError::within_key,
            )?;
        }
        (Type::Object { attrs, .. }, Value::Map(m) | Value::Object(m)) => {
            check_attrs(attrs, m)?;
            let entries = attrs
                .iter()
                .map(|(k, t)| (k, t, m.get(k).unwrap_or(&Value::Null)));
            write_object(out, entries, EncodeError::within_attr)?;
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

fn write_array<'a>(
    out: &mut String,
    items: impl Iterator<Item = (&'a Type, &'a Value)>,
) -> Result<(), EncodeError> {
    out.push('[');
    for (i, (t, item)) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write(out, t, item).map_err(|e| e.within_index(i))?;
    }
    out.push(']');
    Ok(())
}

fn write_object<'a>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a String, &'a Type, &'a Value)>,
    within: fn(EncodeError, &str) -> EncodeError,
) -> Result<(), EncodeError> {
    out.push('{');
    for (i, (k, t, item)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, k);
        out.push(':');
        write(out, t, item).map_err(|e| within(e, k))?;
    }
    out.push('}');
    Ok(())
}

fn write_dynamic(out: &mut String, t: &Type, v: &Value) -> Result<(), EncodeError> {
    out.push_str("{\"value\":");
    write(out, t, v)?;
    out.push_str(",\"type\":");
    out.push_str(&t.to_json().to_string());
    out.push('}');
    Ok(())
}
