//! Writing a model struct as a [`Value`]: a serde `Serializer` producing untyped values.
//!
//! Structs become objects, sequences lists, tuples tuples, maps maps, `None` null and `Val::Unknown` unknown.
//! The result carries no type: the codecs accept these shapes for any matching schema type, and check that every
//! attribute is present.

use std::collections::BTreeMap;

use serde::ser::{self, Serialize};
use tfplugin::value::{Number, Value};

use super::error::ModelError;
use super::val::UNKNOWN_TOKEN;

pub(crate) struct Ser;

fn wrap(variant: &str, v: Value) -> Value {
    Value::Object(BTreeMap::from([(variant.to_owned(), v)]))
}

impl ser::Serializer for Ser {
    type Ok = Value;
    type Error = ModelError;
    type SerializeSeq = Seq;
    type SerializeTuple = Seq;
    type SerializeTupleStruct = Seq;
    type SerializeTupleVariant = Seq;
    type SerializeMap = Map;
    type SerializeStruct = Map;
    type SerializeStructVariant = Map;

    fn serialize_bool(self, b: bool) -> Result<Value, ModelError> {
        Ok(Value::Bool(b))
    }
    fn serialize_i8(self, i: i8) -> Result<Value, ModelError> {
        self.serialize_i64(i.into())
    }
    fn serialize_i16(self, i: i16) -> Result<Value, ModelError> {
        self.serialize_i64(i.into())
    }
    fn serialize_i32(self, i: i32) -> Result<Value, ModelError> {
        self.serialize_i64(i.into())
    }
    fn serialize_i64(self, i: i64) -> Result<Value, ModelError> {
        Ok(Value::Number(i.into()))
    }
    fn serialize_i128(self, i: i128) -> Result<Value, ModelError> {
        let n: Number = i.to_string().parse().map_err(ModelError::new)?;
        Ok(Value::Number(n))
    }
    fn serialize_u8(self, u: u8) -> Result<Value, ModelError> {
        self.serialize_u64(u.into())
    }
    fn serialize_u16(self, u: u16) -> Result<Value, ModelError> {
        self.serialize_u64(u.into())
    }
    fn serialize_u32(self, u: u32) -> Result<Value, ModelError> {
        self.serialize_u64(u.into())
    }
    fn serialize_u64(self, u: u64) -> Result<Value, ModelError> {
        Ok(Value::Number(u.into()))
    }
    fn serialize_u128(self, u: u128) -> Result<Value, ModelError> {
        let n: Number = u.to_string().parse().map_err(ModelError::new)?;
        Ok(Value::Number(n))
    }
    fn serialize_f32(self, f: f32) -> Result<Value, ModelError> {
        self.serialize_f64(f.into())
    }
    fn serialize_f64(self, f: f64) -> Result<Value, ModelError> {
        // Terraform has no NaN; catching it here names the attribute instead of failing later in the encoder.
        if f.is_nan() {
            return Err(ModelError::new("NaN is not a valid number"));
        }
        Ok(Value::Number(f.into()))
    }
    fn serialize_char(self, c: char) -> Result<Value, ModelError> {
        Ok(Value::String(c.to_string()))
    }
    fn serialize_str(self, s: &str) -> Result<Value, ModelError> {
        Ok(Value::String(s.to_owned()))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Value, ModelError> {
        Err(ModelError::new(
            "byte strings have no Terraform type; use String or Vec<u8> as a list",
        ))
    }
    fn serialize_none(self) -> Result<Value, ModelError> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Value, ModelError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, ModelError> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<Value, ModelError> {
        // Val's side of the protocol (see val.rs).
        Ok(if name == UNKNOWN_TOKEN {
            Value::unknown()
        } else {
            Value::Null
        })
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Value, ModelError> {
        Ok(Value::String(variant.to_owned()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Value, ModelError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<Value, ModelError> {
        Ok(wrap(
            variant,
            v.serialize(Ser).map_err(|e| e.within_attr(variant))?,
        ))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq, ModelError> {
        Ok(Seq {
            items: Vec::with_capacity(len.unwrap_or(0)),
            tuple: false,
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq, ModelError> {
        Ok(Seq {
            items: Vec::with_capacity(len),
            tuple: true,
            variant: None,
        })
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq, ModelError> {
        self.serialize_tuple(len)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Seq, ModelError> {
        Ok(Seq {
            items: Vec::with_capacity(len),
            tuple: true,
            variant: Some(variant),
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map, ModelError> {
        Ok(Map {
            entries: BTreeMap::new(),
            key: None,
            object: false,
            variant: None,
        })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Map, ModelError> {
        Ok(Map {
            entries: BTreeMap::new(),
            key: None,
            object: true,
            variant: None,
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Map, ModelError> {
        Ok(Map {
            entries: BTreeMap::new(),
            key: None,
            object: true,
            variant: Some(variant),
        })
    }
}

pub(crate) struct Seq {
    items: Vec<Value>,
    tuple: bool,
    variant: Option<&'static str>,
}

impl Seq {
    fn push<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), ModelError> {
        let i = self.items.len();
        self.items
            .push(v.serialize(Ser).map_err(|e| e.within_index(i))?);
        Ok(())
    }

    fn finish(self) -> Result<Value, ModelError> {
        let v = if self.tuple {
            Value::Tuple(self.items)
        } else {
            Value::List(self.items)
        };
        Ok(match self.variant {
            Some(name) => wrap(name, v),
            None => v,
        })
    }
}

macro_rules! seq_impl {
    ($($trait:ident $method:ident;)*) => {$(
        impl ser::$trait for Seq {
            type Ok = Value;
            type Error = ModelError;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), ModelError> {
                self.push(v)
            }
            fn end(self) -> Result<Value, ModelError> {
                self.finish()
            }
        }
    )*};
}
seq_impl! {
    SerializeSeq serialize_element;
    SerializeTuple serialize_element;
    SerializeTupleStruct serialize_field;
    SerializeTupleVariant serialize_field;
}

pub(crate) struct Map {
    entries: BTreeMap<String, Value>,
    key: Option<String>,
    /// A struct (attributes, `a.b` in paths) rather than a map (keys, `a["b"]`).
    object: bool,
    variant: Option<&'static str>,
}

impl Map {
    fn insert<T: Serialize + ?Sized>(&mut self, k: String, v: &T) -> Result<(), ModelError> {
        let value = v.serialize(Ser).map_err(|e| {
            if self.object {
                e.within_attr(&k)
            } else {
                e.within_key(&k)
            }
        })?;
        self.entries.insert(k, value);
        Ok(())
    }

    fn finish(self) -> Result<Value, ModelError> {
        let v = if self.object {
            Value::Object(self.entries)
        } else {
            Value::Map(self.entries)
        };
        Ok(match self.variant {
            Some(name) => wrap(name, v),
            None => v,
        })
    }
}

impl ser::SerializeMap for Map {
    type Ok = Value;
    type Error = ModelError;

    /// Terraform map keys are strings; numbers and bools are written as text, as cty converts them.
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), ModelError> {
        self.key = Some(match k.serialize(Ser)? {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return Err(ModelError::new("map keys must be strings")),
        });
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), ModelError> {
        let k = self
            .key
            .take()
            .ok_or_else(|| ModelError::new("serde wrote a map value before its key"))?;
        self.insert(k, v)
    }

    fn end(self) -> Result<Value, ModelError> {
        self.finish()
    }
}

macro_rules! struct_impl {
    ($($trait:ident;)*) => {$(
        impl ser::$trait for Map {
            type Ok = Value;
            type Error = ModelError;
            fn serialize_field<T: Serialize + ?Sized>(&mut self, k: &'static str, v: &T) -> Result<(), ModelError> {
                self.insert(k.to_owned(), v)
            }
            fn end(self) -> Result<Value, ModelError> {
                self.finish()
            }
        }
    )*};
}
struct_impl! {
    SerializeStruct;
    SerializeStructVariant;
}
