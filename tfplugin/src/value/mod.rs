//! Terraform values (cty) and their wire encodings.
//!
//! [`Type`] is a cty type; [`Value`] a cty value, which may be null or unknown at any depth. `msgpack` and `json`
//! encode and decode [`Value`]s against a [`Type`], as the `DynamicValue` message carries them.

mod ty;
pub use ty::Type;
