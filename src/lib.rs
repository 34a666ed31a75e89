//! terraform-provider-ha as a library: the provider, its resources and functions, on Terraform's side of the line.
//! The layers below are crates of their own (`crates/`): this one depends on `ha-ops`, `ha-domain`, `ha-pki` and
//! `ha-settings` only, so it cannot reach GCE, etcd or Cloud Storage but through `ha-ops`. The binary (`main.rs`)
//! only serves it.

// A replica's update awaits a roll or a mend, each a `ha_ops::change::run_change` over a `Change` whose async
// methods nest the Google clients' futures deeply; proving the whole future `Send` takes more than the default 128
// levels of trait evaluation (E0275 on `h2`'s types).
#![recursion_limit = "256"]

pub mod config;
pub mod functions;
pub mod provider;
pub mod resources;
