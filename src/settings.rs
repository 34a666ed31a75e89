//! The provider's resolved settings as plain values: what the backends (`gce`) and `ops` take. Resolving them
//! from the provider block and the environment is `config`'s job, which knows the Terraform schema; this module
//! does not, so the backends never reach the framework through it.

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
    pub etcd_dial_timeout: Duration,
    pub etcd_via_internal_ip: bool,
    /// How long a replica out of the pool keeps serving before it stops (see the schema).
    pub drain_delay: Duration,
}

/// Settings shared by the provider and its resources; set by ConfigureProvider.
pub type SharedSettings = Arc<RwLock<Settings>>;
