//! addresses and access configs: RESERVED/IN_USE and users follow who holds the IP; natIP rules.

mod common;
use common::*;
use serde_json::json;

const Z: &str = "europe-west1-b";
const R: &str = "europe-west1";

async fn address(sim: &Sim, name: &str) -> serde_json::Value {
    sim.ok(
        "POST",
        &format!("regions/{R}/addresses"),
        Some(json!({"name": name})),
    )
    .await;
    sim.get(&format!("regions/{R}/addresses/{name}")).await.body
}

#[tokio::test]
async fn an_address_is_reserving_then_reserved() {
    let sim = start_with(|c| c.latency.default = std::time::Duration::from_millis(200)).await;
    let op = sim
        .post(&format!("regions/{R}/addresses"), json!({"name": "ip1"}))
        .await;
    assert!(
        op.body["region"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/regions/{R}"))
    );
    assert!(op.body.get("zone").is_none());
    assert_eq!(
        sim.get(&format!("regions/{R}/addresses/ip1")).await.body["status"],
        "RESERVING"
    );
    sim.done(&op).await;
    let a = sim.get(&format!("regions/{R}/addresses/ip1")).await.body;
    assert_eq!(a["status"], "RESERVED");
    assert_eq!(a["addressType"], "EXTERNAL");
    assert_eq!(a["networkTier"], "PREMIUM");
    assert!(a["address"].as_str().unwrap().starts_with("127.20."));
    assert!(a.get("users").is_none() || a["users"] == json!([]));
    let l = sim.get(&format!("regions/{R}/addresses")).await;
    assert_eq!(l.body["items"][0]["name"], "ip1");
    sim.post(&format!("regions/{R}/addresses"), json!({"name": "ip1"}))
        .await
        .expect(409, "alreadyExists");
    sim.get(&format!("regions/{R}/addresses/nope"))
        .await
        .expect(404, "notFound");
    sim.get("regions/atlantis1/addresses")
        .await
        .expect(400, "invalid");
}

#[tokio::test]
async fn users_and_in_use_follow_access_configs() {
    let sim = start().await;
    let a = address(&sim, "ip1").await;
    let ip = a["address"].as_str().unwrap().to_string();
    let mut body = instance_body("m1", Z);
    body["networkInterfaces"][0]["accessConfigs"] = json!([{"natIP": ip, "name": "External NAT"}]);
    let i = instance(&sim, "m1", Z, Some(body)).await;
    assert_eq!(
        i["networkInterfaces"][0]["accessConfigs"][0]["natIP"],
        ip.as_str()
    );
    assert_eq!(
        i["networkInterfaces"][0]["accessConfigs"][0]["type"],
        "ONE_TO_ONE_NAT"
    );
    let a = sim.get(&format!("regions/{R}/addresses/ip1")).await.body;
    assert_eq!(a["status"], "IN_USE");
    assert_eq!(a["users"], json!([i["selfLink"]]));
    // An address in use cannot be deleted.
    let r = sim.delete(&format!("regions/{R}/addresses/ip1")).await;
    r.expect(400, "resourceInUseByAnotherResource");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is already being used by")
    );
    // Removing the access config frees it.
    let path = format!(
        "zones/{Z}/instances/m1/deleteAccessConfig?networkInterface=nic0&accessConfig=External%20NAT"
    );
    sim.ok("POST", &path, None).await;
    let a = sim.get(&format!("regions/{R}/addresses/ip1")).await.body;
    assert_eq!(a["status"], "RESERVED");
    sim.ok("DELETE", &format!("regions/{R}/addresses/ip1"), None)
        .await;
    sim.get(&format!("regions/{R}/addresses/ip1"))
        .await
        .expect(404, "notFound");
}

#[tokio::test]
async fn deleting_the_instance_releases_its_static_ip() {
    let sim = start().await;
    let ip = address(&sim, "ip1").await["address"]
        .as_str()
        .unwrap()
        .to_string();
    instance(&sim, "m1", Z, None).await;
    sim.ok(
        "POST",
        &format!("zones/{Z}/instances/m1/addAccessConfig?networkInterface=nic0"),
        Some(json!({"natIP": ip})),
    )
    .await;
    assert_eq!(
        sim.get(&format!("regions/{R}/addresses/ip1")).await.body["status"],
        "IN_USE"
    );
    sim.ok("DELETE", &format!("zones/{Z}/instances/m1"), None)
        .await;
    let a = sim.get(&format!("regions/{R}/addresses/ip1")).await.body;
    assert_eq!(a["status"], "RESERVED");
}

#[tokio::test]
async fn access_config_rules_match_gce() {
    let sim = start().await;
    let ip = address(&sim, "ip1").await["address"]
        .as_str()
        .unwrap()
        .to_string();
    instance(&sim, "m1", Z, None).await;
    instance(&sim, "m2", Z, None).await;
    let add = |vm: &str| format!("zones/{Z}/instances/{vm}/addAccessConfig?networkInterface=nic0");
    // Unknown natIP in the region.
    let r = sim.post(&add("m1"), json!({"natIP": "127.20.99.99"})).await;
    r.expect(400, "invalid");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("was not found in region '{R}'"))
    );
    // The address from another region's point of view does not exist.
    let other = instance(&sim, "m3", "us-central1-a", None).await;
    assert_eq!(other["status"], "RUNNING");
    sim.post(
        "zones/us-central1-a/instances/m3/addAccessConfig?networkInterface=nic0",
        json!({"natIP": ip}),
    )
    .await
    .expect(400, "invalid");
    // Missing or unknown interface.
    sim.post(
        &format!("zones/{Z}/instances/m1/addAccessConfig"),
        json!({}),
    )
    .await
    .expect(400, "required");
    sim.post(
        &format!("zones/{Z}/instances/m1/addAccessConfig?networkInterface=nic3"),
        json!({}),
    )
    .await
    .expect(400, "invalid");
    // m1 takes the static IP; m2 cannot take it too.
    sim.ok("POST", &add("m1"), Some(json!({"natIP": ip}))).await;
    sim.post(&add("m2"), json!({"natIP": ip}))
        .await
        .expect(400, "resourceInUseByAnotherResource");
    // A second access config on the same interface.
    sim.post(&add("m1"), json!({}))
        .await
        .expect(400, "badRequest");
    // Ephemeral: no natIP → a fresh external IP, not the static one.
    sim.ok("POST", &add("m2"), Some(json!({}))).await;
    let m2 = sim.get(&format!("zones/{Z}/instances/m2")).await.body;
    let eph = m2["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
        .as_str()
        .unwrap();
    assert!(eph.starts_with("127.20.") && eph != ip);
    assert_eq!(
        m2["networkInterfaces"][0]["accessConfigs"][0]["name"],
        "External NAT"
    );
    // Deleting an access config that does not exist.
    let del = format!(
        "zones/{Z}/instances/m1/deleteAccessConfig?networkInterface=nic0&accessConfig=nope"
    );
    sim.post(&del, json!({})).await.expect(400, "invalid");
    sim.post(
        &format!("zones/{Z}/instances/m1/deleteAccessConfig?networkInterface=nic0"),
        json!({}),
    )
    .await
    .expect(400, "required");
}

#[tokio::test]
async fn reserving_an_ephemeral_ip_promotes_it() {
    let sim = start().await;
    let mut body = instance_body("m1", Z);
    body["networkInterfaces"][0]["accessConfigs"] = json!([{}]);
    let i = instance(&sim, "m1", Z, Some(body)).await;
    let eph = i["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
        .as_str()
        .unwrap()
        .to_string();
    sim.ok(
        "POST",
        &format!("regions/{R}/addresses"),
        Some(json!({"name": "kept", "address": eph})),
    )
    .await;
    let a = sim.get(&format!("regions/{R}/addresses/kept")).await.body;
    assert_eq!(a["address"], eph.as_str());
    assert_eq!(a["status"], "IN_USE");
    // But an IP that is already an address cannot be reserved twice, and internal IPs are not external.
    sim.post(
        &format!("regions/{R}/addresses"),
        json!({"name": "again", "address": eph}),
    )
    .await
    .expect(400, "invalid");
    let internal = i["networkInterfaces"][0]["networkIP"].as_str().unwrap();
    sim.post(
        &format!("regions/{R}/addresses"),
        json!({"name": "int", "address": internal}),
    )
    .await
    .expect(400, "invalid");
}

/// A reserved INTERNAL address is a static internal IP: an instance may take it as its networkIP (the provider
/// reserves a replica's IP before the VM exists), which makes the address IN_USE by that instance; a second
/// instance may not take it, and the address cannot go while it is used.
#[tokio::test]
async fn a_reserved_internal_address_can_be_an_instances_network_ip() {
    let sim = start().await;
    sim.ok(
        "POST",
        &format!("regions/{R}/addresses"),
        Some(json!({"name": "m1-ip", "addressType": "INTERNAL"})),
    )
    .await;
    let a = sim.get(&format!("regions/{R}/addresses/m1-ip")).await.body;
    let ip = a["address"].as_str().unwrap().to_string();
    assert_eq!(a["status"], "RESERVED");
    let mut body = instance_body("m1", Z);
    body["networkInterfaces"][0]["networkIP"] = json!(ip);
    let i = instance(&sim, "m1", Z, Some(body)).await;
    assert_eq!(i["networkInterfaces"][0]["networkIP"], ip.as_str());
    let a = sim.get(&format!("regions/{R}/addresses/m1-ip")).await.body;
    assert_eq!(a["status"], "IN_USE");
    assert_eq!(a["users"], json!([i["selfLink"]]));

    let mut second = instance_body("m2", Z);
    second["networkInterfaces"][0]["networkIP"] = json!(ip);
    sim.post(&format!("zones/{Z}/instances"), second)
        .await
        .expect(400, "invalid");
    sim.delete(&format!("regions/{R}/addresses/m1-ip"))
        .await
        .expect(400, "resourceInUseByAnotherResource");
}

#[tokio::test]
async fn address_set_labels_needs_the_current_fingerprint_and_rotates_it() {
    let sim = start().await;
    let a = address(&sim, "ip1").await;
    let path = format!("regions/{R}/addresses/ip1/setLabels");
    let fp = a["labelFingerprint"].clone();
    sim.post(
        &path,
        json!({"labels": {"a": "b"}, "labelFingerprint": "AAAAAAAAAAA="}),
    )
    .await
    .expect(412, "conditionNotMet");
    sim.post(
        &path,
        json!({"labels": {"Bad": "b"}, "labelFingerprint": fp}),
    )
    .await
    .expect(400, "invalid");
    sim.ok(
        "POST",
        &path,
        Some(json!({"labels": {"a": "b"}, "labelFingerprint": fp})),
    )
    .await;
    let after = sim.get(&format!("regions/{R}/addresses/ip1")).await.body;
    assert_eq!(after["labels"], json!({"a": "b"}));
    assert_ne!(after["labelFingerprint"], fp);
    // The fingerprint read before the write is stale now: a compare-and-set that lost.
    sim.post(&path, json!({"labels": {}, "labelFingerprint": fp}))
        .await
        .expect(412, "conditionNotMet");
}
