//! instances: lifecycle, reads, errors, metadata/labels fingerprints, start/stop.

mod common;
use common::*;
use serde_json::json;

const Z: &str = "us-central1-a";

#[tokio::test]
async fn insert_is_asynchronous_and_walks_provisioning_staging_running() {
    let sim = start_with(|c| c.latency.default = std::time::Duration::from_millis(300)).await;
    let op = sim
        .post(&format!("zones/{Z}/instances"), instance_body("m1", Z))
        .await;
    assert_eq!(op.status, 200);
    assert_eq!(op.body["status"], "PENDING");
    assert_eq!(op.body["operationType"], "insert");
    assert_eq!(op.body["progress"], 0);
    assert!(
        op.body["targetLink"]
            .as_str()
            .unwrap()
            .ends_with(&format!("projects/{PROJECT}/zones/{Z}/instances/m1"))
    );
    assert!(
        op.body["zone"].as_str().unwrap().starts_with(&sim.url),
        "links use the sim's own base URL"
    );
    assert!(op.body.get("region").is_none());
    let first = sim.get(&format!("zones/{Z}/instances/m1")).await;
    assert_eq!(first.body["status"], "PROVISIONING");
    let mut seen = vec!["PROVISIONING".to_string()];
    for _ in 0..200 {
        let s = sim.get(&format!("zones/{Z}/instances/m1")).await.body["status"]
            .as_str()
            .unwrap()
            .to_string();
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if s == "RUNNING" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(seen, ["PROVISIONING", "STAGING", "RUNNING"]);
    let done = sim.done(&op).await;
    assert_eq!(done["progress"], 100);
    assert!(done["startTime"].is_string() && done["endTime"].is_string());
}

#[tokio::test]
async fn an_instance_reads_back_as_gce_shows_it() {
    let sim = start().await;
    let i = instance(&sim, "m1", Z, None).await;
    assert_eq!(i["kind"], "compute#instance");
    assert_eq!(i["status"], "RUNNING");
    assert!(i["id"].is_string(), "uint64 ids are strings on the wire");
    assert_eq!(
        i["machineType"],
        format!(
            "{}compute/v1/projects/{PROJECT}/zones/{Z}/machineTypes/e2-standard-2",
            sim.url
        )
    );
    let nic = &i["networkInterfaces"][0];
    assert_eq!(nic["name"], "nic0");
    assert!(nic["networkIP"].as_str().unwrap().starts_with("127.10."));
    assert_eq!(
        nic["network"],
        format!(
            "{}compute/v1/projects/{PROJECT}/global/networks/default",
            sim.url
        )
    );
    assert_eq!(
        nic["subnetwork"],
        format!(
            "{}compute/v1/projects/{PROJECT}/regions/us-central1/subnetworks/default",
            sim.url
        )
    );
    assert_eq!(i["disks"][0]["boot"], true);
    assert_eq!(i["disks"][0]["diskSizeGb"], "20");
    assert!(i["disks"][0].get("initializeParams").is_none());
    assert_eq!(i["metadata"]["items"][0]["key"], "startup-script");
    assert_eq!(i["labels"]["role"], "master");
    assert_eq!(i["tags"]["items"][0], "master");
    for fp in [
        &i["metadata"]["fingerprint"],
        &i["labelFingerprint"],
        &nic["fingerprint"],
    ] {
        let fp = fp.as_str().unwrap();
        assert!(
            fp.ends_with('=') && !fp.contains('+') && !fp.contains('/'),
            "{fp}"
        );
    }
    // Internal IPs are distinct.
    let j = instance(&sim, "m2", Z, None).await;
    assert_ne!(j["networkInterfaces"][0]["networkIP"], nic["networkIP"]);
}

#[tokio::test]
async fn list_and_aggregated_list_cover_zones() {
    let sim = start().await;
    instance(&sim, "a", Z, None).await;
    instance(&sim, "b", "europe-west1-b", None).await;
    let l = sim.get(&format!("zones/{Z}/instances")).await;
    assert_eq!(l.body["kind"], "compute#instanceList");
    assert_eq!(l.body["items"].as_array().unwrap().len(), 1);
    let empty = sim.get("zones/us-central1-b/instances").await;
    assert!(
        empty.body.get("items").is_none(),
        "GCE omits items for an empty list"
    );
    let filtered = sim
        .get(&format!(
            "zones/{Z}/instances?filter=name%20%3D%20%22zzz%22"
        ))
        .await;
    assert!(filtered.body.get("items").is_none());
    // The provider's label filter: `(labels.k = "v") AND ...`.
    let by_label = sim
        .get(&format!("zones/{Z}/instances?filter=%28labels.role%20%3D%20%22master%22%29%20AND%20%28name%20%3D%20%22a%22%29"))
        .await;
    assert_eq!(by_label.body["items"].as_array().map(Vec::len), Some(1));
    let other = sim
        .get(&format!(
            "zones/{Z}/instances?filter=labels.role%20%3D%20worker"
        ))
        .await;
    assert!(other.body.get("items").is_none());
    sim.get(&format!(
        "zones/{Z}/instances?filter=%28name%20%3D%20a%29%20OR%20%28name%20%3D%20b%29"
    ))
    .await
    .expect(400, "invalid");
    let agg = sim.get("aggregated/instances").await;
    assert_eq!(
        agg.body["items"][format!("zones/{Z}")]["instances"][0]["name"],
        "a"
    );
    assert_eq!(
        agg.body["items"]["zones/europe-west1-b"]["instances"][0]["name"],
        "b"
    );
    assert_eq!(
        agg.body["items"]["zones/us-east1-c"]["warning"]["code"],
        "NO_RESULTS_ON_PAGE"
    );
    // The aggregated list takes the same filter (the provider's label filter across a region's zones).
    let agg = sim
        .get("aggregated/instances?filter=%28labels.role%20%3D%20%22master%22%29%20AND%20%28name%20%3D%20%22b%22%29")
        .await;
    let found: Vec<&str> = agg.body["items"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|s| s["instances"].as_array())
        .flatten()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(found, ["b"], "{}", agg.body);
    assert_eq!(
        agg.body["items"][format!("zones/{Z}")]["warning"]["code"],
        "NO_RESULTS_ON_PAGE"
    );
}

#[tokio::test]
async fn paging_follows_next_page_token() {
    let sim = start().await;
    for n in ["p1", "p2", "p3"] {
        instance(&sim, n, Z, None).await;
    }
    let first = sim.get(&format!("zones/{Z}/instances?maxResults=2")).await;
    assert_eq!(first.body["items"].as_array().unwrap().len(), 2);
    let token = first.body["nextPageToken"].as_str().unwrap();
    let second = sim
        .get(&format!(
            "zones/{Z}/instances?maxResults=2&pageToken={token}"
        ))
        .await;
    assert_eq!(second.body["items"].as_array().unwrap().len(), 1);
    assert!(second.body.get("nextPageToken").is_none());
}

#[tokio::test]
async fn insert_errors_have_gce_shapes() {
    let sim = start().await;
    instance(&sim, "m1", Z, None).await;
    let dup = sim
        .post(&format!("zones/{Z}/instances"), instance_body("m1", Z))
        .await;
    dup.expect(409, "alreadyExists");
    assert_eq!(dup.body["error"]["code"], 409);
    assert_eq!(
        dup.body["error"]["message"],
        format!("The resource 'projects/{PROJECT}/zones/{Z}/instances/m1' already exists")
    );
    assert_eq!(dup.body["error"]["errors"][0]["domain"], "global");
    sim.post(
        &format!("zones/{Z}/instances"),
        instance_body("Bad_Name", Z),
    )
    .await
    .expect(400, "invalid");
    sim.post("zones/mars-north1-a/instances", instance_body("x", Z))
        .await
        .expect(400, "invalid");
    let mut bad_mt = instance_body("x", Z);
    bad_mt["machineType"] = json!("e2-standard-2");
    sim.post(&format!("zones/{Z}/instances"), bad_mt)
        .await
        .expect(400, "invalid");
    let mut no_nic = instance_body("x", Z);
    no_nic["networkInterfaces"] = json!([]);
    sim.post(&format!("zones/{Z}/instances"), no_nic)
        .await
        .expect(400, "required");
    let mut two_acs = instance_body("x", Z);
    two_acs["networkInterfaces"][0]["accessConfigs"] = json!([{}, {}]);
    let r = sim.post(&format!("zones/{Z}/instances"), two_acs).await;
    r.expect(400, "badRequest");
    assert_eq!(
        r.body["error"]["message"],
        "At most one access config currently supported."
    );
    sim.get(&format!("zones/{Z}/instances/nope"))
        .await
        .expect(404, "notFound");
    sim.delete(&format!("zones/{Z}/instances/nope"))
        .await
        .expect(404, "notFound");
    let r = sim
        .call("PUT", &format!("zones/{Z}/instances/m1"), Some(json!({})))
        .await;
    assert_eq!(r.status, 405);
    sim.get("zones/us-central1-a/bogus")
        .await
        .expect(404, "notFound");
}

#[tokio::test]
async fn delete_removes_the_instance_when_its_operation_is_done() {
    let sim = start_with(|c| c.latency.default = std::time::Duration::from_millis(200)).await;
    instance(&sim, "m1", Z, None).await;
    let op = sim.delete(&format!("zones/{Z}/instances/m1")).await;
    assert_eq!(op.body["operationType"], "delete");
    assert_eq!(
        sim.get(&format!("zones/{Z}/instances/m1")).await.body["status"],
        "STOPPING"
    );
    let done = sim.done(&op).await;
    assert!(done.get("error").is_none());
    sim.get(&format!("zones/{Z}/instances/m1"))
        .await
        .expect(404, "notFound");
}

#[tokio::test]
async fn deletion_protection_blocks_delete() {
    let sim = start().await;
    let mut body = instance_body("m1", Z);
    body["deletionProtection"] = json!(true);
    instance(&sim, "m1", Z, Some(body)).await;
    sim.delete(&format!("zones/{Z}/instances/m1"))
        .await
        .expect(400, "resourceInUseByAnotherResource");
}

#[tokio::test]
async fn stop_and_start_cycle_through_terminated() {
    let sim = start().await;
    instance(&sim, "m1", Z, None).await;
    let path = format!("zones/{Z}/instances/m1");
    sim.ok("POST", &format!("{path}/stop"), None).await;
    let i = sim.get(&path).await.body;
    assert_eq!(i["status"], "TERMINATED");
    assert!(i["lastStopTimestamp"].is_string());
    sim.ok("POST", &format!("{path}/stop"), None).await; // idempotent
    sim.ok("POST", &format!("{path}/start"), None).await;
    assert_eq!(sim.get(&path).await.body["status"], "RUNNING");
    sim.ok("POST", &format!("{path}/start"), None).await; // idempotent
}

#[tokio::test]
async fn set_metadata_needs_the_current_fingerprint_and_rotates_it() {
    let sim = start().await;
    let i = instance(&sim, "m1", Z, None).await;
    let path = format!("zones/{Z}/instances/m1/setMetadata");
    let fp = i["metadata"]["fingerprint"].as_str().unwrap().to_string();
    let stale = sim
        .post(&path, json!({"fingerprint": "AAAAAAAAAAA=", "items": []}))
        .await;
    stale.expect(412, "conditionNotMet");
    assert_eq!(
        stale.body["error"]["message"],
        "Supplied fingerprint does not match current metadata fingerprint."
    );
    sim.post(&path, json!({"items": []}))
        .await
        .expect(412, "conditionNotMet");
    let items = json!([{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]);
    let done = sim
        .ok(
            "POST",
            &path,
            Some(json!({"fingerprint": fp, "items": items})),
        )
        .await;
    assert_eq!(done["operationType"], "setMetadata");
    let after = sim.get(&format!("zones/{Z}/instances/m1")).await.body;
    assert_eq!(after["metadata"]["items"], items);
    assert_ne!(after["metadata"]["fingerprint"], fp.as_str());
    // The old fingerprint is now stale.
    sim.post(&path, json!({"fingerprint": fp, "items": []}))
        .await
        .expect(412, "conditionNotMet");
    let new_fp = after["metadata"]["fingerprint"].clone();
    let dup = json!([{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]);
    sim.post(&path, json!({"fingerprint": new_fp, "items": dup}))
        .await
        .expect(400, "invalid");
}

/// `setTags` (what `gcloud compute instances add-tags`/`remove-tags` send): the tags' own fingerprint, RFC 1035 tags.
#[tokio::test]
async fn set_tags_needs_the_current_fingerprint_and_well_formed_tags() {
    let sim = start().await;
    let i = instance(&sim, "m1", Z, None).await;
    let path = format!("zones/{Z}/instances/m1/setTags");
    let fp = i["tags"]["fingerprint"].as_str().unwrap().to_string();
    let stale = sim
        .post(
            &path,
            json!({"fingerprint": "AAAAAAAAAAA=", "items": ["a"]}),
        )
        .await;
    stale.expect(412, "conditionNotMet");
    assert_eq!(
        stale.body["error"]["message"],
        "Supplied fingerprint does not match current tags fingerprint."
    );
    for bad in ["Upper", "1digit", "trailing-", ""] {
        sim.post(&path, json!({"fingerprint": fp, "items": [bad]}))
            .await
            .expect(400, "invalid");
    }
    let done = sim
        .ok(
            "POST",
            &path,
            Some(json!({"fingerprint": fp, "items": ["web", "kubernetes-master"]})),
        )
        .await;
    assert_eq!(done["operationType"], "setTags");
    let after = sim.get(&format!("zones/{Z}/instances/m1")).await.body;
    assert_eq!(after["tags"]["items"], json!(["web", "kubernetes-master"]));
    assert_ne!(after["tags"]["fingerprint"], fp.as_str());
}

#[tokio::test]
async fn set_labels_needs_the_current_fingerprint_and_rotates_it() {
    let sim = start().await;
    let i = instance(&sim, "m1", Z, None).await;
    let path = format!("zones/{Z}/instances/m1/setLabels");
    let fp = i["labelFingerprint"].clone();
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
    let after = sim.get(&format!("zones/{Z}/instances/m1")).await.body;
    assert_eq!(after["labels"], json!({"a": "b"}));
    assert_ne!(after["labelFingerprint"], fp);
}

/// GCE resolves `default` to the project's default Compute Engine account, keeps URL scopes, refuses gcloud's
/// aliases (gcloud expands them before calling) and more than one account.
#[tokio::test]
async fn service_accounts_resolve_default_and_take_scope_urls_only() {
    let sim = start().await;
    let mut body = instance_body("m1", Z);
    let scope = "https://www.googleapis.com/auth/compute";
    body["serviceAccounts"] = json!([{"email": "default", "scopes": [scope]}]);
    let i = instance(&sim, "m1", Z, Some(body)).await;
    let email = i["serviceAccounts"][0]["email"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        email.ends_with("-compute@developer.gserviceaccount.com") && email.len() > 40,
        "{i}"
    );
    assert_eq!(i["serviceAccounts"][0]["scopes"], json!([scope]));
    // The same project's default account every time.
    let mut again = instance_body("m2", Z);
    again["serviceAccounts"] = json!([{"email": "default", "scopes": [scope]}]);
    let j = instance(&sim, "m2", Z, Some(again)).await;
    assert_eq!(j["serviceAccounts"][0]["email"], email.as_str());

    let mut alias = instance_body("x", Z);
    alias["serviceAccounts"] = json!([{"email": "default", "scopes": ["compute-rw"]}]);
    let r = sim.post(&format!("zones/{Z}/instances"), alias).await;
    r.expect(400, "invalid");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("scopes[0]"),
        "{}",
        r.body
    );
    let mut two = instance_body("x", Z);
    two["serviceAccounts"] = json!([{"email": "default"}, {"email": "default"}]);
    sim.post(&format!("zones/{Z}/instances"), two)
        .await
        .expect(400, "invalid");
    let mut none = instance_body("x", Z);
    none["serviceAccounts"] = json!([{"scopes": [scope]}]);
    sim.post(&format!("zones/{Z}/instances"), none)
        .await
        .expect(400, "required");
}
