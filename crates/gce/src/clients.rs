//! The SDK's clients for Compute Engine, built once per endpoint and identity for the life of the process
//! (`ha_settings::client_cache` says why: thirteen clients per cluster context read the root certificates from
//! disk thirteen times).

use google_cloud_compute_v1::client;
use google_cloud_gax::retry_policy::NeverRetry;
use ha_settings::Settings;
use ha_settings::client_cache::{ClientCache, ClientKey};

use super::error::{Error, Result};

/// The SDK clients, one per API service; they share one set of credentials.
#[derive(Clone, Debug)]
pub(crate) struct Clients {
    pub(crate) instances: client::Instances,
    pub(crate) disks: client::Disks,
    pub(crate) addresses: client::Addresses,
    pub(crate) firewalls: client::Firewalls,
    pub(crate) forwarding_rules: client::ForwardingRules,
    pub(crate) target_pools: client::TargetPools,
    pub(crate) http_health_checks: client::HttpHealthChecks,
    pub(crate) zones: client::Zones,
    pub(crate) machine_types: client::MachineTypes,
    pub(crate) images: client::Images,
    pub(crate) projects: client::Projects,
    pub(crate) regions: client::Regions,
    pub(crate) zone_operations: client::ZoneOperations,
    pub(crate) region_operations: client::RegionOperations,
    pub(crate) global_operations: client::GlobalOperations,
}

/// Clients already built in this process (`ha_settings::client_cache` says why).
static BUILT: ClientCache<Clients> = ClientCache::new();

/// The endpoint of every set of clients this process built, in order (tests count them).
#[cfg(test)]
static BUILDS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The clients for `settings` at `endpoint`: the ones this process built before for the same endpoint and
/// identity, or new ones. Only a build that succeeded is kept, so a failure is tried again next time.
pub(crate) async fn shared(settings: &Settings, endpoint: String) -> Result<Clients> {
    let key = ClientKey::new(settings, &endpoint);
    if let Some(clients) = BUILT.get(&key) {
        return Ok(clients);
    }
    let clients = build(settings, &endpoint).await?;
    Ok(BUILT.keep(key, clients))
}

/// How many sets of clients this process has built for `endpoint`.
#[cfg(test)]
fn builds(endpoint: &str) -> usize {
    let endpoint = super::normalize_endpoint(endpoint).expect("an endpoint");
    let built = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    built.iter().filter(|e| **e == endpoint).count()
}

async fn build(settings: &Settings, endpoint: &str) -> Result<Clients> {
    #[cfg(test)]
    BUILDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(endpoint.to_string());
    let creds = super::google_credentials(settings)?;
    macro_rules! build {
        ($t:ident) => {
            client::$t::builder()
                .with_endpoint(endpoint.to_string())
                .with_credentials(creds.clone())
                // Our own loop retries (see call.rs); the SDK's would retry underneath it.
                .with_retry_policy(NeverRetry)
                .build()
                .await
                .map_err(|e| {
                    Error::Config(format!("building the {} client: {e}", stringify!($t)))
                })?
        };
    }
    Ok(Clients {
        instances: build!(Instances),
        disks: build!(Disks),
        addresses: build!(Addresses),
        firewalls: build!(Firewalls),
        forwarding_rules: build!(ForwardingRules),
        target_pools: build!(TargetPools),
        http_health_checks: build!(HttpHealthChecks),
        zones: build!(Zones),
        machine_types: build!(MachineTypes),
        images: build!(Images),
        projects: build!(Projects),
        regions: build!(Regions),
        zone_operations: build!(ZoneOperations),
        region_operations: build!(RegionOperations),
        global_operations: build!(GlobalOperations),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(endpoint: &str, token: &str) -> Settings {
        Settings {
            project: Some("p".into()),
            auth: ha_settings::Auth::AccessToken(token.into()),
            compute_endpoint: Some(endpoint.into()),
            ..Settings::default()
        }
    }

    /// The same endpoint and identity share one build; another endpoint or another token gets its own. The
    /// endpoints are this test's own (nothing listens there: building does not connect).
    #[tokio::test]
    async fn clients_are_built_once_per_endpoint_and_identity() {
        let (one, two) = (
            "http://127.0.0.1:1/compute/v1/",
            "http://127.0.0.1:2/compute/v1/",
        );
        let a = settings(one, "one");
        crate::Compute::new(&a).await.unwrap();
        crate::Compute::new(&a).await.unwrap();
        crate::Compute::new(&a).await.unwrap().for_project("q");
        assert_eq!(builds(one), 1, "three handles, one build");
        crate::Compute::new(&settings(two, "one")).await.unwrap();
        assert_eq!(builds(two), 1, "another endpoint");
        crate::Compute::new(&settings(one, "two")).await.unwrap();
        assert_eq!(builds(one), 2, "another identity");
    }
}
