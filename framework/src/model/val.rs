//! [`Val<T>`]: a model field that may be null or unknown, like terraform-plugin-framework's `types.String`.
//!
//! serde has no notion of "unknown", so `Val` talks to this module's (de)serializer through a private protocol:
//! it deserializes as a newtype struct named [`VAL_TOKEN`], which the bridge answers with `visit_none` (null),
//! `visit_unit` (unknown) or `visit_some` (known); it serializes an unknown as a unit struct named
//! [`UNKNOWN_TOKEN`]. Other serde formats see an `Option<T>` (unknown becomes null).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, Visitor};
use serde::ser::{Serialize, Serializer};

pub(crate) const VAL_TOKEN: &str = "$tfplugin_framework::Val";
pub(crate) const UNKNOWN_TOKEN: &str = "$tfplugin_framework::Unknown";

/// An attribute value that may be null or not yet known.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Val<T> {
    #[default]
    Null,
    Unknown,
    Known(T),
}

impl<T> Val<T> {
    pub fn known(&self) -> Option<&T> {
        match self {
            Val::Known(t) => Some(t),
            _ => None,
        }
    }

    pub fn into_known(self) -> Option<T> {
        match self {
            Val::Known(t) => Some(t),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Val::Null)
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, Val::Unknown)
    }

    pub fn is_known(&self) -> bool {
        matches!(self, Val::Known(_))
    }

    pub fn as_ref(&self) -> Val<&T> {
        match self {
            Val::Null => Val::Null,
            Val::Unknown => Val::Unknown,
            Val::Known(t) => Val::Known(t),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Val<U> {
        match self {
            Val::Null => Val::Null,
            Val::Unknown => Val::Unknown,
            Val::Known(t) => Val::Known(f(t)),
        }
    }

    /// The known value, or `default` when null or unknown.
    pub fn unwrap_or(self, default: T) -> T {
        self.into_known().unwrap_or(default)
    }

    pub fn unwrap_or_default(self) -> T
    where
        T: Default,
    {
        self.into_known().unwrap_or_default()
    }
}

impl<T> From<T> for Val<T> {
    fn from(t: T) -> Self {
        Val::Known(t)
    }
}

impl<T> From<Option<T>> for Val<T> {
    fn from(o: Option<T>) -> Self {
        o.map_or(Val::Null, Val::Known)
    }
}

impl<T: Serialize> Serialize for Val<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Val::Null => s.serialize_none(),
            Val::Unknown => s.serialize_unit_struct(UNKNOWN_TOKEN),
            Val::Known(t) => s.serialize_some(t),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Val<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_newtype_struct(VAL_TOKEN, ValVisitor(PhantomData))
    }
}

struct ValVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ValVisitor<T> {
    type Value = Val<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value, null or unknown")
    }

    fn visit_none<E>(self) -> Result<Val<T>, E> {
        Ok(Val::Null)
    }

    fn visit_unit<E>(self) -> Result<Val<T>, E> {
        Ok(Val::Unknown)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Val<T>, D::Error> {
        T::deserialize(d).map(Val::Known)
    }

    /// Any other format: read it as an `Option<T>`.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Val<T>, D::Error> {
        Option::<T>::deserialize(d).map(Val::from)
    }
}
