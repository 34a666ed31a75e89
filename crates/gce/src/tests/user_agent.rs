//! Every request says who sent it: Cloud Audit Logs and quota pages then name the provider and the Terraform
//! that ran it, as they do for Google's provider. The sim records each request's `User-Agent` in its log.

use super::*;

#[tokio::test]
async fn every_request_carries_the_provider_and_terraform_versions() {
    let sim = Sim::start().await;
    let ua = ha_settings::user_agent("1.10.5");
    let settings = Settings {
        user_agent: ua.clone(),
        ..sim.settings()
    };
    let c = Compute::new(&settings).await.unwrap();
    // A mutation (with its operation wait), reads and a delete: every kind of call the backend makes.
    c.reserve_external_address(REGION, "api", deadline())
        .await
        .unwrap();
    c.get_zone(ZONE, deadline()).await.unwrap();
    c.delete_address(REGION, "api", deadline()).await.unwrap();

    let log = sim.admin("GET", "/_sim/requests", None).await;
    let entries = log["entries"].as_array().expect("entries");
    assert!(entries.len() >= 4, "{log}");
    for e in entries {
        assert_eq!(e["userAgent"].as_str(), Some(ua.as_str()), "{e}");
    }
}

#[test]
fn without_an_endpoint_the_compute_api_follows_the_universe() {
    assert_eq!(
        super::super::universe_endpoint(None),
        "https://compute.googleapis.com"
    );
    assert_eq!(
        super::super::universe_endpoint(Some("s3nsapis.fr")),
        "https://compute.s3nsapis.fr"
    );
}
