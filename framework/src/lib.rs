//! A small typed framework over the `tfplugin` protocol crate, in the spirit of terraform-plugin-framework:
//! schemas declared once, config and state as serde structs, plan modifiers and validators as small types, and a
//! `Resource` trait (and `DataSource`, `EphemeralResource`) for which the framework does all RPC plumbing.
//!
//! Layering: this crate knows the protocol's plain types (never protobuf) and nothing of any cloud.

pub mod codec;
pub mod data_source;
pub mod ephemeral;
pub mod erased;
pub mod function;
pub mod hcl;
pub mod model;
pub mod plan;
pub mod planmodifier;
pub mod provider;
pub mod resource;
pub mod schema;
pub mod server;
pub mod validator;
pub mod write_only;

/// For [`typed_object!`]'s expansion in other crates.
#[doc(hidden)]
pub use tfplugin;

pub use data_source::{DataSource, DataSourceHandle, data_source};
pub use ephemeral::{EphemeralHandle, EphemeralResource, Opened, Renewed, ephemeral};
pub use erased::{ResourceHandle, resource};
pub use model::Val;
pub use provider::Provider;
pub use resource::{ApplyResult, PlanChange, Resource, replaces};
pub use schema::{Attribute, Mode, Schema, SingleBlock, timeouts_block};
pub use server::FrameworkServer;
