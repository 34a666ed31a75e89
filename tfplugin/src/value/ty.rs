//! cty types and their JSON form, which is how schemas and dynamic values name a type on the wire
//! (`"string"`, `["list","number"]`, `["object",{"a":"bool"}]`, `"dynamic"`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Type {
    Bool,
    Number,
    String,
    /// `DynamicPseudoType`: any type, decided per value. Dynamic values travel with their concrete type.
    Dynamic,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    /// Object attributes; `optional` names attributes that may be omitted (only in type constraints).
    Object {
        attrs: BTreeMap<String, Type>,
        optional: BTreeSet<String>,
    },
    Tuple(Vec<Type>),
}

impl Type {
    pub fn list(t: Type) -> Self {
        Type::List(Box::new(t))
    }
    pub fn set(t: Type) -> Self {
        Type::Set(Box::new(t))
    }
    pub fn map(t: Type) -> Self {
        Type::Map(Box::new(t))
    }
    pub fn object<I, K>(attrs: I) -> Self
    where
        I: IntoIterator<Item = (K, Type)>,
        K: Into<String>,
    {
        Type::Object {
            attrs: attrs.into_iter().map(|(k, t)| (k.into(), t)).collect(),
            optional: BTreeSet::new(),
        }
    }

    /// The JSON form of this type, as cty writes it.
    pub fn to_json(&self) -> Json {
        match self {
            Type::Bool => Json::from("bool"),
            Type::Number => Json::from("number"),
            Type::String => Json::from("string"),
            Type::Dynamic => Json::from("dynamic"),
            Type::List(t) => Json::Array(vec!["list".into(), t.to_json()]),
            Type::Set(t) => Json::Array(vec!["set".into(), t.to_json()]),
            Type::Map(t) => Json::Array(vec!["map".into(), t.to_json()]),
            Type::Object { attrs, optional } => {
                let obj: serde_json::Map<String, Json> = attrs
                    .iter()
                    .map(|(k, t)| (k.clone(), t.to_json()))
                    .collect();
                let mut v = vec!["object".into(), Json::Object(obj)];
                if !optional.is_empty() {
                    v.push(Json::Array(
                        optional.iter().map(|s| Json::from(s.as_str())).collect(),
                    ));
                }
                Json::Array(v)
            }
            Type::Tuple(ts) => Json::Array(vec![
                "tuple".into(),
                Json::Array(ts.iter().map(Type::to_json).collect()),
            ]),
        }
    }

    /// The JSON bytes of this type, as `Schema.Attribute.type` carries them.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.to_json()).expect("a type always serializes")
    }

    /// Parses cty's JSON form of a type. Returns a message naming what is wrong on failure.
    pub fn from_json(j: &Json) -> Result<Type, String> {
        match j {
            Json::String(s) => match s.as_str() {
                "bool" => Ok(Type::Bool),
                "number" => Ok(Type::Number),
                "string" => Ok(Type::String),
                "dynamic" => Ok(Type::Dynamic),
                other => Err(format!("unknown primitive type {other:?}")),
            },
            Json::Array(parts) => {
                let kind = parts
                    .first()
                    .and_then(Json::as_str)
                    .ok_or("a type array must start with its kind")?;
                let arg = parts
                    .get(1)
                    .ok_or_else(|| format!("type {kind:?} needs an argument"))?;
                match kind {
                    "list" => Ok(Type::list(Type::from_json(arg)?)),
                    "set" => Ok(Type::set(Type::from_json(arg)?)),
                    "map" => Ok(Type::map(Type::from_json(arg)?)),
                    "tuple" => {
                        let elems = arg
                            .as_array()
                            .ok_or("tuple type needs an array of element types")?;
                        Ok(Type::Tuple(
                            elems
                                .iter()
                                .map(Type::from_json)
                                .collect::<Result<_, _>>()?,
                        ))
                    }
                    "object" => {
                        let obj = arg
                            .as_object()
                            .ok_or("object type needs a map of attribute types")?;
                        let attrs = obj
                            .iter()
                            .map(|(k, v)| Ok((k.clone(), Type::from_json(v)?)))
                            .collect::<Result<_, String>>()?;
                        let optional = match parts.get(2) {
                            None => BTreeSet::new(),
                            Some(Json::Array(names)) => names
                                .iter()
                                .map(|n| {
                                    n.as_str()
                                        .map(str::to_owned)
                                        .ok_or("optional attribute names must be strings")
                                })
                                .collect::<Result<_, _>>()?,
                            Some(_) => {
                                return Err("object optional attributes must be an array".into());
                            }
                        };
                        Ok(Type::Object { attrs, optional })
                    }
                    other => Err(format!("unknown type kind {other:?}")),
                }
            }
            _ => Err("a type is a string or an array".into()),
        }
    }

    pub fn from_json_bytes(b: &[u8]) -> Result<Type, String> {
        let j: Json = serde_json::from_slice(b).map_err(|e| format!("type is not JSON: {e}"))?;
        Type::from_json(&j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip() {
        let t = Type::object([
            ("a", Type::list(Type::String)),
            ("b", Type::Tuple(vec![Type::Bool, Type::Dynamic])),
            ("c", Type::map(Type::set(Type::Number))),
        ]);
        let bytes = t.to_json_bytes();
        assert_eq!(Type::from_json_bytes(&bytes).unwrap(), t);
        assert_eq!(Type::String.to_json_bytes(), b"\"string\"");
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            r#""strin""#,
            r#"["list"]"#,
            r#"["object",1]"#,
            "7",
            r#"["tuple",{}]"#,
        ] {
            assert!(Type::from_json_bytes(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
