//! The provider's resolved settings as plain values: what the backends (`gce`) and `ops` take. Resolving them
//! from the provider block and the environment is `config`'s job, which knows the Terraform schema; this crate
//! does not (it has no Terraform crate among its dependencies), so the backends never reach the framework through it.
//! [`error_chain`] is here for the same reason: every layer turns an error into the user's sentence with it.

pub mod client_cache;
pub mod error_chain;

use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How the provider authenticates to the Compute API.
#[derive(Clone, Default)]
pub enum Auth {
    /// Application Default Credentials.
    #[default]
    Default,
    /// A key file path or its JSON contents.
    Credentials(String),
    AccessToken(String),
}

impl std::fmt::Debug for Auth {
    // Secrets never reach a log line, even at trace level.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Default => write!(f, "application-default-credentials"),
            Auth::Credentials(_) => write!(f, "credentials(redacted)"),
            Auth::AccessToken(_) => write!(f, "access-token(redacted)"),
        }
    }
}

/// The provider block resolved against the environment: what resources use.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub project: Option<String>,
    pub region: Option<String>,
    pub zone: Option<String>,
    pub auth: Auth,
    pub impersonate_service_account: Option<String>,
    pub compute_endpoint: Option<String>,
    /// The Cloud Storage endpoint backups go to (`storage_custom_endpoint`); Google's when unset.
    pub storage_endpoint: Option<String>,
    /// The Secret Manager endpoint replicas' keys go to (`secret_manager_custom_endpoint`); Google's when unset.
    pub secret_manager_endpoint: Option<String>,
    /// The Google Cloud universe (`googleapis.com` unless a sovereign cloud's): the Compute endpoint and the
    /// credentials follow it when no endpoint is set.
    pub universe_domain: Option<String>,
    /// The provider's `default_labels`: every cluster's objects carry them under its own `labels`.
    pub default_labels: std::collections::BTreeMap<String, String>,
    /// What every Compute request says it is, so API audit logs and quota pages name the provider and the
    /// Terraform that ran it (see [`user_agent`]).
    pub user_agent: String,
    pub etcd_dial_timeout: Duration,
    pub etcd_via_internal_ip: bool,
    /// How long a replica out of the pool keeps serving before it stops (see the schema).
    pub drain_delay: Duration,
    /// How long a rolled replica must stay healthy before the next one rolls (see the schema).
    pub roll_soak: Duration,
    /// How long a cluster lock's holder may go without renewing before another apply takes the lock over.
    pub lock_ttl: Duration,
    /// The provider's `read_only` (or `HA_READ_ONLY`): plans for drift jobs. No CA key or key bundle is read, etcd
    /// is never dialed, and every apply is refused (docs/guides/drift-jobs.md).
    pub read_only: bool,
}

/// Settings shared by the provider and its resources; set by ConfigureProvider.
pub type SharedSettings = Arc<RwLock<Settings>>;

/// A copy of the settings as configured now: the defaults before ConfigureProvider (a validate), or when a writer
/// panicked while holding the lock.
pub fn current(shared: &SharedSettings) -> Settings {
    shared.read().map(|s| s.clone()).unwrap_or_default()
}

/// The universe when none is configured.
pub const DEFAULT_UNIVERSE_DOMAIN: &str = "googleapis.com";

impl Settings {
    /// The origin (`scheme://host[:port]`) a Google API is called at: the provider's custom endpoint for it,
    /// written Google-provider style (`https://host<version_path>/`) or bare (`http://host:port`), or else
    /// `https://<service>.<universe domain>`. Compute checks its endpoint more strictly (`ha_gce`).
    pub fn api_origin(&self, custom: Option<&str>, version_path: &str, service: &str) -> String {
        match custom.map(str::trim) {
            Some(e) if !e.is_empty() => {
                let t = e.trim_end_matches('/');
                t.strip_suffix(version_path)
                    .unwrap_or(t)
                    .trim_end_matches('/')
                    .to_string()
            }
            _ => {
                let domain = self
                    .universe_domain
                    .as_deref()
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .unwrap_or(DEFAULT_UNIVERSE_DOMAIN);
                format!("https://{service}.{domain}")
            }
        }
    }
}

/// The user agent of every Compute request, shaped like Google's provider's (`Terraform/<version>
/// (+https://www.terraform.io) terraform-provider-google/<version>`), so operators can tell our calls apart in
/// Cloud Audit Logs. OpenTofu reports its own version in the same field.
pub fn user_agent(terraform_version: &str) -> String {
    let ours = concat!("terraform-provider-ha/", env!("CARGO_PKG_VERSION"));
    match terraform_version.trim() {
        "" => ours.to_string(),
        v => format!("Terraform/{v} (+https://www.terraform.io) {ours}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_agent_names_terraform_and_the_provider_with_their_versions() {
        let ua = user_agent("1.10.5");
        assert!(
            ua.starts_with("Terraform/1.10.5 (+https://www.terraform.io) terraform-provider-ha/"),
            "{ua}"
        );
        assert!(ua.ends_with(env!("CARGO_PKG_VERSION")), "{ua}");
        // Without a version (tests that never configure the provider) the provider still names itself.
        assert_eq!(
            user_agent(""),
            format!("terraform-provider-ha/{}", env!("CARGO_PKG_VERSION"))
        );
    }
}
