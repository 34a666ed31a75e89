//! The provider's resources: schema and glue that decode, call the domain and backends, and encode.

pub mod cluster;
pub mod replica;
pub mod spec;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use tfplugin::diag::Diagnostics;
use tfplugin_framework::Val;

/// The `timeouts` block.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Timeouts {
    pub create: Val<String>,
    pub update: Val<String>,
    pub delete: Val<String>,
}

/// A known value, or the empty default where the user left an optional collection out.
pub fn known_or_default<T: Clone + Default>(v: &Val<T>) -> Val<T> {
    match v {
        Val::Null => Val::Known(T::default()),
        other => other.clone(),
    }
}

/// This version plans but does not yet create or change GCE objects: the GCE and etcd backends come next. Say so
/// plainly rather than pretend.
pub fn apply_unavailable(type_name: &str, op: &str, diags: &mut Diagnostics) {
    diags.error(
        format!("Cannot {op} {type_name} with this provider version"),
        format!(
            "terraform-provider-ha {} validates and plans {type_name}, but does not yet {op} it on Google Compute Engine. Use `terraform plan` to check configurations until a version with the GCE backend is released.",
            env!("CARGO_PKG_VERSION")
        ),
    );
}
