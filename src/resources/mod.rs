//! The provider's resources: schema and glue that decode, call the domain and backends, and encode.

pub mod admin_credentials;
mod advice;
mod brought_ca_check;
mod brought_ca_rotation;
mod cancel;
pub mod cluster;
mod cluster_apply;
mod cluster_ca;
mod cluster_encryption;
pub mod cluster_health;
pub mod cluster_model;
mod cluster_replacement;
mod cluster_rolls;
mod cluster_rotation;
mod cluster_validate;
#[cfg(test)]
mod extreme_tests;
mod import;
mod placement;
mod read_only;
pub mod replica;
mod replica_apply;
mod replica_guard;
pub mod replica_model;
pub mod spec;
#[cfg(test)]
mod tests;
mod timeouts;

use serde::{Deserialize, Serialize};
pub use tfplugin_framework::Val;

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

/// GCE's label rules and the provider's own keys (`domain::labels`), as a validator of a `labels` attribute.
pub fn labels_validator() -> tfplugin_framework::validator::MapValidator {
    tfplugin_framework::validator::map_check(
        "GCE label keys and values; no key of the provider's own.",
        |labels| {
            ha_domain::labels::check_labels(labels)
                .into_iter()
                .map(|p| (p.key, p.summary, p.detail))
                .collect()
        },
    )
}
