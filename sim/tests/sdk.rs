//! The official Rust SDK (`google-cloud-compute-v1`) as a client: its builders, LRO poller, operation errors
//! and HTTP error mapping all work against the sim, as the provider will use them.

mod common;
use common::*;
use google_cloud_compute_v1::client;
use google_cloud_compute_v1::model::{self, instance};
use google_cloud_lro::Poller;
use std::time::Duration;

const Z: &str = "us-central1-f";

/// Sends a fixed bearer token: the sim rejects anonymous calls, as Google does.
#[derive(Debug)]
struct Bearer;

impl google_cloud_auth::credentials::CredentialsProvider for Bearer {
    async fn headers(
        &self,
        _: http::Extensions,
    ) -> Result<
        google_cloud_auth::credentials::CacheableResource<http::HeaderMap>,
        google_cloud_auth::errors::CredentialsError,
    > {
        let mut data = http::HeaderMap::new();
        data.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer sdk-test"),
        );
        Ok(google_cloud_auth::credentials::CacheableResource::New {
            entity_tag: google_cloud_auth::credentials::EntityTag::new(),
            data,
        })
    }

    async fn universe_domain(&self) -> Option<String> {
        None
    }
}

fn fast_polling() -> google_cloud_gax::exponential_backoff::ExponentialBackoff {
    google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder::new()
        .with_initial_delay(Duration::from_millis(10))
        .with_maximum_delay(Duration::from_millis(50))
        .build()
        .expect("backoff")
}

#[tokio::test]
async fn the_official_client_inserts_polls_reads_and_maps_errors() {
    let sim = start().await;
    let endpoint = sim.endpoint.trim_end_matches('/').to_string();
    let instances = client::Instances::builder()
        .with_endpoint(&endpoint)
        .with_credentials(Bearer)
        .with_polling_backoff_policy(fast_polling())
        .build()
        .await
        .expect("client");
    let body = model::Instance::new()
        .set_name("sdk")
        .set_machine_type(format!("zones/{Z}/machineTypes/e2-standard-2"))
        .set_network_interfaces([
            model::NetworkInterface::new().set_access_configs([model::AccessConfig::new()])
        ]);
    let op = instances
        .insert()
        .set_project(PROJECT)
        .set_zone(Z)
        .set_body(body)
        .poller()
        .until_done()
        .await
        .expect("insert");
    assert_eq!(op.status, Some(model::operation::Status::Done));
    op.to_result().expect("no operation error");

    let got = instances
        .get()
        .set_project(PROJECT)
        .set_zone(Z)
        .set_instance("sdk")
        .send()
        .await
        .expect("get");
    assert_eq!(got.status, Some(instance::Status::Running));
    let nic = &got.network_interfaces[0];
    assert!(
        nic.network_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("127.10."))
    );
    assert!(
        nic.access_configs[0]
            .nat_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("127.20."))
    );

    // setMetadata with the fingerprint the SDK decoded (bytes) and re-encoded.
    let metadata = got
        .metadata
        .clone()
        .expect("metadata")
        .set_items([model::metadata::Items::new().set_key("k").set_value("v")]);
    let op = instances
        .set_metadata()
        .set_project(PROJECT)
        .set_zone(Z)
        .set_instance("sdk")
        .set_body(metadata.clone())
        .poller()
        .until_done()
        .await
        .expect("setMetadata");
    op.to_result().expect("setMetadata succeeds");
    // The same (now stale) fingerprint again: HTTP 412, reason conditionNotMet.
    let stale = instances
        .set_metadata()
        .set_project(PROJECT)
        .set_zone(Z)
        .set_instance("sdk")
        .set_body(metadata)
        .send()
        .await;
    assert_eq!(
        stale.expect_err("stale fingerprint").http_status_code(),
        Some(412)
    );

    let missing = instances
        .get()
        .set_project(PROJECT)
        .set_zone(Z)
        .set_instance("nope")
        .send()
        .await;
    assert_eq!(missing.expect_err("404").http_status_code(), Some(404));

    let list = instances
        .aggregated_list()
        .set_project(PROJECT)
        .send()
        .await
        .expect("aggregatedList");
    assert!(list.items.contains_key(&format!("zones/{Z}")));
}

#[tokio::test]
async fn operation_errors_surface_through_to_result() {
    let sim = start().await;
    sim.admin(
        "POST",
        "faults",
        Some(
            serde_json::json!({"when": {"on": "operation", "kind": "addresses.insert"},
                                "then": {"effect": "fail", "code": "QUOTA_EXCEEDED"}, "times": 1}),
        ),
    )
    .await;
    let addresses = client::Addresses::builder()
        .with_endpoint(sim.endpoint.trim_end_matches('/'))
        .with_credentials(Bearer)
        .with_polling_backoff_policy(fast_polling())
        .build()
        .await
        .expect("client");
    let op = addresses
        .insert()
        .set_project(PROJECT)
        .set_region("us-central1")
        .set_body(model::Address::new().set_name("ip"))
        .poller()
        .until_done()
        .await
        .expect("the poller returns the failed operation");
    let err = op.to_result().expect_err("QUOTA_EXCEEDED");
    assert!(err.to_string().contains("Quota 'CPUS' exceeded"), "{err}");

    // The wait method of the operations clients (a POST the SDK can call directly).
    let op = addresses
        .insert()
        .set_project(PROJECT)
        .set_region("us-central1")
        .set_body(model::Address::new().set_name("ip2"))
        .send()
        .await
        .expect("insert");
    let ops = client::RegionOperations::builder()
        .with_endpoint(sim.endpoint.trim_end_matches('/'))
        .with_credentials(Bearer)
        .build()
        .await
        .expect("client");
    let waited = ops
        .wait()
        .set_project(PROJECT)
        .set_region("us-central1")
        .set_operation(op.name.clone().expect("name"))
        .send()
        .await
        .expect("wait");
    assert_eq!(waited.status, Some(model::operation::Status::Done));
}
