//! Terraform values (cty) and their wire encodings.
//!
//! [`Type`] is a cty type; [`Value`] a cty value, which may be null or unknown at any depth. `msgpack` and `json`
//! encode and decode [`Value`]s against a [`Type`], as the `DynamicValue` message carries them.

mod ty;
pub use ty::Type;

mod error;
mod jsontext;
mod number;
// The file name is the one the codebase map uses; the type lives in `value::value` and is re-exported here.
#[allow(clippy::module_inception)]
mod value;

pub mod json;
pub mod msgpack;

pub use error::{DecodeError, EncodeError};
pub use number::Number;
pub use value::{Refinements, Typed, Value};

#[cfg(test)]
mod tests;
