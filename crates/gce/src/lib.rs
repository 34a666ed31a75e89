//! The Compute Engine backend: idempotent helpers over Google's official Rust client
//! (`google-cloud-compute-v1`) for what the `ha_*` resources create. It knows nothing of Terraform: it takes
//! plain specs, returns plain info structs, and fails with one [`Error`] whose text names the resource.
//!
//! Every method takes a `deadline`. Calls are retried on rate limits and server errors until then (mutations
//! with one `requestId`, so GCE applies them once), and operations are awaited with `*Operations.wait`.
//! "ensure" methods create what is missing and accept an existing resource only if it matches; deletes treat
//! "already gone" as success.

mod addresses;
mod auth;
mod call;
mod clients;
mod disks;
mod error;
mod firewalls;
mod forwarding;
mod instance_ops;
mod instances;
mod projects;
mod target_pools;
mod types;
mod zones;

/// A private ha-sim per test; ha-ops's lock tests use it too (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod tests;

pub use call::Backoff;
pub use error::{Error, Result};
pub use types::*;

use clients::Clients;
use ha_settings::Settings;

/// The Compute endpoint of a universe, used when the settings name no endpoint: `compute.googleapis.com` in
/// Google Cloud, `compute.<domain>` in another universe (as Google's provider and the SDK derive it).
fn universe_endpoint(universe_domain: Option<&str>) -> String {
    let domain = universe_domain
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .unwrap_or(ha_settings::DEFAULT_UNIVERSE_DOMAIN);
    format!("https://compute.{domain}")
}

/// A Compute Engine API handle for one project. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Compute {
    project: Option<String>,
    clients: Clients,
    backoff: Backoff,
    /// Sent with every request (see [`ha_settings::user_agent`]).
    user_agent: String,
}

/// The SDK prepends the endpoint to paths that already start with `/compute/v1/`, so the endpoint must be the
/// origin only. Users write it Google-provider style (`https://host/compute/v1/`) or bare (`http://host:port`).
pub(crate) fn normalize_endpoint(given: &str) -> Result<String> {
    let t = given.trim().trim_end_matches('/');
    let t = t
        .strip_suffix("/compute/v1")
        .unwrap_or(t)
        .trim_end_matches('/');
    let ok = (t.starts_with("http://") || t.starts_with("https://"))
        && !t.ends_with("//")
        && t.len() > 8;
    if !ok {
        return Err(Error::Config(format!(
            "compute endpoint {given:?} is not an http(s) URL like https://compute.googleapis.com/compute/v1/"
        )));
    }
    Ok(t.to_string())
}

/// The provider's Google credentials (its `Auth`, impersonation and universe), for the other Google backend
/// (`storage`), so both speak as the same principal.
pub fn google_credentials(
    settings: &Settings,
) -> Result<google_cloud_auth::credentials::Credentials> {
    auth::credentials(
        &settings.auth,
        settings.impersonate_service_account.as_deref(),
        settings.universe_domain.as_deref(),
    )
}

impl Compute {
    /// Clients for `settings`: credentials from its `Auth` (plus impersonation), endpoint override honoured.
    /// The project may be absent here and given later with [`for_project`](Self::for_project).
    pub async fn new(settings: &Settings) -> Result<Compute> {
        let endpoint = match settings
            .compute_endpoint
            .as_deref()
            .filter(|e| !e.trim().is_empty())
        {
            Some(e) => normalize_endpoint(e)?,
            None => universe_endpoint(settings.universe_domain.as_deref()),
        };
        let clients = clients::shared(settings, endpoint).await?;
        Ok(Compute {
            project: settings.project.clone().filter(|p| !p.is_empty()),
            clients,
            backoff: Backoff::default(),
            user_agent: settings.user_agent.clone(),
        })
    }

    /// The same clients for another project (a cluster may name its own).
    pub fn for_project(&self, project: impl Into<String>) -> Compute {
        Compute {
            project: Some(project.into()),
            ..self.clone()
        }
    }

    /// Replaces the retry backoff (tests shorten it).
    pub fn with_backoff(mut self, backoff: Backoff) -> Compute {
        self.backoff = backoff;
        self
    }

    /// The user agent for one request (the SDK takes it per request, not per client).
    fn user_agent(&self) -> String {
        self.user_agent.clone()
    }

    pub fn project(&self) -> Result<&str> {
        self.project.as_deref().ok_or_else(|| {
            Error::Config(
                "no project: set `project` on the provider or the cluster, or GOOGLE_PROJECT"
                    .into(),
            )
        })
    }

    /// `projects/p/zones/z/instances/i`-style relative path, for messages and references.
    fn rel(&self, tail: &str) -> String {
        format!("projects/{}/{tail}", self.project.as_deref().unwrap_or("-"))
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn endpoints_are_reduced_to_their_origin() {
        for (given, want) in [
            ("http://127.0.0.1:8787/compute/v1/", "http://127.0.0.1:8787"),
            ("http://127.0.0.1:8787/compute/v1", "http://127.0.0.1:8787"),
            ("http://127.0.0.1:8787/", "http://127.0.0.1:8787"),
            ("http://127.0.0.1:8787", "http://127.0.0.1:8787"),
            (
                "https://compute.googleapis.com/compute/v1/",
                "https://compute.googleapis.com",
            ),
            (
                "https://www.googleapis.com/compute/v1/",
                "https://www.googleapis.com",
            ),
        ] {
            assert_eq!(normalize_endpoint(given).unwrap(), want, "{given}");
        }
        assert!(normalize_endpoint("compute.googleapis.com").is_err());
        assert!(normalize_endpoint("http:///compute/v1/").is_err());
    }

    /// Off GCE, ADC falls back to the metadata server; building must not stall on it (see auth.rs).
    #[tokio::test]
    async fn building_with_application_default_credentials_does_not_stall() {
        let started = std::time::Instant::now();
        let settings = Settings {
            project: Some("p".into()),
            ..Settings::default()
        };
        // Ok or Err depends on the machine's ADC; either way it must be quick.
        let _ = Compute::new(&settings).await;
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}
