//! [`Value`]: a cty value as the plugin protocol carries it, null or unknown at any depth.
//!
//! Values are untyped trees; the [`Type`] they conform to travels separately (the schema), and the codecs in
//! `msgpack`/`json` take both. Two shapes need more than the tree:
//! - unknowns may carry refinements (a string prefix, number bounds, "definitely not null"), which a provider must
//!   be able to echo back unchanged, so [`Refinements`] keeps them;
//! - a value in a `dynamic` slot names its concrete type on the wire, and a list cannot be told from a set or
//!   tuple without it, so decoders produce [`Value::Dynamic`] with that type. Encoders also accept any plain value
//!   in a dynamic slot and infer its type ([`Value::infer_type`]).

use std::collections::BTreeMap;

use super::Type;
use super::number::Number;

/// A cty value. Which variant is valid depends on the [`Type`] it is encoded with; the encoders accept
/// `List`/`Set`/`Tuple` interchangeably and `Map`/`Object` interchangeably, since serde-built values cannot tell
/// them apart.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Value {
    #[default]
    Null,
    /// Not known until apply. Boxed because refined unknowns are rare and large.
    Unknown(Box<Refinements>),
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Value>),
    /// Kept in wire order; cty deduplicates sets, so a provider should not send duplicates.
    Set(Vec<Value>),
    Map(BTreeMap<String, Value>),
    Object(BTreeMap<String, Value>),
    Tuple(Vec<Value>),
    /// A known value of a `dynamic` slot, with its concrete type. (A null or unknown dynamic slot is `Null` or
    /// `Unknown`; cty may also send a typed null/unknown, which is `Dynamic` wrapping `Null`/`Unknown`.)
    Dynamic(Box<Typed>),
}

/// A value with its concrete type, the content of a [`Value::Dynamic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed {
    pub ty: Type,
    pub value: Value,
}

/// What Terraform knows about an unknown value (cty "refinements", msgpack extension 12).
///
/// `Default` is a plain unknown. Keys this crate does not know are kept raw in `other`, so the refinement
/// round-trips losslessly; encoders write only the refinements cty accepts for the slot's type (see `refine`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Refinements {
    /// Key 1, cty's "nullness": `Some(false)` means definitely not null.
    pub nullness: Option<bool>,
    /// Key 2: a known prefix of an unknown string.
    pub string_prefix: Option<String>,
    /// Keys 3 and 4: number bounds, each `(bound, inclusive)`.
    pub number_lower: Option<(Number, bool)>,
    pub number_upper: Option<(Number, bool)>,
    /// Keys 5 and 6: bounds on a collection's length.
    pub length_lower: Option<u64>,
    pub length_upper: Option<u64>,
    /// Any other key (not 1–6), with its value as raw msgpack bytes.
    pub other: BTreeMap<i64, Vec<u8>>,
}

impl Refinements {
    /// Whether this is a plain unknown with nothing known about it.
    pub fn is_empty(&self) -> bool {
        *self == Refinements::default()
    }

    pub fn definitely_not_null(&self) -> bool {
        self.nullness == Some(false)
    }
}

impl Value {
    /// A plain (unrefined) unknown.
    pub fn unknown() -> Value {
        Value::Unknown(Box::default())
    }

    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    pub fn number(n: impl Into<Number>) -> Value {
        Value::Number(n.into())
    }

    pub fn object<I, K>(attrs: I) -> Value
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        Value::Object(attrs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    pub fn list(items: impl IntoIterator<Item = Value>) -> Value {
        Value::List(items.into_iter().collect())
    }

    pub fn dynamic(ty: Type, value: Value) -> Value {
        Value::Dynamic(Box::new(Typed { ty, value }))
    }

    /// Null, or a dynamic value of a null.
    pub fn is_null(&self) -> bool {
        match self {
            Value::Null => true,
            Value::Dynamic(d) => d.value.is_null(),
            _ => false,
        }
    }

    /// Unknown at the top level (not looking inside collections; see [`Value::is_fully_known`]).
    pub fn is_unknown(&self) -> bool {
        match self {
            Value::Unknown(_) => true,
            Value::Dynamic(d) => d.value.is_unknown(),
            _ => false,
        }
    }

    /// No unknown anywhere inside.
    pub fn is_fully_known(&self) -> bool {
        match self {
            Value::Unknown(_) => false,
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                items.iter().all(Value::is_fully_known)
            }
            Value::Map(m) | Value::Object(m) => m.values().all(Value::is_fully_known),
            Value::Dynamic(d) => d.value.is_fully_known(),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => true,
        }
    }

    /// An object's (or map's) attribute by name; `None` if absent or not an object.
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Object(m) | Value::Map(m) => m.get(name),
            Value::Dynamic(d) => d.value.get(name),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        match self {
            Value::Object(m) | Value::Map(m) => m.get_mut(name),
            Value::Dynamic(d) => d.value.get_mut(name),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::Dynamic(d) => d.value.as_str(),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Dynamic(d) => d.value.as_bool(),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            Value::Dynamic(d) => d.value.as_number(),
            _ => None,
        }
    }

    /// The type cty would give this value, for encoding it into a `dynamic` slot. Nulls and unknowns are
    /// `dynamic`; collection elements must agree on a type (nulls and unknowns agree with anything).
    pub fn infer_type(&self) -> Result<Type, String> {
        Ok(match self {
            Value::Null | Value::Unknown(_) => Type::Dynamic,
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(items) => Type::list(unify(items.iter())?),
            Value::Set(items) => Type::set(unify(items.iter())?),
            Value::Map(m) => Type::map(unify(m.values())?),
            Value::Tuple(items) => Type::Tuple(
                items
                    .iter()
                    .map(Value::infer_type)
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => Type::object(
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), v.infer_type()?)))
                    .collect::<Result<Vec<_>, String>>()?,
            ),
            Value::Dynamic(d) => d.ty.clone(),
        })
    }
}

/// The one element type of a collection; `dynamic` when there is nothing to go by.
fn unify<'a>(items: impl Iterator<Item = &'a Value>) -> Result<Type, String> {
    let mut found = Type::Dynamic;
    for item in items {
        let t = item.infer_type()?;
        if t == Type::Dynamic || t == found {
            continue;
        }
        if found != Type::Dynamic {
            return Err(format!(
                "collection elements have different types ({} and {}); use a tuple or object",
                found.to_json(),
                t.to_json()
            ));
        }
        found = t;
    }
    Ok(found)
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.into())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}
impl From<Number> for Value {
    fn from(n: Number) -> Self {
        Value::Number(n)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Number(i.into())
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Number(f.into())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(o: Option<T>) -> Self {
        o.map_or(Value::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_look_through_dynamic_and_depth() {
        let v = Value::object([
            ("a", Value::list([Value::from("x"), Value::unknown()])),
            ("b", Value::Null),
        ]);
        assert!(!v.is_fully_known());
        assert!(v.get("b").unwrap().is_null());
        assert!(!v.get("a").unwrap().is_unknown());
        let d = Value::dynamic(Type::String, Value::Null);
        assert!(d.is_null() && d.is_fully_known());
        assert_eq!(Value::dynamic(Type::String, "s".into()).as_str(), Some("s"));
    }

    #[test]
    fn infers_types_for_dynamic_slots() {
        let v = Value::object([
            ("l", Value::list([Value::Null, 1i64.into()])),
            ("t", Value::Tuple(vec![true.into()])),
        ]);
        assert_eq!(
            v.infer_type().unwrap(),
            Type::object([
                ("l", Type::list(Type::Number)),
                ("t", Type::Tuple(vec![Type::Bool]))
            ])
        );
        let mixed = Value::list(["a".into(), 1i64.into()]);
        assert!(mixed.infer_type().unwrap_err().contains("different types"));
    }
}
