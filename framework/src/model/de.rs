//! Reading a [`Value`] into a model struct: a serde `Deserializer` over `&Value`.
//!
//! Strict where a silent mismatch would hide a bug: a struct's fields must match the object's attributes
//! one-to-one (models mirror schemas), and a null or unknown reaching a field that cannot hold it is an error
//! rather than a default. Dynamic values are read as their content.

use std::collections::BTreeMap;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use tfplugin::value::Value;

use super::error::ModelError;
use super::val::VAL_TOKEN;

pub(crate) struct De<'a>(pub(crate) &'a Value);

impl<'a> De<'a> {
    /// The value with any dynamic wrapper removed.
    fn content(&self) -> &'a Value {
        let mut v = self.0;
        while let Value::Dynamic(d) = v {
            v = &d.value;
        }
        v
    }

    /// The value, which must be known and not null because the field cannot say otherwise.
    fn present(&self) -> Result<&'a Value, ModelError> {
        match self.content() {
            Value::Null => Err(ModelError::new(
                "value is null, but its model field is not an Option or Val",
            )),
            Value::Unknown(_) => Err(ModelError::new(
                "value is unknown, but its model field is not a Val",
            )),
            v => Ok(v),
        }
    }

    fn mismatch(&self, expected: &str) -> ModelError {
        ModelError::new(format!(
            "expected {expected}, found {}",
            describe(self.content())
        ))
    }

    fn number(&self, expected: &str) -> Result<&'a tfplugin::value::Number, ModelError> {
        match self.present()? {
            Value::Number(n) => Ok(n),
            _ => Err(self.mismatch(expected)),
        }
    }

    /// An integer of type `T`, whose range is `min..=max`. A number outside it, or not whole, is the user's to fix:
    /// the schema's number type accepts it, the model's Rust type cannot hold it.
    fn int<T: TryFrom<i128>>(&self, what: &str, min: i128, max: i128) -> Result<T, ModelError> {
        let n = self.number(what)?;
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .and_then(|i| T::try_from(i).ok())
            .ok_or_else(|| {
                ModelError::input(format!(
                    "must be a whole number between {min} and {max}; {n} is not"
                ))
            })
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Unknown(_) => "an unknown value",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::List(_) | Value::Set(_) | Value::Tuple(_) => "a list",
        Value::Map(_) | Value::Object(_) => "an object",
        Value::Dynamic(_) => "a dynamic value",
    }
}

macro_rules! ints {
    ($($method:ident $visit:ident $ty:ty, $what:literal;)*) => {$(
        fn $method<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
            v.$visit(self.int::<$ty>($what, i128::from(<$ty>::MIN), i128::from(<$ty>::MAX))?)
        }
    )*};
}

impl<'a> de::Deserializer<'a> for De<'a> {
    type Error = ModelError;

    fn deserialize_any<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        match self.content() {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => v.visit_i64(i),
                (_, Some(u), _) => v.visit_u64(u),
                (_, _, Some(f)) => v.visit_f64(f),
                _ => v.visit_string(n.to_string()),
            },
            Value::String(s) => v.visit_borrowed_str(s),
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => v.visit_seq(Seq {
                items: items.iter(),
                i: 0,
            }),
            Value::Map(m) | Value::Object(m) => v.visit_map(Map::new(m, false)),
            // `content` has removed any dynamic wrapper, so only an unknown is left.
            _ => Err(ModelError::new(
                "value is unknown, but its model field is not a Val",
            )),
        }
    }

    fn deserialize_bool<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        match self.present()? {
            Value::Bool(b) => v.visit_bool(*b),
            _ => Err(self.mismatch("a bool")),
        }
    }

    ints! {
        deserialize_i8 visit_i8 i8, "an i8";
        deserialize_i16 visit_i16 i16, "an i16";
        deserialize_i32 visit_i32 i32, "an i32";
        deserialize_i64 visit_i64 i64, "an i64";
        deserialize_u8 visit_u8 u8, "a u8";
        deserialize_u16 visit_u16 u16, "a u16";
        deserialize_u32 visit_u32 u32, "a u32";
        deserialize_u64 visit_u64 u64, "a u64";
    }

    fn deserialize_f32<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        self.deserialize_f64(v)
    }

    fn deserialize_f64<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        let n = self.number("a number")?;
        v.visit_f64(n.as_f64().ok_or_else(|| {
            ModelError::input(format!(
                "must be a number between {:e} and {:e}; {n} is not",
                f64::MIN,
                f64::MAX
            ))
        })?)
    }

    fn deserialize_char<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        self.deserialize_str(v)
    }

    fn deserialize_str<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        match self.present()? {
            Value::String(s) => v.visit_borrowed_str(s),
            _ => Err(self.mismatch("a string")),
        }
    }

    fn deserialize_string<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        self.deserialize_str(v)
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        self.deserialize_str(v)
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        self.deserialize_str(v)
    }

    fn deserialize_option<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        match self.content() {
            Value::Null => v.visit_none(),
            Value::Unknown(_) => Err(ModelError::new(
                "value is unknown, but its model field is an Option; use Val",
            )),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        match self.content() {
            Value::Null => v.visit_unit(),
            _ => Err(self.mismatch("null")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, ModelError> {
        self.deserialize_unit(v)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, ModelError> {
        if name != VAL_TOKEN {
            return v.visit_newtype_struct(self);
        }
        // Val's side of the protocol (see val.rs).
        match self.content() {
            Value::Null => v.visit_none(),
            Value::Unknown(_) => v.visit_unit(),
            // A collection with unknown elements (`[var.cidr]` at validate time) is not yet known as a whole:
            // its Rust collection type has nowhere to put an unknown element. Objects keep their partial
            // knowledge, since their model structs hold `Val` fields.
            c @ (Value::List(_) | Value::Set(_) | Value::Tuple(_) | Value::Map(_))
                if !c.is_fully_known() =>
            {
                v.visit_unit()
            }
            _ => v.visit_some(self),
        }
    }

    fn deserialize_seq<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        match self.present()? {
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                let mut seq = Seq {
                    items: items.iter(),
                    i: 0,
                };
                let out = v.visit_seq(&mut seq)?;
                match seq.items.len() {
                    0 => Ok(out),
                    n => Err(ModelError::new(format!(
                        "{n} more elements than the model holds"
                    ))),
                }
            }
            _ => Err(self.mismatch("a list")),
        }
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, v: V) -> Result<V::Value, ModelError> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value, ModelError> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        match self.present()? {
            Value::Map(m) | Value::Object(m) => v.visit_map(Map::new(m, false)),
            _ => Err(self.mismatch("a map")),
        }
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ModelError> {
        let m = match self.present()? {
            Value::Map(m) | Value::Object(m) => m,
            _ => return Err(self.mismatch("an object")),
        };
        // Models mirror schemas one-to-one; name every difference, on both sides, so one run shows the whole fix.
        let missing: Vec<&str> = fields
            .iter()
            .copied()
            .filter(|f| !m.contains_key(*f))
            .collect();
        let extra: Vec<&str> = m
            .keys()
            .map(String::as_str)
            .filter(|k| !fields.contains(k))
            .collect();
        if !missing.is_empty() || !extra.is_empty() {
            let mut parts = Vec::new();
            if !missing.is_empty() {
                parts.push(format!(
                    "struct {name} has fields not in the object: {}",
                    missing.join(", ")
                ));
            }
            if !extra.is_empty() {
                parts.push(format!(
                    "object has attributes not in struct {name}: {}",
                    extra.join(", ")
                ));
            }
            return Err(ModelError::new(parts.join("; ")));
        }
        v.visit_map(Map::new(m, true))
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ModelError> {
        match self.present()? {
            // Unit variants are plain strings, as serde writes them.
            Value::String(s) => v.visit_enum(s.as_str().into_deserializer()),
            Value::Map(m) | Value::Object(m) if m.len() == 1 => {
                let (k, val) = m.iter().next().ok_or_else(|| self.mismatch("an enum"))?;
                v.visit_enum(Enum(k, val)).map_err(|e| e.within_attr(k))
            }
            _ => Err(self.mismatch("a string or single-attribute object naming an enum variant")),
        }
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        self.deserialize_str(v)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, v: V) -> Result<V::Value, ModelError> {
        v.visit_unit()
    }
}

struct Seq<'a> {
    items: std::slice::Iter<'a, Value>,
    i: usize,
}

impl<'a> de::SeqAccess<'a> for Seq<'a> {
    type Error = ModelError;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ModelError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let i = self.i;
        self.i += 1;
        seed.deserialize(De(item))
            .map(Some)
            .map_err(|e| e.within_index(i))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Map<'a> {
    entries: std::collections::btree_map::Iter<'a, String, Value>,
    pending: Option<(&'a str, &'a Value)>,
    /// Struct fields are attributes (`a.b`); map entries are keys (`a["b"]`).
    is_struct: bool,
}

impl<'a> Map<'a> {
    fn new(m: &'a BTreeMap<String, Value>, is_struct: bool) -> Self {
        Map {
            entries: m.iter(),
            pending: None,
            is_struct,
        }
    }
}

impl<'a> de::MapAccess<'a> for Map<'a> {
    type Error = ModelError;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ModelError> {
        let Some((k, v)) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some((k, v));
        seed.deserialize(BorrowedStrDeserializer::new(k)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, ModelError> {
        let (k, v) = self
            .pending
            .take()
            .ok_or_else(|| ModelError::new("serde asked for a value before its key"))?;
        seed.deserialize(De(v)).map_err(|e| {
            if self.is_struct {
                e.within_attr(k)
            } else {
                e.within_key(k)
            }
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A variant written as a single-attribute object, `{variant: content}`.
struct Enum<'a>(&'a str, &'a Value);

impl<'a> de::EnumAccess<'a> for Enum<'a> {
    type Error = ModelError;
    type Variant = De<'a>;

    fn variant_seed<S: DeserializeSeed<'a>>(
        self,
        seed: S,
    ) -> Result<(S::Value, De<'a>), ModelError> {
        Ok((
            seed.deserialize(BorrowedStrDeserializer::new(self.0))?,
            De(self.1),
        ))
    }
}

impl<'a> de::VariantAccess<'a> for De<'a> {
    type Error = ModelError;

    fn unit_variant(self) -> Result<(), ModelError> {
        de::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<S: DeserializeSeed<'a>>(self, seed: S) -> Result<S::Value, ModelError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'a>>(self, _len: usize, v: V) -> Result<V::Value, ModelError> {
        de::Deserializer::deserialize_seq(self, v)
    }

    fn struct_variant<V: Visitor<'a>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ModelError> {
        de::Deserializer::deserialize_struct(self, "variant", fields, v)
    }
}
