use super::*;
use crate::{AddressKind, AddressSpec, Error};

#[tokio::test]
async fn external_address_is_reserved_once_found_again_and_released() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let a = c
        .reserve_external_address(REGION, "api-ip", deadline())
        .await
        .unwrap();
    assert!(!a.ip.is_empty());
    assert_eq!(a.kind, AddressKind::External);
    assert_eq!(a.status, "RESERVED");
    assert!(a.users.is_empty());

    // A second apply finds it (409 alreadyExists is success when it matches) and returns the same IP.
    let again = c
        .reserve_external_address(REGION, "api-ip", deadline())
        .await
        .unwrap();
    assert_eq!(again.ip, a.ip);
    assert_eq!(sim.statuses("addresses.insert").await, [200, 409]);

    let got = c
        .get_address(REGION, "api-ip", deadline())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, again);

    c.delete_address(REGION, "api-ip", deadline())
        .await
        .unwrap();
    assert_eq!(
        c.get_address(REGION, "api-ip", deadline()).await.unwrap(),
        None
    );
    // Deleting what is already gone is success (404 on the DELETE).
    c.delete_address(REGION, "api-ip", deadline())
        .await
        .unwrap();
    assert_eq!(sim.statuses("addresses.delete").await, [200, 404]);
}

#[tokio::test]
async fn internal_address_is_reserved_in_the_subnetwork() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let a = c
        .reserve_internal_address(
            REGION,
            "m-1-ip",
            Some("default"),
            "a replica of test",
            deadline(),
        )
        .await
        .unwrap();
    assert!(matches!(a.kind, AddressKind::Internal { .. }), "{a:?}");
    assert!(!a.ip.is_empty());
    let again = c
        .reserve_internal_address(REGION, "m-1-ip", None, "a replica of test", deadline())
        .await
        .unwrap();
    assert_eq!(again.ip, a.ip);
    c.delete_address(REGION, "m-1-ip", deadline())
        .await
        .unwrap();
}

#[tokio::test]
async fn addresses_are_listed_by_exact_description() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    for (name, description) in [
        ("a-int", "Internal IP of a replica of ha_master_cluster a"),
        ("b-int", "Internal IP of a replica of ha_master_cluster a"),
        ("c-int", "Internal IP of a replica of ha_master_cluster ab"),
    ] {
        c.reserve_internal_address(REGION, name, None, description, deadline())
            .await
            .unwrap();
    }
    c.reserve_external_address(REGION, "a-ip", deadline())
        .await
        .unwrap();
    let mut found: Vec<String> = c
        .list_addresses_described(
            REGION,
            "Internal IP of a replica of ha_master_cluster a",
            deadline(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    found.sort();
    assert_eq!(found, ["a-int", "b-int"]);
}

#[tokio::test]
async fn an_existing_address_of_the_other_kind_is_a_conflict_naming_it() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    c.reserve_external_address(REGION, "x", deadline())
        .await
        .unwrap();
    let err = c
        .reserve_internal_address(REGION, "x", None, "a replica of test", deadline())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("regions/us-central1/addresses/x") && text.contains("EXTERNAL"),
        "{text}"
    );
}

#[tokio::test]
async fn a_specific_ip_can_be_asked_for() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let spec = AddressSpec {
        name: "fixed".into(),
        region: REGION.into(),
        kind: AddressKind::External,
        ip: Some("127.20.3.4".into()),
        description: Some("test".into()),
    };
    assert_eq!(
        c.reserve_address(&spec, deadline()).await.unwrap().ip,
        "127.20.3.4"
    );
    let other = AddressSpec {
        ip: Some("127.20.3.5".into()),
        ..spec
    };
    let err = c.reserve_address(&other, deadline()).await.unwrap_err();
    assert!(err.to_string().contains("its IP is 127.20.3.4"), "{err}");
}

#[tokio::test]
async fn an_unknown_region_is_an_api_error_naming_the_address() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let err = c
        .reserve_external_address("mars-north1", "a", deadline())
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), Some(400), "{err:?}");
    assert!(
        err.to_string()
            .contains("address projects/proj/regions/mars-north1/addresses/a"),
        "{err}"
    );
}

#[tokio::test]
async fn address_labels_are_a_compare_and_set() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    c.reserve_external_address(REGION, "cas-ip", deadline())
        .await
        .unwrap();
    let read = c
        .get_address(REGION, "cas-ip", deadline())
        .await
        .unwrap()
        .unwrap();
    assert!(read.labels.is_empty());
    let first: std::collections::BTreeMap<String, String> =
        [("ha-lock-token".to_string(), "a".to_string())].into();
    let second: std::collections::BTreeMap<String, String> =
        [("ha-lock-token".to_string(), "b".to_string())].into();
    assert!(
        c.set_address_labels(
            REGION,
            "cas-ip",
            &first,
            &read.label_fingerprint,
            deadline()
        )
        .await
        .unwrap()
    );
    // A writer that read before the first write loses: the fingerprint it carries is stale.
    assert!(
        !c.set_address_labels(
            REGION,
            "cas-ip",
            &second,
            &read.label_fingerprint,
            deadline()
        )
        .await
        .unwrap()
    );
    let now = c
        .get_address(REGION, "cas-ip", deadline())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.labels, first);
    assert_ne!(now.label_fingerprint, read.label_fingerprint);
}
