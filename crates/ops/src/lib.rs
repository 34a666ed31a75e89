//! The imperative shell: observe a cluster once through the backends, ask `ha_domain` what to do, and carry
//! the steps out through gce, etcd and pki. Resources call this layer; it knows nothing of Terraform.

pub mod adopt;
pub mod backup;
pub mod build;
pub mod ca_rotation;
pub mod change;
pub mod cloud;
pub mod cluster;
pub mod cluster_keys;
pub mod context;
pub mod encryption_stage;
pub mod endpoint;
pub mod error;
pub mod etcd_version;
pub mod execute;
pub mod health;
pub mod join;
pub mod kubernetes_version;
pub mod leave;
pub mod lock;
#[cfg(test)]
mod master_contract_tests;
pub mod mend;
pub mod observe;
pub mod orphans;
pub mod placement;
pub mod plan_check;
pub mod plan_leaves;
pub mod recover;
pub mod refresh;
pub mod repair;
pub mod restore;
pub mod roll;
pub mod secrets_encryption;
pub mod service_account_rotation;
pub mod shared;
pub mod spec;

pub use context::ClusterCtx;
pub use error::OpError;
