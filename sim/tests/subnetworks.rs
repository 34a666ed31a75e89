//! subnetworks: the resource as GCE shows it (the implicit `default` of every region included), its range rules,
//! and internal IPs of addresses and instances taken from the subnetwork they name.

mod common;
use common::*;
use serde_json::{Value, json};

const Z: &str = "europe-west1-b";
const R: &str = "europe-west1";

fn subnet_body(name: &str, range: &str) -> Value {
    json!({"name": name, "network": "global/networks/default", "ipCidrRange": range})
}

async fn subnet(sim: &Sim, name: &str, range: &str) -> Value {
    sim.ok(
        "POST",
        &format!("regions/{R}/subnetworks"),
        Some(subnet_body(name, range)),
    )
    .await;
    sim.get(&format!("regions/{R}/subnetworks/{name}"))
        .await
        .body
}

/// The error message of a Google error body.
fn message(r: &Resp) -> &str {
    r.body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_subnetwork_has_gces_fields_and_every_region_has_default() {
    let sim = start().await;
    let op = sim
        .post(
            &format!("regions/{R}/subnetworks"),
            subnet_body("masters-b", "127.11.0.0/24"),
        )
        .await;
    assert!(
        op.body["region"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/regions/{R}")),
        "a region operation: {}",
        op.body
    );
    assert_eq!(op.body["operationType"], "insert");
    sim.done(&op).await;
    let s = sim
        .get(&format!("regions/{R}/subnetworks/masters-b"))
        .await
        .body;
    let url = |rel: &str| format!("{}compute/v1/projects/{PROJECT}/{rel}", sim.url);
    assert_eq!(s["kind"], "compute#subnetwork");
    assert_eq!(s["network"], url("global/networks/default"));
    assert_eq!(s["ipCidrRange"], "127.11.0.0/24");
    assert_eq!(s["gatewayAddress"], "127.11.0.1");
    assert_eq!(s["region"], url(&format!("regions/{R}")));
    assert_eq!(
        s["selfLink"],
        url(&format!("regions/{R}/subnetworks/masters-b"))
    );
    assert_eq!(
        (&s["privateIpGoogleAccess"], &s["stackType"], &s["purpose"]),
        (&json!(false), &json!("IPV4_ONLY"), &json!("PRIVATE"))
    );
    assert!(s["fingerprint"].as_str().is_some_and(|f| !f.is_empty()));
    assert!(s["id"].as_str().is_some_and(|i| !i.is_empty()));

    // The implicit default: the sim's internal /16, on network default, in every region, the same on every read.
    let d = sim
        .get(&format!("regions/{R}/subnetworks/default"))
        .await
        .body;
    assert_eq!(
        (&d["ipCidrRange"], &d["gatewayAddress"]),
        (&json!("127.10.0.0/16"), &json!("127.10.0.1"))
    );
    assert_eq!(d["network"], url("global/networks/default"));
    assert_eq!(
        d,
        sim.get(&format!("regions/{R}/subnetworks/default"))
            .await
            .body
    );
    let other = sim.get("regions/us-east1/subnetworks/default").await.body;
    assert_eq!(other["region"], url("regions/us-east1"));
    let list = sim.get(&format!("regions/{R}/subnetworks")).await.body;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "masters-b"]);
    let agg = sim.get("aggregated/subnetworks").await.body;
    assert_eq!(
        agg["items"]["regions/us-east1"]["subnetworks"][0]["name"],
        "default"
    );
    assert_eq!(
        agg["items"][format!("regions/{R}")]["subnetworks"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // GCE's refusals.
    sim.post(
        &format!("regions/{R}/subnetworks"),
        subnet_body("masters-b", "127.12.0.0/24"),
    )
    .await
    .expect(409, "alreadyExists");
    sim.post(
        &format!("regions/{R}/subnetworks"),
        subnet_body("default", "127.12.0.0/24"),
    )
    .await
    .expect(409, "alreadyExists");
    let r = sim.get(&format!("regions/{R}/subnetworks/nope")).await;
    r.expect(404, "notFound");
    assert_eq!(
        message(&r),
        format!("The resource 'projects/{PROJECT}/regions/{R}/subnetworks/nope' was not found")
    );
    sim.delete(&format!("regions/{R}/subnetworks/nope"))
        .await
        .expect(404, "notFound");
    let r = sim
        .delete(&format!("regions/{R}/subnetworks/default"))
        .await;
    r.expect(400, "invalidResourceUsage");
    assert!(
        message(&r).contains("Cannot delete auto subnetwork"),
        "{}",
        r.body
    );

    // The admin listings hold the created subnetwork under its own key, never the implicit ones.
    let state = sim.admin("GET", "state", None).await;
    let keys: Vec<&String> = state["subnetworks"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [&format!(
            "projects/{PROJECT}/regions/{R}/subnetworks/masters-b"
        )]
    );
    let status = sim.admin("GET", "status", None).await;
    assert_eq!(status["subnetworks"][0]["name"], "masters-b");
    assert_eq!(status["subnetworks"].as_array().unwrap().len(), 1);

    sim.ok(
        "DELETE",
        &format!("regions/{R}/subnetworks/masters-b"),
        None,
    )
    .await;
    sim.get(&format!("regions/{R}/subnetworks/masters-b"))
        .await
        .expect(404, "notFound");
}

#[tokio::test]
async fn ranges_must_be_loopback_and_must_not_overlap() {
    let sim = start().await;
    subnet(&sim, "masters-b", "127.11.0.0/24").await;
    let refused = async |body: Value| {
        let r = sim.post(&format!("regions/{R}/subnetworks"), body).await;
        assert_eq!(r.status, 400, "{}", r.body);
        message(&r).to_string()
    };
    // Overlaps, worded as GCE words them.
    assert_eq!(
        refused(subnet_body("x", "127.10.0.0/24")).await,
        format!(
            "Invalid IPCidrRange: 127.10.0.0/24 conflicts with existing subnetwork 'default' in region '{R}'."
        )
    );
    assert_eq!(
        refused(subnet_body("x", "127.11.0.128/25")).await,
        format!(
            "Invalid IPCidrRange: 127.11.0.128/25 conflicts with existing subnetwork 'masters-b' in region '{R}'."
        )
    );
    // Loopback addresses are machine-wide: a range of another network, or region, conflicts too.
    let mut other = subnet_body("x", "127.11.0.0/16");
    other["network"] = json!("global/networks/other");
    assert!(refused(other).await.contains("'masters-b'"));
    let r = sim
        .post(
            "regions/us-east1/subnetworks",
            subnet_body("x", "127.11.0.0/28"),
        )
        .await;
    r.expect(400, "invalid");
    // Not loopback: the sim cannot run it.
    let m = refused(subnet_body("x", "10.0.0.0/24")).await;
    assert!(
        m.starts_with("Invalid value for field 'resource.ipCidrRange': '10.0.0.0/24'.")
            && m.contains("loopback")
            && m.contains("127.0.0.0/8"),
        "{m}"
    );
    // The host's own addresses, the external pool and other network blocks' pools.
    assert!(
        refused(subnet_body("x", "127.0.0.0/16"))
            .await
            .contains("127.0.0.1")
    );
    assert!(
        refused(subnet_body("x", "127.20.0.0/24"))
            .await
            .contains("external")
    );
    assert!(
        refused(subnet_body("x", "127.40.0.0/24"))
            .await
            .contains("network block 5")
    );
    // Not a network range, or a size GCE does not take.
    for bad in ["127.12.0.5/24", "127.12.0.0", "127.12.0.0/30", "nope"] {
        let m = refused(subnet_body("x", bad)).await;
        assert!(m.contains("'resource.ipCidrRange'"), "{bad}: {m}");
    }
    sim.post(
        &format!("regions/{R}/subnetworks"),
        json!({"name": "x", "network": "global/networks/default"}),
    )
    .await
    .expect(400, "required");
    sim.post(
        &format!("regions/{R}/subnetworks"),
        json!({"name": "x", "ipCidrRange": "127.12.0.0/24"}),
    )
    .await
    .expect(400, "required");
    // Unsupported kinds of subnetwork.
    let mut proxy = subnet_body("x", "127.12.0.0/24");
    proxy["purpose"] = json!("REGIONAL_MANAGED_PROXY");
    assert!(refused(proxy).await.contains("'resource.purpose'"));
    // A smallest GCE range: /29, four usable addresses.
    let s = subnet(&sim, "tiny", "127.12.0.8/29").await;
    assert_eq!(s["gatewayAddress"], "127.12.0.9");
}

#[tokio::test]
async fn internal_addresses_come_from_their_subnetwork() {
    let sim = start().await;
    let s = subnet(&sim, "masters-b", "127.11.0.0/24").await;
    let reserve = async |body: Value| {
        let name = body["name"].as_str().unwrap().to_string();
        sim.ok("POST", &format!("regions/{R}/addresses"), Some(body))
            .await;
        sim.get(&format!("regions/{R}/addresses/{name}")).await.body
    };
    // Named by partial and by full URL: the first free address after the two GCE keeps.
    let a = reserve(json!({"name": "a", "addressType": "INTERNAL",
                           "subnetwork": format!("regions/{R}/subnetworks/masters-b")}))
    .await;
    assert_eq!(a["address"], "127.11.0.2");
    assert_eq!(a["subnetwork"], s["selfLink"]);
    let b =
        reserve(json!({"name": "b", "addressType": "INTERNAL", "subnetwork": s["selfLink"]})).await;
    assert_eq!(b["address"], "127.11.0.3");
    // A requested address inside the range.
    let c = reserve(
        json!({"name": "c", "addressType": "INTERNAL", "subnetwork": s["selfLink"],
                           "address": "127.11.0.50"}),
    )
    .await;
    assert_eq!(c["address"], "127.11.0.50");
    // No subnetwork: the region's default, shown as such.
    let d = reserve(json!({"name": "d", "addressType": "INTERNAL"})).await;
    assert!(d["address"].as_str().unwrap().starts_with("127.10."), "{d}");
    assert!(
        d["subnetwork"].as_str().unwrap().ends_with(&format!(
            "/projects/{PROJECT}/regions/{R}/subnetworks/default"
        )),
        "{d}"
    );
    // External addresses have no subnetwork.
    let e = reserve(json!({"name": "e"})).await;
    assert!(e.get("subnetwork").is_none(), "{e}");

    // A requested address outside the subnetwork's range.
    let r = sim
        .post(
            &format!("regions/{R}/addresses"),
            json!({"name": "x", "addressType": "INTERNAL", "subnetwork": s["selfLink"],
                   "address": "127.10.0.77"}),
        )
        .await;
    r.expect(400, "invalid");
    assert_eq!(
        message(&r),
        "Invalid value for field 'resource.address': '127.10.0.77'. Requested internal IP is outside the \
         subnetwork CIDR range."
    );
    // An unknown subnetwork.
    let r = sim
        .post(
            &format!("regions/{R}/addresses"),
            json!({"name": "x", "addressType": "INTERNAL",
                   "subnetwork": format!("regions/{R}/subnetworks/nope")}),
        )
        .await;
    r.expect(404, "notFound");
    assert_eq!(
        message(&r),
        format!("The resource 'projects/{PROJECT}/regions/{R}/subnetworks/nope' was not found")
    );
    // A subnetwork of another region, or one for an EXTERNAL address.
    sim.post(
        &format!("regions/{R}/addresses"),
        json!({"name": "x", "addressType": "INTERNAL",
               "subnetwork": "regions/us-east1/subnetworks/default"}),
    )
    .await
    .expect(400, "invalid");
    sim.post(
        &format!("regions/{R}/addresses"),
        json!({"name": "x", "subnetwork": s["selfLink"]}),
    )
    .await
    .expect(400, "invalid");
}

#[tokio::test]
async fn instances_take_their_ip_from_their_subnetwork() {
    let sim = start().await;
    let s = subnet(&sim, "masters-b", "127.11.0.0/24").await;
    // Only a subnetwork: the interface is on its network, with an IP from its range.
    let mut body = instance_body("m1", Z);
    body["networkInterfaces"] =
        json!([{"subnetwork": format!("regions/{R}/subnetworks/masters-b")}]);
    let i = instance(&sim, "m1", Z, Some(body)).await;
    let nic = &i["networkInterfaces"][0];
    assert_eq!(nic["subnetwork"], s["selfLink"]);
    assert_eq!(nic["network"], s["network"]);
    assert_eq!(nic["networkIP"], "127.11.0.2");
    // A static internal IP reserved in the subnetwork, as the provider moves a master.
    sim.ok(
        "POST",
        &format!("regions/{R}/addresses"),
        Some(json!({"name": "m2-ip", "addressType": "INTERNAL", "subnetwork": s["selfLink"]})),
    )
    .await;
    let mut body = instance_body("m2", Z);
    body["networkInterfaces"][0]["subnetwork"] = s["selfLink"].clone();
    body["networkInterfaces"][0]["networkIP"] = json!("127.11.0.3");
    let i = instance(&sim, "m2", Z, Some(body)).await;
    assert_eq!(i["networkInterfaces"][0]["networkIP"], "127.11.0.3");
    let a = sim.get(&format!("regions/{R}/addresses/m2-ip")).await.body;
    assert_eq!(a["address"], "127.11.0.3");
    assert_eq!(a["users"], json!([i["selfLink"]]));
    // No subnetwork: the region's default, as before.
    let i = instance(&sim, "m3", Z, None).await;
    assert!(
        i["networkInterfaces"][0]["subnetwork"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/regions/{R}/subnetworks/default")),
        "{i}"
    );
    assert!(
        i["networkInterfaces"][0]["networkIP"]
            .as_str()
            .unwrap()
            .starts_with("127.10."),
        "{i}"
    );

    let insert = async |name: &str, nic: Value| {
        let mut body = instance_body(name, Z);
        body["networkInterfaces"] = json!([nic]);
        sim.post(&format!("zones/{Z}/instances"), body).await
    };
    // networkIP outside the subnetwork's range.
    let r = insert(
        "x",
        json!({"subnetwork": s["selfLink"], "networkIP": "127.10.0.99"}),
    )
    .await;
    r.expect(400, "invalid");
    assert!(
        message(&r).contains("outside the subnetwork CIDR range"),
        "{}",
        r.body
    );
    // An unknown subnetwork.
    let r = insert(
        "x",
        json!({"subnetwork": format!("regions/{R}/subnetworks/nope")}),
    )
    .await;
    r.expect(404, "notFound");
    assert_eq!(
        message(&r),
        format!("The resource 'projects/{PROJECT}/regions/{R}/subnetworks/nope' was not found")
    );
    // A subnetwork of another network than the interface's.
    let r = insert(
        "x",
        json!({"network": "global/networks/other", "subnetwork": s["selfLink"]}),
    )
    .await;
    r.expect(400, "invalid");
    assert!(
        message(&r).contains("Subnetwork should belong to the network"),
        "{}",
        r.body
    );
    // A subnetwork of another region.
    insert(
        "x",
        json!({"subnetwork": "regions/us-east1/subnetworks/default"}),
    )
    .await
    .expect(400, "invalid");
    // Nothing was created by the refused inserts.
    sim.get(&format!("zones/{Z}/instances/x"))
        .await
        .expect(404, "notFound");
}

#[tokio::test]
async fn a_subnetwork_in_use_cannot_be_deleted() {
    let sim = start().await;
    subnet(&sim, "masters-b", "127.11.0.0/24").await;
    let path = format!("regions/{R}/subnetworks/masters-b");
    let rel = format!("projects/{PROJECT}/{path}");
    let mut body = instance_body("m1", Z);
    body["networkInterfaces"][0]["subnetwork"] = json!(path);
    instance(&sim, "m1", Z, Some(body)).await;
    let r = sim.delete(&path).await;
    r.expect(400, "resourceInUseByAnotherResource");
    assert_eq!(
        message(&r),
        format!(
            "The subnetwork resource '{rel}' is already being used by \
             'projects/{PROJECT}/zones/{Z}/instances/m1'"
        )
    );
    sim.ok("DELETE", &format!("zones/{Z}/instances/m1"), None)
        .await;
    // A reserved address holds it too, used or not.
    sim.ok(
        "POST",
        &format!("regions/{R}/addresses"),
        Some(json!({"name": "ip", "addressType": "INTERNAL", "subnetwork": path})),
    )
    .await;
    let r = sim.delete(&path).await;
    r.expect(400, "resourceInUseByAnotherResource");
    assert!(
        message(&r).ends_with(&format!("'projects/{PROJECT}/regions/{R}/addresses/ip'")),
        "{}",
        r.body
    );
    sim.ok("DELETE", &format!("regions/{R}/addresses/ip"), None)
        .await;
    sim.ok("DELETE", &path, None).await;
    let state = sim.admin("GET", "state", None).await;
    assert_eq!(state["subnetworks"], json!({}));
}
