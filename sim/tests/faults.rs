//! Fault injection: request failpoints, operation failpoints, out-of-band events, the request log.

mod common;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

const Z: &str = "us-central1-a";

async fn add_fault(sim: &Sim, fp: serde_json::Value) -> serde_json::Value {
    sim.admin("POST", "faults", Some(fp)).await
}

#[tokio::test]
async fn the_next_n_matching_requests_fail_with_the_given_status() {
    let sim = start().await;
    let fp = add_fault(
        &sim,
        json!({"when": {"on": "request", "method": "POST", "api": "instances.insert"},
                                    "then": {"effect": "status", "status": 503}, "times": 2}),
    )
    .await;
    assert_eq!(fp["name"], "request(POST instances.insert)=status(503)x2");
    let path = format!("zones/{Z}/instances");
    sim.post(&path, instance_body("m1", Z))
        .await
        .expect(503, "backendError");
    assert_eq!(
        sim.get(&path).await.status,
        200,
        "other methods are not affected"
    );
    sim.post(&path, instance_body("m1", Z))
        .await
        .expect(503, "backendError");
    sim.ok("POST", &path, Some(instance_body("m1", Z))).await;
    // 429 on every GET under a path, until cleared.
    add_fault(
        &sim,
        json!({"when": {"on": "request", "path": "/compute/v1/projects/*/zones/*/instances/*"},
                           "then": {"effect": "status", "status": 429}}),
    )
    .await;
    for _ in 0..3 {
        let r = sim.get(&format!("{path}/m1")).await;
        r.expect(429, "rateLimitExceeded");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Quota exceeded for quota metric")
        );
    }
    assert_eq!(
        sim.admin("GET", "faults", None).await["faults"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    sim.admin("DELETE", "faults", None).await;
    assert_eq!(sim.get(&format!("{path}/m1")).await.status, 200);
    add_fault(&sim, json!({"when": {"on": "request", "api": "zones.*"}, "then": {"effect": "status", "status": 500}, "times": 1})).await;
    sim.get("zones").await.expect(500, "backendError");
    add_fault(
        &sim,
        json!({"when": {"on": "request", "api": "zones.list"}, "then": {"effect": "status", "status": 403}, "times": 1}),
    )
    .await;
    sim.get("zones").await.expect(403, "rateLimitExceeded");
    assert_eq!(sim.get("zones").await.status, 200);
}

#[tokio::test]
async fn requests_can_be_slowed_down() {
    let sim = start().await;
    add_fault(&sim, json!({"when": {"on": "request", "api": "zones.get"}, "then": {"effect": "delay", "ms": 300}, "times": 1})).await;
    let t = Instant::now();
    assert_eq!(sim.get(&format!("zones/{Z}")).await.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn a_stock_out_fails_the_operation_and_the_instance_never_appears() {
    let sim = start().await;
    add_fault(&sim, json!({"when": {"on": "operation", "kind": "instances.insert"},
                           "then": {"effect": "fail", "code": "ZONE_RESOURCE_POOL_EXHAUSTED"}, "times": 1}))
    .await;
    let op = sim
        .post(&format!("zones/{Z}/instances"), instance_body("m1", Z))
        .await;
    assert_eq!(op.status, 200, "the call itself succeeds");
    let done = sim.done(&op).await;
    let err = &done["error"]["errors"][0];
    assert_eq!(err["code"], "ZONE_RESOURCE_POOL_EXHAUSTED");
    assert!(err["message"].as_str().unwrap().contains(&format!(
        "The zone 'projects/{PROJECT}/zones/{Z}' does not have enough resources"
    )));
    assert_eq!(done["httpErrorStatusCode"], 503);
    assert_eq!(done["httpErrorMessage"], "SERVICE UNAVAILABLE");
    sim.get(&format!("zones/{Z}/instances/m1"))
        .await
        .expect(404, "notFound");
    // Validation still applies to a failing operation: errors are synchronous.
    add_fault(&sim, json!({"when": {"on": "operation", "kind": "instances.*"}, "then": {"effect": "fail", "code": "QUOTA_EXCEEDED"}})).await;
    sim.post(&format!("zones/{Z}/instances"), instance_body("BAD", Z))
        .await
        .expect(400, "invalid");
    let op = sim
        .post(&format!("zones/{Z}/instances"), instance_body("m2", Z))
        .await;
    let done = sim.done(&op).await;
    assert_eq!(done["error"]["errors"][0]["code"], "QUOTA_EXCEEDED");
    assert_eq!(
        done["error"]["errors"][0]["message"],
        "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1."
    );
    assert_eq!(
        done["error"]["errors"][0]["errorDetails"][0]["quotaInfo"]["limitName"],
        "CPUS-per-project-region"
    );
    assert_eq!(done["httpErrorStatusCode"], 403);
}

#[tokio::test]
async fn a_failed_set_metadata_changes_nothing() {
    let sim = start().await;
    let i = instance(&sim, "m1", Z, None).await;
    add_fault(
        &sim,
        json!({"when": {"on": "operation", "kind": "instances.setMetadata"},
                           "then": {"effect": "fail", "code": "CONDITION_NOT_MET"}, "times": 1}),
    )
    .await;
    let op = sim
        .post(
            &format!("zones/{Z}/instances/m1/setMetadata"),
            json!({"fingerprint": i["metadata"]["fingerprint"], "items": []}),
        )
        .await;
    assert_eq!(sim.done(&op).await["httpErrorStatusCode"], 412);
    let after = sim.get(&format!("zones/{Z}/instances/m1")).await.body;
    assert_eq!(after["metadata"], i["metadata"]);
}

#[tokio::test]
async fn a_stalled_operation_runs_until_failpoints_are_cleared() {
    let sim = start().await;
    add_fault(&sim, json!({"when": {"on": "operation", "kind": "addresses.insert"}, "then": {"effect": "stall"}})).await;
    let op = sim
        .post("regions/us-central1/addresses", json!({"name": "a"}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let name = op.body["name"].as_str().unwrap();
    let now = sim
        .get(&format!("regions/us-central1/operations/{name}"))
        .await;
    assert_eq!(now.body["status"], "RUNNING");
    assert_eq!(
        sim.get("regions/us-central1/addresses/a").await.body["status"],
        "RESERVING"
    );
    sim.admin("DELETE", "faults", None).await;
    let done = sim.done(&now).await;
    assert!(done.get("error").is_none());
    assert_eq!(
        sim.get("regions/us-central1/addresses/a").await.body["status"],
        "RESERVED"
    );
}

#[tokio::test]
async fn operations_can_be_slowed_down() {
    let sim = start().await;
    add_fault(&sim, json!({"when": {"on": "operation", "kind": "firewalls.insert"}, "then": {"effect": "delay", "ms": 400}})).await;
    let t = Instant::now();
    sim.ok(
        "POST",
        "global/firewalls",
        Some(json!({"name": "f", "allowed": [{"IPProtocol": "tcp"}]})),
    )
    .await;
    assert!(t.elapsed() >= Duration::from_millis(400));
}

#[tokio::test]
async fn meaningless_failpoints_are_refused() {
    let sim = start().await;
    let r = sim
        .http
        .post(format!("{}_sim/faults", sim.endpoint))
        .json(&json!({"when": {"on": "operation", "kind": "x"}, "then": {"effect": "status", "status": 503}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

#[tokio::test]
async fn out_of_band_events_change_the_cloud_behind_the_clients_back() {
    let sim = start().await;
    sim.ok(
        "POST",
        "regions/us-central1/addresses",
        Some(json!({"name": "ip"})),
    )
    .await;
    let ip = sim.get("regions/us-central1/addresses/ip").await.body["address"].clone();
    let mut body = instance_body("m1", Z);
    body["networkInterfaces"][0]["accessConfigs"] = json!([{"natIP": ip}]);
    let m1 = instance(&sim, "m1", Z, Some(body)).await;
    instance(&sim, "m2", Z, None).await;
    instance(&sim, "m3", "us-central1-b", None).await;
    let pool = json!({"name": "pool", "instances": [m1["selfLink"]]});
    sim.ok("POST", "regions/us-central1/targetPools", Some(pool))
        .await;

    sim.admin(
        "POST",
        "events",
        Some(json!({"event": "detachIp", "instance": "m1"})),
    )
    .await;
    let m1 = sim.get(&format!("zones/{Z}/instances/m1")).await.body;
    assert_eq!(m1["networkInterfaces"][0]["accessConfigs"], json!([]));
    assert_eq!(
        sim.get("regions/us-central1/addresses/ip").await.body["status"],
        "RESERVED"
    );

    sim.admin(
        "POST",
        "events",
        Some(json!({"event": "dropPoolMember", "pool": "pool", "instance": "m1"})),
    )
    .await;
    assert!(
        sim.get("regions/us-central1/targetPools/pool")
            .await
            .body
            .get("instances")
            .is_none_or(|i| i == &json!([]))
    );

    sim.admin(
        "POST",
        "events",
        Some(json!({"event": "crashVm", "instance": format!("{Z}/m1")})),
    )
    .await;
    assert_eq!(
        sim.get(&format!("zones/{Z}/instances/m1")).await.body["status"],
        "TERMINATED"
    );

    sim.admin(
        "POST",
        "events",
        Some(json!({"event": "deleteInstance", "instance": "m2"})),
    )
    .await;
    sim.get(&format!("zones/{Z}/instances/m2"))
        .await
        .expect(404, "notFound");

    sim.admin(
        "POST",
        "events",
        Some(json!({"event": "zoneDown", "zone": "us-central1-b"})),
    )
    .await;
    assert_eq!(sim.get("zones/us-central1-b").await.body["status"], "DOWN");
    assert_eq!(
        sim.get("zones/us-central1-b/instances/m3").await.body["status"],
        "TERMINATED"
    );
    sim.post(
        "zones/us-central1-b/instances",
        instance_body("m4", "us-central1-b"),
    )
    .await
    .expect(503, "backendError");
    sim.admin(
        "POST",
        "events",
        Some(json!({"event": "zoneUp", "zone": "us-central1-b"})),
    )
    .await;
    assert_eq!(sim.get("zones/us-central1-b").await.body["status"], "UP");
    assert_eq!(
        sim.get("zones/us-central1-b/instances/m3").await.body["status"],
        "RUNNING"
    );

    let r = sim
        .http
        .post(format!("{}_sim/events", sim.endpoint))
        .json(&json!({"event": "crashVm", "instance": "ghost"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

#[tokio::test]
async fn the_request_log_counts_calls_per_method() {
    let sim = start().await;
    sim.get("zones").await;
    sim.admin("POST", "requests/reset", None).await;
    sim.ok(
        "POST",
        "global/httpHealthChecks",
        Some(json!({"name": "h"})),
    )
    .await;
    sim.get("global/httpHealthChecks/h").await;
    sim.get("global/httpHealthChecks/h").await;
    sim.call_as("GET", "zones", None, None).await;
    let log = sim.admin("GET", "requests", None).await;
    let by = &log["byMethod"];
    assert_eq!(by["compute.httpHealthChecks.insert"], 1);
    assert_eq!(by["compute.httpHealthChecks.get"], 2);
    assert_eq!(by["compute.zones.list"], 1, "rejected calls count too");
    assert!(by["compute.globalOperations.get"].as_u64().unwrap() >= 1);
    assert!(by.get("compute.zones.get").is_none());
    let total: u64 = by
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(log["total"], total);
    let last = log["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["status"].clone(), last["method"].clone()),
        (json!(401), json!("GET"))
    );
    sim.admin("DELETE", "requests", None).await;
    assert_eq!(sim.admin("GET", "requests", None).await["total"], 0);
}
