use super::*;
use crate::Error;

/// The first insert gets a 503; the retry (same requestId) creates the address; exactly one exists.
#[tokio::test]
async fn a_post_failing_with_503_is_retried_and_applied_once() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    sim.fail_requests("addresses.insert", 503, 1).await;
    let a = c
        .reserve_external_address(REGION, "api", deadline())
        .await
        .unwrap();
    assert_eq!(sim.statuses("addresses.insert").await, [503, 200]);
    let state = sim.state().await;
    assert_eq!(state["addresses"].as_object().unwrap().len(), 1);
    let ops = operations_on(&state, "/addresses/api");
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert!(
        ops[0]["clientOperationId"]
            .as_str()
            .is_some_and(|r| uuid::Uuid::parse_str(r).is_ok())
    );
    assert_eq!(a.status, "RESERVED");
}

/// Every attempt of one logical mutation carries the same requestId, whatever made the earlier one fail: an
/// error answer, or no answer within the attempt timeout (the request may still have been applied).
#[tokio::test]
async fn every_attempt_of_a_mutation_carries_the_same_request_id() {
    let sim = Sim::start().await;
    let c = sim.compute().await.with_backoff(Backoff {
        attempt_timeout: Duration::from_millis(300),
        ..fast()
    });
    sim.fail_requests("addresses.insert", 503, 1).await;
    let seen = std::sync::Mutex::new(Vec::new());
    let mut body = google_cloud_compute_v1::model::Address::new();
    body.name = Some("api".into());
    c.mutate("address api", "insert", deadline(), |rid| {
        let attempt = {
            let mut s = seen.lock().unwrap();
            s.push(rid.clone());
            s.len()
        };
        let call = c
            .clients
            .addresses
            .insert()
            .set_project(PROJECT)
            .set_region(REGION)
            .set_body(body.clone())
            .set_request_id(rid);
        let sim = &sim;
        async move {
            if attempt == 2 {
                // The second attempt gets no answer in time.
                sim.fault(json!({"when": {"on": "request", "api": "addresses.insert"}, "then": {"effect": "delay", "ms": 2000}, "times": 1}))
                    .await;
            }
            call.send().await
        }
    })
    .await
    .unwrap();
    let seen = seen.into_inner().unwrap();
    // The first attempt met the 503; the second the delay (abandoned); the third succeeded.
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.iter().all(|r| *r == seen[0]), "{seen:?}");
    let state = sim.state().await;
    let ops = operations_on(&state, "/addresses/api");
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0]["clientOperationId"], seen[0].as_str());
}

#[tokio::test]
async fn rate_limits_are_retried_but_other_client_errors_are_not() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    c.reserve_external_address(REGION, "api", deadline())
        .await
        .unwrap();
    // 429 and 403 rateLimitExceeded ("Quota exceeded for quota metric ... per minute") both mean "back off".
    sim.fail_requests("addresses.get", 429, 2).await;
    assert!(
        c.get_address(REGION, "api", deadline())
            .await
            .unwrap()
            .is_some()
    );
    sim.fail_requests("addresses.get", 403, 1).await;
    assert!(
        c.get_address(REGION, "api", deadline())
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        sim.statuses("addresses.get").await,
        [200, 429, 429, 200, 403, 200]
    );

    // Any other 4xx is final at once.
    sim.fail_requests("addresses.get", 400, 1).await;
    let err = c.get_address(REGION, "api", deadline()).await.unwrap_err();
    assert_eq!(err.http_status(), Some(400), "{err:?}");
    assert_eq!(sim.calls("addresses.get").await, 7);
}

#[tokio::test]
async fn retries_stop_at_the_deadline_with_the_last_answer() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    sim.fault(json!({"when": {"on": "request", "api": "addresses.insert"}, "then": {"effect": "status", "status": 503}}))
        .await;
    let started = Instant::now();
    let err = c
        .reserve_external_address(REGION, "api", Instant::now() + Duration::from_millis(800))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("HTTP 503 backendError"), "{err}");
}

/// A stalled operation is waited for with `wait` (not polled with GET) until the deadline.
#[tokio::test]
async fn operations_are_awaited_with_wait_under_the_deadline() {
    // The sim's wait answers after 0.3 s at most, so several waits happen before our deadline.
    let sim = Sim::start_with(&["--wait-deadline-secs", "0.3"]).await;
    let c = sim.compute().await;
    sim.fault(json!({"when": {"on": "operation", "kind": "firewalls.insert"}, "then": {"effect": "stall"}}))
        .await;
    let spec = crate::FirewallSpec {
        name: "fw".into(),
        network: "default".into(),
        tcp_ports: vec!["443".into()],
        source_ranges: vec!["0.0.0.0/0".into()],
        source_tags: vec![],
        target_tags: vec![],
        description: None,
    };
    let err = c
        .ensure_firewall(&spec, Instant::now() + Duration::from_millis(1500))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("firewall projects/proj/global/firewalls/fw"),
        "{err}"
    );
    assert!(sim.calls("globalOperations.wait").await >= 2);
    assert_eq!(sim.calls("globalOperations.get").await, 0);
}

/// A failed RESOURCE_NOT_READY operation is retried as a new request (a new requestId: the old one would only
/// return the failed operation again).
#[tokio::test]
async fn an_operation_failing_with_resource_not_ready_is_redone_under_a_new_request_id() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    sim.fail_operation("addresses.insert", "RESOURCE_NOT_READY")
        .await;
    c.reserve_external_address(REGION, "api", deadline())
        .await
        .unwrap();
    let ops = operations_on(&sim.state().await, "/addresses/api");
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert_ne!(ops[0]["clientOperationId"], ops[1]["clientOperationId"]);
    // Other operation errors are final.
    sim.fail_operation("addresses.insert", "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE")
        .await;
    let err = c
        .reserve_external_address(REGION, "other", deadline())
        .await
        .unwrap_err();
    assert_eq!(
        err.operation_code(),
        Some("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(
            "address projects/proj/regions/us-central1/addresses/other: insert failed"
        ),
        "{err}"
    );
}

/// Nothing listening: connection errors are retried (the request may not have arrived) until the deadline.
#[tokio::test]
async fn connection_failures_are_retried_until_the_deadline() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let settings = Settings {
        project: Some(PROJECT.into()),
        auth: Auth::AccessToken("t".into()),
        compute_endpoint: Some(format!("http://127.0.0.1:{port}")),
        ..Settings::default()
    };
    let c = Compute::new(&settings).await.unwrap().with_backoff(fast());
    let err = c
        .get_address(REGION, "api", Instant::now() + Duration::from_millis(600))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("last error"), "{err}");
}

#[tokio::test]
async fn without_a_project_every_call_says_so() {
    let sim = Sim::start().await;
    let settings = Settings {
        project: None,
        ..sim.settings()
    };
    let c = Compute::new(&settings).await.unwrap();
    let err = c.get_zone(ZONE, deadline()).await.unwrap_err();
    assert!(err.to_string().contains("no project"), "{err}");
    let z = c
        .for_project(PROJECT)
        .get_zone(ZONE, deadline())
        .await
        .unwrap();
    assert_eq!(z.name, ZONE);
}

/// A `wait` that returns at once without the operation being DONE (GCE says it may) does not make a busy loop.
#[tokio::test]
async fn waits_that_return_at_once_are_paced() {
    let sim = Sim::start_with(&["--wait-deadline-secs", "0"]).await;
    let c = sim.compute().await;
    sim.fault(json!({"when": {"on": "operation", "kind": "addresses.insert"}, "then": {"effect": "stall"}}))
        .await;
    let err = c
        .reserve_external_address(REGION, "api", Instant::now() + Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    // With the tests' 50 ms backoff, at most about 1 s / 25 ms waits; a busy loop would make hundreds.
    let waits = sim.calls("regionOperations.wait").await;
    assert!((2..=45).contains(&waits), "{waits} waits");
}
