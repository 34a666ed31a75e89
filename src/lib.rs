//! terraform-provider-ha as a library: the provider, its resources and functions, on Terraform's side of the line.
//! The layers below are crates of their own (`crates/`): this one depends on `ha-ops`, `ha-domain`, `ha-pki` and
//! `ha-settings` only, so it cannot reach GCE, etcd or Cloud Storage but through `ha-ops`. The binary (`main.rs`)
//! only serves it.

pub mod config;
pub mod functions;
pub mod provider;
pub mod resources;
