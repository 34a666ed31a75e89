//! terraform-provider-ha as a library: the provider, its resources, and the pure domain rules. The binary
//! (`main.rs`) only serves it; tests and benchmarks use the library directly.

pub mod config;
pub mod domain;
pub mod error_chain;
pub mod etcd;
pub mod functions;
pub mod gce;
pub mod master;
pub mod ops;
pub mod pki;
pub mod provider;
pub mod resources;
pub mod settings;
pub mod storage;
