//! The contract: one scenario calls every API method the sim serves and every successful response is parsed
//! with the official `google-cloud-compute-v1` model type for its `kind` (see `common::contract_check`).
//! The request log then proves no method was skipped.

mod common;
use common::*;
use serde_json::json;
use std::collections::BTreeSet;

#[tokio::test]
async fn every_api_method_answers_in_shapes_the_official_sdk_parses() {
    let sim = start().await;
    let (z, r) = ("europe-west1-c", "europe-west1");
    // Reads of the catalog.
    sim.get("zones").await;
    sim.get(&format!("zones/{z}")).await;
    sim.get("regions").await;
    sim.get(&format!("regions/{r}")).await;
    sim.get(&format!("zones/{z}/machineTypes")).await;
    sim.get(&format!("zones/{z}/machineTypes/e2-standard-2"))
        .await;
    sim.get("aggregated/machineTypes").await;
    // Public images live in their publishers' projects.
    let ubuntu = format!(
        "{}compute/v1/projects/ubuntu-os-cloud/global/images",
        sim.endpoint
    );
    sim.get(&ubuntu).await;
    sim.get(&format!("{ubuntu}/family/ubuntu-2404-lts-amd64"))
        .await;
    sim.get(&format!("{ubuntu}/ubuntu-2404-noble-amd64-v20261118"))
        .await;
    sim.get(&format!(
        "{}compute/v1/projects/debian-cloud/zones/-/imageFamilyViews/debian-12",
        sim.endpoint
    ))
    .await;
    // The project, for its default service account.
    let project = sim.get("").await.body;
    assert!(
        project["defaultServiceAccount"]
            .as_str()
            .is_some_and(|e| e.ends_with("-compute@developer.gserviceaccount.com")),
        "{project}"
    );
    // Addresses and instances, with access configs (static and ephemeral), metadata and labels.
    sim.ok(
        "POST",
        &format!("regions/{r}/addresses"),
        Some(json!({"name": "ip", "description": "static"})),
    )
    .await;
    let reserved = sim.get(&format!("regions/{r}/addresses/ip")).await.body;
    let ip = reserved["address"].clone();
    sim.ok(
        "POST",
        &format!("regions/{r}/addresses/ip/setLabels"),
        Some(json!({"labels": {"a": "b"}, "labelFingerprint": reserved["labelFingerprint"]})),
    )
    .await;
    sim.get(&format!("regions/{r}/addresses")).await;
    // Subnetworks: one beside the region's implicit `default`, with an INTERNAL address and an instance in it.
    sim.ok(
        "POST",
        &format!("regions/{r}/subnetworks"),
        Some(
            json!({"name": "masters-b", "network": "global/networks/default",
                    "ipCidrRange": "127.11.0.0/24", "description": "masters"}),
        ),
    )
    .await;
    sim.get(&format!("regions/{r}/subnetworks/masters-b")).await;
    sim.get(&format!("regions/{r}/subnetworks/default")).await;
    sim.get(&format!("regions/{r}/subnetworks")).await;
    sim.get("aggregated/subnetworks").await;
    sim.ok(
        "POST",
        &format!("regions/{r}/addresses"),
        Some(json!({"name": "int-b", "addressType": "INTERNAL",
                    "subnetwork": format!("regions/{r}/subnetworks/masters-b")})),
    )
    .await;
    sim.get(&format!("regions/{r}/addresses/int-b")).await;
    let mut body = instance_body("m1", z);
    body["networkInterfaces"][0]["accessConfigs"] =
        json!([{"natIP": ip, "networkTier": "PREMIUM"}]);
    body["scheduling"] = json!({"automaticRestart": true, "onHostMaintenance": "MIGRATE"});
    body["serviceAccounts"] =
        json!([{"email": "default", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]);
    let m1 = instance(&sim, "m1", z, Some(body)).await;
    let mut body = instance_body("m2", z);
    body["networkInterfaces"][0]["subnetwork"] =
        json!(format!("regions/{r}/subnetworks/masters-b"));
    instance(&sim, "m2", z, Some(body)).await;
    sim.get(&format!("zones/{z}/instances")).await;
    sim.get("aggregated/instances").await;
    let base = format!("zones/{z}/instances/m1");
    sim.ok(
        "POST",
        &format!("{base}/deleteAccessConfig?networkInterface=nic0&accessConfig=External%20NAT"),
        None,
    )
    .await;
    sim.ok(
        "POST",
        &format!("{base}/addAccessConfig?networkInterface=nic0"),
        Some(json!({"natIP": ip})),
    )
    .await;
    let md = json!({"fingerprint": m1["metadata"]["fingerprint"], "items": [{"key": "k", "value": "v"}]});
    sim.ok("POST", &format!("{base}/setMetadata"), Some(md))
        .await;
    sim.ok(
        "POST",
        &format!("{base}/setLabels"),
        Some(json!({"labels": {"a": "b"}, "labelFingerprint": m1["labelFingerprint"]})),
    )
    .await;
    sim.ok(
        "POST",
        &format!("{base}/setTags"),
        Some(json!({"items": ["a-master"], "fingerprint": m1["tags"]["fingerprint"]})),
    )
    .await;
    // Disks: a data disk attached, detached and attached again; a machine type changed while stopped.
    let pd = disk(&sim, "pd", z).await;
    sim.get(&format!("zones/{z}/disks")).await;
    sim.get("aggregated/disks").await;
    sim.get("aggregated/addresses").await;
    sim.get("aggregated/forwardingRules").await;
    sim.ok(
        "POST",
        &format!("{base}/attachDisk"),
        Some(json!({"source": pd["selfLink"], "deviceName": "master-pd"})),
    )
    .await;
    sim.ok(
        "POST",
        &format!("{base}/detachDisk?deviceName=master-pd"),
        None,
    )
    .await;
    sim.ok(
        "POST",
        &format!("{base}/attachDisk"),
        Some(json!({"source": format!("zones/{z}/disks/pd"), "deviceName": "master-pd"})),
    )
    .await;
    sim.get(&format!("zones/{z}/disks/pd")).await;
    sim.ok(
        "POST",
        &format!("zones/{z}/disks/pd/resize"),
        Some(json!({"sizeGb": "200"})),
    )
    .await;
    sim.ok("POST", &format!("{base}/stop"), None).await;
    sim.ok(
        "POST",
        &format!("{base}/setMachineType"),
        Some(json!({"machineType": format!("zones/{z}/machineTypes/e2-standard-4")})),
    )
    .await;
    sim.ok("POST", &format!("{base}/start"), None).await;
    // Firewalls.
    let fw = json!({"name": "fw", "allowed": [{"IPProtocol": "tcp", "ports": ["443", "2379-2380"]}], "sourceRanges": ["0.0.0.0/0"], "targetTags": ["master"]});
    sim.ok("POST", "global/firewalls", Some(fw)).await;
    sim.ok(
        "PATCH",
        "global/firewalls/fw",
        Some(json!({"priority": 500})),
    )
    .await;
    sim.get("global/firewalls/fw").await;
    sim.get("global/firewalls").await;
    // Health check, pool, rule.
    sim.ok(
        "POST",
        "global/httpHealthChecks",
        Some(json!({"name": "hc", "port": 8080, "requestPath": "/healthz"})),
    )
    .await;
    sim.get("global/httpHealthChecks/hc").await;
    sim.get("global/httpHealthChecks").await;
    let pool = json!({"name": "pool", "healthChecks": ["global/httpHealthChecks/hc"], "instances": [m1["selfLink"]]});
    sim.ok("POST", &format!("regions/{r}/targetPools"), Some(pool))
        .await;
    let p = format!("regions/{r}/targetPools/pool");
    let m2 = json!({"instances": [{"instance": format!("zones/{z}/instances/m2")}]});
    sim.ok("POST", &format!("{p}/addInstance"), Some(m2.clone()))
        .await;
    sim.ok("POST", &format!("{p}/removeInstance"), Some(m2))
        .await;
    sim.get(&p).await;
    sim.get(&format!("regions/{r}/targetPools")).await;
    sim.ok(
        "POST",
        &format!("regions/{r}/addresses"),
        Some(json!({"name": "lb"})),
    )
    .await;
    let lb = sim.get(&format!("regions/{r}/addresses/lb")).await.body["address"].clone();
    let rule = json!({"name": "fr", "IPAddress": lb, "IPProtocol": "TCP", "portRange": "443", "target": p});
    sim.ok("POST", &format!("regions/{r}/forwardingRules"), Some(rule))
        .await;
    sim.post(
        &format!("{p}/getHealth"),
        json!({"instance": m1["selfLink"]}),
    )
    .await;
    sim.get(&format!("regions/{r}/forwardingRules/fr")).await;
    sim.get(&format!("regions/{r}/forwardingRules")).await;
    // Operations in every scope: list, wait, delete; and all scopes at once.
    sim.get("aggregated/operations").await;
    for scope in [
        format!("zones/{z}"),
        format!("regions/{r}"),
        "global".to_string(),
    ] {
        let list = sim.get(&format!("{scope}/operations")).await;
        let name = list.body["items"][0]["name"]
            .as_str()
            .expect("an operation")
            .to_string();
        sim.post(&format!("{scope}/operations/{name}/wait"), json!({}))
            .await;
        sim.delete(&format!("{scope}/operations/{name}")).await;
    }
    // Teardown.
    for path in [
        format!("regions/{r}/forwardingRules/fr"),
        p.clone(),
        "global/httpHealthChecks/hc".into(),
        "global/firewalls/fw".into(),
        format!("zones/{z}/instances/m1"),
        format!("zones/{z}/instances/m2"),
        format!("regions/{r}/addresses/ip"),
        format!("regions/{r}/addresses/int-b"),
        format!("regions/{r}/subnetworks/masters-b"),
        format!("zones/{z}/disks/pd"),
    ] {
        sim.ok("DELETE", &path, None).await;
    }

    let log = sim.admin("GET", "requests", None).await;
    let ok: BTreeSet<String> = log["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| {
            e["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s))
        })
        .map(|e| e["api"].as_str().unwrap_or_default().to_string())
        .collect();
    let missing: Vec<&str> = ha_sim::api::route_apis()
        .into_iter()
        .filter(|a| !ok.contains(&format!("compute.{a}")))
        .collect();
    assert!(
        missing.is_empty(),
        "API methods never answered successfully in the contract scenario: {missing:?}"
    );
    assert!(sim.checked.load(std::sync::atomic::Ordering::SeqCst) > 60);
}
