//! firewalls, httpHealthChecks, targetPools and forwardingRules, and how they refer to each other.

mod common;
use common::*;
use serde_json::json;

const R: &str = "us-central1";
const Z: &str = "us-central1-b";

#[tokio::test]
async fn firewalls_get_defaults_patch_and_delete() {
    let sim = start().await;
    let body = json!({"name": "fw", "allowed": [{"IPProtocol": "tcp", "ports": ["443"]}], "targetTags": ["master"]});
    let op = sim.ok("POST", "global/firewalls", Some(body)).await;
    assert!(
        op.get("zone").is_none() && op.get("region").is_none(),
        "global operation"
    );
    assert!(
        op["selfLink"]
            .as_str()
            .unwrap()
            .contains("/global/operations/")
    );
    let f = sim.get("global/firewalls/fw").await.body;
    assert_eq!(
        (f["priority"].clone(), f["direction"].clone()),
        (json!(1000), json!("INGRESS"))
    );
    assert_eq!(f["sourceRanges"], json!(["0.0.0.0/0"]));
    assert_eq!(
        f["network"],
        format!(
            "{}compute/v1/projects/{PROJECT}/global/networks/default",
            sim.url
        )
    );
    sim.ok(
        "PATCH",
        "global/firewalls/fw",
        Some(json!({"sourceRanges": ["10.0.0.0/8"], "priority": 900})),
    )
    .await;
    let f = sim.get("global/firewalls/fw").await.body;
    assert_eq!(
        (f["priority"].clone(), f["sourceRanges"].clone()),
        (json!(900), json!(["10.0.0.0/8"]))
    );
    assert_eq!(f["targetTags"], json!(["master"]));
    sim.call(
        "PATCH",
        "global/firewalls/fw",
        Some(json!({"name": "other"})),
    )
    .await
    .expect(400, "invalid");
    sim.post(
        "global/firewalls",
        json!({"name": "fw", "allowed": [{"IPProtocol": "tcp"}]}),
    )
    .await
    .expect(409, "alreadyExists");
    sim.post("global/firewalls", json!({"name": "none"}))
        .await
        .expect(400, "invalid");
    let both = json!({"name": "both", "allowed": [{"IPProtocol": "tcp"}], "denied": [{"IPProtocol": "udp"}]});
    sim.post("global/firewalls", both)
        .await
        .expect(400, "invalid");
    assert_eq!(
        sim.get("global/firewalls").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    sim.ok("DELETE", "global/firewalls/fw", None).await;
    sim.get("global/firewalls/fw").await.expect(404, "notFound");
}

#[tokio::test]
async fn health_checks_default_like_gce() {
    let sim = start().await;
    sim.ok(
        "POST",
        "global/httpHealthChecks",
        Some(json!({"name": "hc"})),
    )
    .await;
    let h = sim.get("global/httpHealthChecks/hc").await.body;
    assert_eq!(
        (
            h["port"].clone(),
            h["requestPath"].clone(),
            h["checkIntervalSec"].clone(),
            h["timeoutSec"].clone()
        ),
        (json!(80), json!("/"), json!(5), json!(5))
    );
    assert_eq!(
        (
            h["healthyThreshold"].clone(),
            h["unhealthyThreshold"].clone()
        ),
        (json!(2), json!(2))
    );
    let bad = json!({"name": "slow", "checkIntervalSec": 5, "timeoutSec": 10});
    sim.post("global/httpHealthChecks", bad)
        .await
        .expect(400, "invalid");
    assert_eq!(
        sim.get("global/httpHealthChecks").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// health check ← pool ← rule, with instances in the pool.
async fn stack(sim: &Sim) -> (String, String) {
    sim.ok(
        "POST",
        "global/httpHealthChecks",
        Some(json!({"name": "hc", "port": 8080, "requestPath": "/healthz"})),
    )
    .await;
    let a = instance(sim, "a", Z, None).await;
    let b = instance(sim, "b", "us-central1-c", None).await;
    let pool = json!({"name": "pool", "healthChecks": ["global/httpHealthChecks/hc"], "instances": [a["selfLink"]]});
    sim.ok("POST", &format!("regions/{R}/targetPools"), Some(pool))
        .await;
    sim.ok(
        "POST",
        &format!("regions/{R}/addresses"),
        Some(json!({"name": "lb-ip"})),
    )
    .await;
    let ip = sim.get(&format!("regions/{R}/addresses/lb-ip")).await.body["address"]
        .as_str()
        .unwrap()
        .to_string();
    let rule = json!({"name": "fr", "IPAddress": ip, "IPProtocol": "TCP", "portRange": "443",
                      "target": format!("regions/{R}/targetPools/pool")});
    sim.ok("POST", &format!("regions/{R}/forwardingRules"), Some(rule))
        .await;
    (ip, b["selfLink"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn a_forwarding_rule_holds_its_address_and_its_pool() {
    let sim = start().await;
    let (ip, _) = stack(&sim).await;
    let fr = sim
        .get(&format!("regions/{R}/forwardingRules/fr"))
        .await
        .body;
    assert_eq!(fr["portRange"], "443-443", "GCE stores 443 as 443-443");
    assert_eq!(fr["IPAddress"], ip.as_str());
    assert_eq!(fr["loadBalancingScheme"], "EXTERNAL");
    assert_eq!(
        fr["target"],
        format!(
            "{}compute/v1/projects/{PROJECT}/regions/{R}/targetPools/pool",
            sim.url
        )
    );
    let a = sim.get(&format!("regions/{R}/addresses/lb-ip")).await.body;
    assert_eq!(
        (a["status"].clone(), a["users"].clone()),
        (json!("IN_USE"), json!([fr["selfLink"]]))
    );
    // Nothing in use can be deleted: address, pool, health check.
    sim.delete(&format!("regions/{R}/addresses/lb-ip"))
        .await
        .expect(400, "resourceInUseByAnotherResource");
    let r = sim.delete(&format!("regions/{R}/targetPools/pool")).await;
    r.expect(400, "resourceInUseByAnotherResource");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("The target_pool resource")
    );
    sim.delete("global/httpHealthChecks/hc")
        .await
        .expect(400, "resourceInUseByAnotherResource");
    // The IP cannot be given to an instance or to an overlapping rule...
    sim.post(
        &format!("zones/{Z}/instances/a/addAccessConfig?networkInterface=nic0"),
        json!({"natIP": ip}),
    )
    .await
    .expect(400, "resourceInUseByAnotherResource");
    let clash = json!({"name": "fr2", "IPAddress": ip, "portRange": "443", "target": format!("regions/{R}/targetPools/pool")});
    let r = sim
        .post(&format!("regions/{R}/forwardingRules"), clash)
        .await;
    r.expect(400, "invalid");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in-use and would result in a conflict")
    );
    // ...but a rule on other ports may share it.
    let other_port = json!({"name": "fr3", "IPAddress": ip, "portRange": "8443", "target": format!("regions/{R}/targetPools/pool")});
    sim.ok(
        "POST",
        &format!("regions/{R}/forwardingRules"),
        Some(other_port),
    )
    .await;
    // Tear down in dependency order.
    for rule in ["fr", "fr3"] {
        sim.ok(
            "DELETE",
            &format!("regions/{R}/forwardingRules/{rule}"),
            None,
        )
        .await;
    }
    assert_eq!(
        sim.get(&format!("regions/{R}/addresses/lb-ip")).await.body["status"],
        "RESERVED"
    );
    sim.ok("DELETE", &format!("regions/{R}/targetPools/pool"), None)
        .await;
    sim.ok("DELETE", "global/httpHealthChecks/hc", None).await;
    sim.ok("DELETE", &format!("regions/{R}/addresses/lb-ip"), None)
        .await;
}

#[tokio::test]
async fn forwarding_rule_errors() {
    let sim = start().await;
    let target = format!("regions/{R}/targetPools/pool");
    sim.ok(
        "POST",
        &format!("regions/{R}/targetPools"),
        Some(json!({"name": "pool"})),
    )
    .await;
    let rules = format!("regions/{R}/forwardingRules");
    let post = |b| sim.post(&rules, b);
    post(json!({"name": "x", "IPAddress": "127.20.50.50", "target": target}))
        .await
        .expect(400, "invalid");
    post(json!({"name": "x", "target": "regions/us-central1/targetPools/nope"}))
        .await
        .expect(404, "notFound");
    post(json!({"name": "x", "target": "regions/europe-west1/targetPools/pool"}))
        .await
        .expect(400, "invalid");
    post(json!({"name": "x", "portRange": "http", "target": target}))
        .await
        .expect(400, "invalid");
    post(json!({"name": "x"})).await.expect(400, "required");
    post(json!({"name": "x", "loadBalancingScheme": "INTERNAL", "target": target}))
        .await
        .expect(400, "invalid");
    // No IP: an ephemeral one. By address name: its IP.
    sim.ok(
        "POST",
        &format!("regions/{R}/forwardingRules"),
        Some(json!({"name": "eph", "target": target})),
    )
    .await;
    let eph = sim
        .get(&format!("regions/{R}/forwardingRules/eph"))
        .await
        .body;
    assert!(eph["IPAddress"].as_str().unwrap().starts_with("127.20."));
    assert_eq!(eph["IPProtocol"], "TCP");
    sim.ok(
        "POST",
        &format!("regions/{R}/addresses"),
        Some(json!({"name": "named"})),
    )
    .await;
    let rule = json!({"name": "byname", "IPAddress": format!("regions/{R}/addresses/named"), "portRange": "80-81", "target": target});
    sim.ok("POST", &format!("regions/{R}/forwardingRules"), Some(rule))
        .await;
    let by_name = sim
        .get(&format!("regions/{R}/forwardingRules/byname"))
        .await
        .body;
    let named = sim.get(&format!("regions/{R}/addresses/named")).await.body;
    assert_eq!(
        by_name["IPAddress"], named["address"],
        "reading IPAddress always gives the number"
    );
    assert_eq!(
        sim.get(&format!("regions/{R}/forwardingRules")).await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    sim.post(
        &format!("regions/{R}/forwardingRules"),
        json!({"name": "eph", "target": target}),
    )
    .await
    .expect(409, "alreadyExists");
}

#[tokio::test]
async fn target_pool_membership_and_health() {
    let sim = start().await;
    let (ip, b_link) = stack(&sim).await;
    let pool_path = format!("regions/{R}/targetPools/pool");
    // Add by partial URL, remove by full URL; repeats are no-ops.
    let add = json!({"instances": [{"instance": "zones/us-central1-c/instances/b"}]});
    sim.ok(
        "POST",
        &format!("{pool_path}/addInstance"),
        Some(add.clone()),
    )
    .await;
    sim.ok("POST", &format!("{pool_path}/addInstance"), Some(add))
        .await;
    let pool = sim.get(&pool_path).await.body;
    assert_eq!(pool["instances"].as_array().unwrap().len(), 2);
    assert_eq!(pool["sessionAffinity"], "NONE");
    let health = sim
        .post(
            &format!("{pool_path}/getHealth"),
            json!({"instance": b_link}),
        )
        .await;
    assert_eq!(health.body["healthStatus"][0]["healthState"], "HEALTHY");
    assert_eq!(health.body["healthStatus"][0]["ipAddress"], ip.as_str());
    assert_eq!(health.body["healthStatus"][0]["port"], 443);
    sim.ok("POST", "zones/us-central1-c/instances/b/stop", None)
        .await;
    let health = sim
        .post(
            &format!("{pool_path}/getHealth"),
            json!({"instance": b_link}),
        )
        .await;
    assert_eq!(health.body["healthStatus"][0]["healthState"], "UNHEALTHY");
    sim.ok(
        "POST",
        &format!("{pool_path}/removeInstance"),
        Some(json!({"instances": [{"instance": b_link}]})),
    )
    .await;
    assert_eq!(
        sim.get(&pool_path).await.body["instances"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    sim.post(
        &format!("{pool_path}/getHealth"),
        json!({"instance": b_link}),
    )
    .await
    .expect(400, "invalid");
    // Members must exist and be in the pool's region.
    let far = instance(&sim, "far", "europe-west1-c", None).await;
    sim.post(
        &format!("{pool_path}/addInstance"),
        json!({"instances": [{"instance": far["selfLink"]}]}),
    )
    .await
    .expect(400, "invalid");
    let ghost = json!({"instances": [{"instance": "zones/us-central1-c/instances/ghost"}]});
    sim.post(&format!("{pool_path}/addInstance"), ghost)
        .await
        .expect(404, "notFound");
    let two = json!({"name": "p2", "healthChecks": ["global/httpHealthChecks/hc", "global/httpHealthChecks/hc"]});
    sim.post(&format!("regions/{R}/targetPools"), two)
        .await
        .expect(400, "invalid");
    let missing_hc = json!({"name": "p3", "healthChecks": ["global/httpHealthChecks/nope"]});
    sim.post(&format!("regions/{R}/targetPools"), missing_hc)
        .await
        .expect(404, "notFound");
    assert_eq!(
        sim.get(&format!("regions/{R}/targetPools")).await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn deleting_a_pool_while_its_rule_is_being_deleted_is_not_ready_yet() {
    let sim = start_with(|c| {
        c.latency.per_kind.insert(
            "forwardingRules.delete".into(),
            std::time::Duration::from_millis(400),
        );
    })
    .await;
    stack(&sim).await;
    let op = sim.delete(&format!("regions/{R}/forwardingRules/fr")).await;
    // GCE's retryable answer while the user is going away (terraform-provider-google retries it).
    sim.delete(&format!("regions/{R}/targetPools/pool"))
        .await
        .expect(400, "resourceNotReady");
    sim.delete(&format!("regions/{R}/addresses/lb-ip"))
        .await
        .expect(400, "resourceNotReady");
    sim.done(&op).await;
    sim.ok("DELETE", &format!("regions/{R}/targetPools/pool"), None)
        .await;
    sim.ok("DELETE", &format!("regions/{R}/addresses/lb-ip"), None)
        .await;
}
