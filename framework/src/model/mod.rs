//! Models: config and state as serde structs that mirror a schema one-to-one, bridged to [`Value`].
//!
//! ```ignore
//! #[derive(Serialize, Deserialize)]
//! struct ReplicaModel { id: Val<String>, zone: Val<String>, labels: Val<BTreeMap<String, String>>, timeouts: Val<Timeouts> }
//! ```
//!
//! - [`Val<T>`] holds any attribute that may be null or unknown; `Option<T>` holds null as `None` but refuses an
//!   unknown; a plain `T` refuses both, with an error naming the attribute.
//! - [`from_value`] is strict: a struct's fields and the object's attributes must match one-to-one, and the error
//!   lists the differences on both sides (terraform-plugin-framework does the same; a silently ignored attribute
//!   is a bug that surfaces much later). Use `#[serde(skip)]` for fields that are not attributes.
//! - [`to_value`] writes untyped values (objects, lists, maps); the codecs fit them to the schema's types.

mod de;
mod error;
mod ser;
mod typed;
mod val;

#[cfg(test)]
mod tests;

pub use error::ModelError;
pub use typed::TfType;
pub use val::Val;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tfplugin::value::Value;

/// Reads a model from a value (usually an object decoded against the resource's schema).
pub fn from_value<T: DeserializeOwned>(v: &Value) -> Result<T, ModelError> {
    T::deserialize(de::De(v))
}

/// Writes a model as a value, ready to encode against the resource's schema.
pub fn to_value<T: Serialize + ?Sized>(t: &T) -> Result<Value, ModelError> {
    t.serialize(ser::Ser)
}
