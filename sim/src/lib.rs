//! ha-sim: a local Compute Engine v1 (and Secret Manager v1) REST API on loopback whose VMs run real etcd.
//!
//! Codemap:
//! - `api/`: one file per GCE resource; `api/mod.rs` is the route table and the request pipeline.
//! - `secrets/`: the Secret Manager v1 surface, with IAM on each secret.
//! - `state/`: the cloud as data (resources, operations, request ids), persisted to `state.json` by `persist.rs`.
//! - `ops/`: asynchronous operations (PENDING → RUNNING → DONE) and the transitions they apply.
//! - `faults/`: failpoints as data and out-of-band events; `admin.rs` exposes them under `/_sim/`.
//! - `fabric/`: makes VMs (`vm/`) and the network (`net/`) follow the state.
//! - `server.rs`, `cli/`, `main.rs`: running it.
//!
//! Architecture invariant: handlers never start processes or sockets; they change data, and the fabric
//! converges. Architecture invariant: ha-sim depends on no other workspace crate.

pub mod admin;
pub mod api;
pub mod app;
pub mod cli;
pub mod config;
pub mod contract;
pub mod etcd_bins;
pub mod fabric;
pub mod faults;
pub mod http;
pub mod net;
pub mod ops;
pub mod persist;
pub mod provider_methods;
pub mod reqlog;
pub mod secrets;
pub mod server;
pub mod state;
pub mod status;
pub mod vm;

pub use config::{LatencyProfile, SimConfig};
pub use server::{Running, start};
