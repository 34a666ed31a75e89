//! Operations (get, list, delete, wait in all three scopes; the aggregated list), requestId, auth, links,
//! persistence.

mod common;
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const Z: &str = "us-east1-b";

#[tokio::test]
async fn operations_live_in_their_scope() {
    let sim = start().await;
    let zonal = sim
        .ok(
            "POST",
            &format!("zones/{Z}/instances"),
            Some(instance_body("m1", Z)),
        )
        .await;
    let regional = sim
        .ok(
            "POST",
            "regions/us-east1/addresses",
            Some(json!({"name": "a"})),
        )
        .await;
    let global = sim
        .ok(
            "POST",
            "global/httpHealthChecks",
            Some(json!({"name": "h"})),
        )
        .await;
    for (op, scope) in [
        (&zonal, format!("zones/{Z}")),
        (&regional, "regions/us-east1".into()),
        (&global, "global".into()),
    ] {
        let name = op["name"].as_str().unwrap();
        assert!(name.starts_with("operation-"));
        let got = sim.get(&format!("{scope}/operations/{name}")).await;
        assert_eq!(got.body, *op);
        let list = sim.get(&format!("{scope}/operations")).await;
        assert_eq!(list.body["kind"], "compute#operationList");
        assert_eq!(list.body["items"][0]["name"], name);
        let waited = sim
            .post(&format!("{scope}/operations/{name}/wait"), json!({}))
            .await;
        assert_eq!(waited.body["status"], "DONE");
        let del = sim.delete(&format!("{scope}/operations/{name}")).await;
        assert_eq!(del.status, 204);
        sim.get(&format!("{scope}/operations/{name}"))
            .await
            .expect(404, "notFound");
        sim.post(&format!("{scope}/operations/{name}/wait"), json!({}))
            .await
            .expect(404, "notFound");
    }
    // An operation is only found in its own scope.
    let name = zonal["name"].as_str().unwrap();
    sim.get(&format!("zones/us-east1-c/operations/{name}"))
        .await
        .expect(404, "notFound");
}

/// globalOperations.aggregatedList (`gcloud compute operations list`): every scope of the catalog appears, each
/// operation under its own scope, empty scopes with GCE's NO_RESULTS_ON_PAGE warning; `filter` and paging work
/// across scopes.
#[tokio::test]
async fn the_aggregated_list_shows_every_scope() {
    let sim = start().await;
    let zonal = sim
        .ok(
            "POST",
            &format!("zones/{Z}/instances"),
            Some(instance_body("m1", Z)),
        )
        .await;
    let regional = sim
        .ok(
            "POST",
            "regions/us-east1/addresses",
            Some(json!({"name": "a"})),
        )
        .await;
    let global = sim
        .ok(
            "POST",
            "global/httpHealthChecks",
            Some(json!({"name": "h"})),
        )
        .await;
    let agg = sim.get("aggregated/operations").await.body;
    assert_eq!(agg["kind"], "compute#operationAggregatedList");
    assert!(
        agg["selfLink"]
            .as_str()
            .unwrap()
            .ends_with("/projects/proj/aggregated/operations"),
        "{agg}"
    );
    let items = agg["items"].as_object().unwrap();
    // global, 3 regions, 10 zones.
    assert_eq!(items.len(), 14, "{agg}");
    for (scope, op) in [
        (format!("zones/{Z}"), &zonal),
        ("regions/us-east1".to_string(), &regional),
        ("global".to_string(), &global),
    ] {
        assert_eq!(
            items[&scope]["operations"][0]["name"], op["name"],
            "{scope}"
        );
        assert_eq!(items[&scope]["operations"].as_array().unwrap().len(), 1);
    }
    let empty = &items["zones/us-east1-c"];
    assert!(empty.get("operations").is_none(), "{empty}");
    assert_eq!(empty["warning"]["code"], "NO_RESULTS_ON_PAGE");
    assert_eq!(
        empty["warning"]["data"][0],
        json!({"key": "scope", "value": "zones/us-east1-c"})
    );
    assert!(agg.get("nextPageToken").is_none(), "{agg}");

    // A filter applies to the operations, in every scope; one the sim cannot evaluate is refused.
    sim.get("aggregated/operations?filter=%28name%20%3D%20a%29%20OR%20%28name%20%3D%20b%29")
        .await
        .expect(400, "invalid");
    let insert_of_h = format!(
        "aggregated/operations?filter=targetId%20%3D%20{}",
        global["targetId"].as_str().unwrap()
    );
    let filtered = sim.get(&insert_of_h).await.body;
    let shown: Vec<&Value> = filtered["items"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|s| s["operations"].as_array())
        .flatten()
        .collect();
    assert_eq!(shown.len(), 1, "{filtered}");
    assert_eq!(shown[0]["name"], global["name"]);

    // One operation per page: three pages, each operation exactly once, then no token.
    let mut seen = Vec::new();
    let mut token = String::new();
    for _ in 0..3 {
        let page = sim
            .get(&format!(
                "aggregated/operations?maxResults=1&pageToken={token}"
            ))
            .await
            .body;
        for s in page["items"].as_object().unwrap().values() {
            for op in s["operations"].as_array().into_iter().flatten() {
                seen.push(op["name"].as_str().unwrap().to_string());
            }
        }
        token = page["nextPageToken"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    }
    assert!(token.is_empty(), "a fourth page: {token}");
    // A page token past the end (even usize::MAX, where start + maxResults would overflow) is an empty page.
    for path in [
        "aggregated/operations?pageToken=18446744073709551615",
        "global/operations?pageToken=18446744073709551615",
    ] {
        let page = sim.get(path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(page.body.get("nextPageToken").is_none(), "{}", page.body);
    }
    seen.sort();
    let mut want: Vec<String> = [&zonal, &regional, &global]
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    want.sort();
    assert_eq!(seen, want);
}

#[tokio::test]
async fn wait_returns_as_soon_as_the_operation_is_done() {
    let sim = start_with(|c| c.latency.default = Duration::from_millis(300)).await;
    let op = sim
        .post("global/httpHealthChecks", json!({"name": "h"}))
        .await;
    let t = Instant::now();
    let waited = sim
        .post(
            &format!(
                "global/operations/{}/wait",
                op.body["name"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert_eq!(waited.body["status"], "DONE");
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn wait_returns_the_current_state_at_its_deadline() {
    let sim = start_with(|c| {
        c.latency.default = Duration::from_secs(30);
        c.latency.wait_deadline = Duration::from_millis(300);
    })
    .await;
    let op = sim
        .post("global/httpHealthChecks", json!({"name": "h"}))
        .await;
    let t = Instant::now();
    let waited = sim
        .post(
            &format!(
                "global/operations/{}/wait",
                op.body["name"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    let took = t.elapsed();
    assert_ne!(waited.body["status"], "DONE");
    assert!(
        took >= Duration::from_millis(280) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_repeated_request_id_is_a_no_op() {
    let sim = start().await;
    let rid = "6a0d2f5c-0000-4000-8000-000000000001";
    let path = format!("zones/{Z}/instances?requestId={rid}");
    let first = sim.post(&path, instance_body("m1", Z)).await;
    assert_eq!(first.body["clientOperationId"], rid);
    let again = sim.post(&path, instance_body("m1", Z)).await;
    assert_eq!(again.status, 200, "the repeat is not a 409: {}", again.body);
    assert_eq!(again.body["name"], first.body["name"]);
    sim.done(&again).await;
    // Even after DONE, the same id answers with the same operation.
    let late = sim.post(&path, instance_body("m1", Z)).await;
    assert_eq!(
        (late.body["name"].clone(), late.body["status"].clone()),
        (first.body["name"].clone(), json!("DONE"))
    );
    let list = sim.get(&format!("zones/{Z}/operations")).await;
    assert_eq!(list.body["items"].as_array().unwrap().len(), 1);
    // A new id is a new request.
    let other = format!("zones/{Z}/instances?requestId=6a0d2f5c-0000-4000-8000-000000000002");
    sim.post(&other, instance_body("m1", Z))
        .await
        .expect(409, "alreadyExists");
    for bad in ["not-a-uuid", "00000000-0000-0000-0000-000000000000"] {
        sim.post(
            &format!("zones/{Z}/instances?requestId={bad}"),
            instance_body("m2", Z),
        )
        .await
        .expect(400, "invalid");
    }
}

#[tokio::test]
async fn requests_need_a_bearer_token() {
    let sim = start().await;
    let r = sim.call_as("GET", "zones", None, None).await;
    r.expect(401, "required");
    assert_eq!(r.body["error"]["status"], "UNAUTHENTICATED");
    assert_eq!(
        sim.call_as("GET", "zones", None, Some("anything"))
            .await
            .status,
        200
    );
    let strict = start_with(|c| c.require_token = Some("s3cret".into())).await;
    strict
        .call_as("GET", "zones", None, Some("anything"))
        .await
        .expect(401, "required");
    assert_eq!(
        strict
            .call_as("GET", "zones", None, Some("s3cret"))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn links_come_from_the_configured_base_url_not_the_host_header() {
    let sim = start().await;
    let resp = sim
        .http
        .get(sim.api("zones/us-central1-a"))
        .bearer_auth("t")
        .header("host", "127.0.0.1")
        .send()
        .await
        .unwrap();
    let z: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        z["selfLink"],
        format!(
            "{}compute/v1/projects/{PROJECT}/zones/us-central1-a",
            sim.url
        )
    );
    let custom = start_with(|c| c.base_url = Some("http://sim.example:1234".into())).await;
    let z = custom.get("zones/us-central1-a").await.body;
    assert_eq!(
        z["selfLink"],
        format!("http://sim.example:1234/compute/v1/projects/{PROJECT}/zones/us-central1-a")
    );
    assert_eq!(
        z["region"],
        format!("http://sim.example:1234/compute/v1/projects/{PROJECT}/regions/us-central1")
    );
}

#[tokio::test]
async fn zones_and_regions_list_the_catalog() {
    let sim = start().await;
    let zones = sim.get("zones").await.body;
    let names: Vec<&str> = zones["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["name"].as_str().unwrap())
        .collect();
    for z in [
        "europe-west1-b",
        "europe-west1-c",
        "europe-west1-d",
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-central1-f",
    ] {
        assert!(names.contains(&z), "{z}");
    }
    let r = sim.get("regions/us-central1").await.body;
    assert_eq!(r["zones"].as_array().unwrap().len(), 4);
    assert_eq!(r["status"], "UP");
    assert_eq!(
        sim.get("regions").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(sim.get("zones/europe-west1-d").await.body["status"], "UP");
    sim.get("zones/europe-west1-a").await.expect(400, "invalid");
}

#[tokio::test]
async fn state_survives_a_restart_on_another_port() {
    let sim = start_with(|c| {
        c.latency.per_kind.insert(
            "httpHealthChecks.insert".into(),
            Duration::from_millis(1500),
        );
    })
    .await;
    instance(&sim, "m1", Z, None).await;
    let slow = sim
        .post("global/httpHealthChecks", json!({"name": "h"}))
        .await;
    let old_url = sim.url.clone();
    let dir = sim.stop().await;
    let cfg = ha_sim::SimConfig::for_tests(dir.path().to_path_buf());
    let sim = start_in(dir, cfg).await;
    assert_ne!(sim.url, old_url);
    let i = sim.get(&format!("zones/{Z}/instances/m1")).await.body;
    assert_eq!(i["status"], "RUNNING");
    assert!(
        i["selfLink"].as_str().unwrap().starts_with(&sim.url),
        "links follow the new base URL"
    );
    // The operation in flight when the sim stopped still finishes.
    let name = slow.body["name"].as_str().unwrap();
    let resumed = sim.get(&format!("global/operations/{name}")).await;
    let done = sim.done(&resumed).await;
    assert!(done.get("error").is_none());
}

#[tokio::test]
async fn malformed_bodies_are_400() {
    let sim = start().await;
    let resp = sim
        .http
        .post(sim.api("global/firewalls"))
        .bearer_auth("t")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["errors"][0]["reason"], "parseError");
    sim.post("global/firewalls", json!({"name": "f", "priority": "high"}))
        .await
        .expect(400, "invalid");
}
