//! Terraform plugin protocol 6, as plain Rust.
//!
//! This crate is the protocol layer: it speaks go-plugin (handshake, AutoMTLS, the controller and stdio services)
//! and tfplugin6 over gRPC, and converts every message into the plain types of [`types`]. A provider implements
//! [`ProviderServer`] and calls [`serve`]. Generated protobuf code stays private (`proto`), so nothing above this
//! crate depends on prost or tonic.
//!
//! It knows nothing of any particular provider, cloud or resource.

pub mod diag;
pub mod types;
pub mod value;

mod server_trait;
pub use server_trait::ProviderServer;

mod convert;
mod logging;
mod proto;
mod server;
pub use logging::init_logging;
pub use server::serve;
