//! Conversions between the generated protobuf types and the plain types of [`crate::types`] and [`crate::diag`].
//!
//! `from_proto` handles what the client sends (requests), `to_proto` what the provider answers (responses). Each
//! function is named after the message it converts, so a reviewer can hold it against the protocol definition.

pub(crate) mod from_proto;
pub(crate) mod to_proto;

#[cfg(test)]
mod tests;
