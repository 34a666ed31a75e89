//! The original docs' walk-through, declaratively, under both clients on ha-sim with real etcd: a cluster and one
//! replica, then 2, 3, 2 and 1 replicas in different zones (for_each), and 3 replicas created in one apply.
//! After every apply: the next plan is empty; etcd's members are exactly the declared replicas, all healthy and
//! voting; keys written at the start are all still there; the static IP answers /healthz over TLS with a
//! certificate valid for that IP under the cluster CA; the load balancer exists exactly when there are two or more
//! replicas; and the sim holds no object Terraform does not know about.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use acceptance_tests::{Client, Sim, Workspace, for_each_client};
use serde_json::Value;

fn config(sim: &Sim) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    ha = {{ source = "hamaster/ha" }}
  }}
}}

variable "zones" {{
  type = list(string)
}}

provider "ha" {{
  project                 = "walk"
  zone                    = "europe-west1-b"
  compute_custom_endpoint = "{url}"
  access_token            = "sim-token"
}}

resource "ha_master_cluster" "c" {{
  name                      = "walk"
  multizone                 = true
  etcd_client_source_ranges = ["127.0.0.0/8"]
}}

resource "ha_master_replica" "r" {{
  for_each = toset(var.zones)
  cluster  = ha_master_cluster.c.spec
  zone     = each.value
}}

output "ca" {{
  value = ha_master_cluster.c.ca_certificate
}}

output "ip" {{
  value = ha_master_cluster.c.external_ip
}}

output "replicas" {{
  value = sort([for r in ha_master_replica.r : r.name])
}}
"#,
        url = sim.url()
    )
}

fn set_zones(ws: &Workspace, zones: &[&str]) {
    ws.write_file(
        "terraform.tfvars.json",
        &serde_json::json!({ "zones": zones }).to_string(),
    );
}

fn outputs(ws: &Workspace) -> Value {
    let out = ws.run(&["output", "-json"]);
    out.assert_success();
    serde_json::from_str(&out.stdout).expect("terraform output -json")
}

const KEYS: usize = 5;

fn write_keys(sim: &Sim, vm: &str) {
    for i in 0..KEYS {
        sim.ssh(
            vm,
            &["etcdctl", "put", &format!("walk/k{i}"), &format!("v{i}")],
        );
    }
}

/// Every check of the walk-through, for the replicas Terraform says exist.
fn check(client: Client, ws: &Workspace, sim: &Sim, expected: usize) {
    let out = outputs(ws);
    let replicas: BTreeSet<String> = out["replicas"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        replicas.len(),
        expected,
        "[{client}] replicas in state: {replicas:?}"
    );

    assert_eq!(
        ws.plan_detailed_exitcode(),
        0,
        "[{client}] the plan after apply must be empty"
    );

    // etcd: members == replicas, every one voting and healthy, seen from every replica.
    for vm in &replicas {
        let list: Value =
            serde_json::from_str(&sim.ssh(vm, &["etcdctl", "member", "list", "-w", "json"]))
                .unwrap();
        let members = list["members"].as_array().unwrap();
        let names: BTreeSet<String> = members
            .iter()
            .map(|m| m["name"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(names, replicas, "[{client}] etcd members seen from {vm}");
        assert!(
            members
                .iter()
                .all(|m| m["isLearner"].as_bool() != Some(true)),
            "[{client}] a learner is left: {list}"
        );
        sim.ssh(vm, &["etcdctl", "endpoint", "health"]);
        let keys = sim.ssh(vm, &["etcdctl", "get", "walk/", "--prefix", "--keys-only"]);
        assert_eq!(
            keys.lines().filter(|l| !l.trim().is_empty()).count(),
            KEYS,
            "[{client}] keys seen from {vm}"
        );
    }

    // The static IP serves the API over TLS, verified for that IP under the cluster CA.
    let ca = out["ca"]["value"].as_str().unwrap().to_string();
    let ip: IpAddr = out["ip"]["value"].as_str().unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = rt
        .block_on(terraform_provider_ha::ops::endpoint::probe(
            &ca,
            ip,
            ip,
            443,
            Duration::from_secs(5),
        ))
        .unwrap_or_else(|e| panic!("[{client}] https://{ip}/healthz: {e}"));
    assert_eq!(answer.status, 200, "[{client}] /healthz on the static IP");
    assert!(
        answer
            .replica
            .as_ref()
            .is_some_and(|r| replicas.contains(r)),
        "[{client}] answered by {:?}",
        answer.replica
    );

    // The load balancer exists exactly with two or more replicas; nothing in the sim that state does not know.
    let rules = sim.names("forwardingRules");
    assert_eq!(
        rules,
        if expected >= 2 {
            vec!["walk".to_string()]
        } else {
            vec![]
        },
        "[{client}] forwarding rules"
    );
    let instances: BTreeSet<String> = sim.names("instances").into_iter().collect();
    assert_eq!(instances, replicas, "[{client}] instances in the sim");
    let mut addresses: BTreeSet<String> = replicas.iter().map(|r| format!("{r}-int")).collect();
    addresses.insert("walk-ip".into());
    assert_eq!(
        sim.names("addresses").into_iter().collect::<BTreeSet<_>>(),
        addresses,
        "[{client}] addresses in the sim"
    );
}

#[test]
fn grow_one_two_three_then_shrink_to_one() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("walk-{client}"));
        let ws = Workspace::new(client, "walk").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        let walk: [&[&str]; 5] = [
            &["europe-west1-b"],
            &["europe-west1-b", "europe-west1-c"],
            &["europe-west1-b", "europe-west1-c", "europe-west1-d"],
            &["europe-west1-b", "europe-west1-c"],
            &["europe-west1-b"],
        ];
        for (step, zones) in walk.iter().enumerate() {
            set_zones(&ws, zones);
            let applied = ws.apply();
            // Two replicas are worse than one: the apply that ends with two says so, and only that one.
            let warned = applied
                .combined()
                .contains("Two replicas tolerate no more failures than one");
            assert_eq!(
                warned,
                zones.len() == 2,
                "[{client}] two-replica warning after {zones:?}:\n{}",
                applied.combined()
            );
            if step == 0 {
                let first = outputs(&ws)["replicas"]["value"][0]
                    .as_str()
                    .unwrap()
                    .to_string();
                write_keys(&sim, &first);
            }
            check(client, &ws, &sim, zones.len());
        }
        ws.destroy();
        assert!(
            sim.names("instances").is_empty() && sim.names("addresses").is_empty(),
            "[{client}] destroy leaked objects"
        );
    });
}

#[test]
fn three_replicas_in_one_apply() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("three-{client}"));
        let ws = Workspace::new(client, "three").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_zones(&ws, &["europe-west1-b"]);
        ws.apply();
        let first = outputs(&ws)["replicas"]["value"][0]
            .as_str()
            .unwrap()
            .to_string();
        write_keys(&sim, &first);
        // Two more at once: Terraform creates them in parallel; the provider serializes the joins.
        set_zones(&ws, &["europe-west1-b", "europe-west1-c", "europe-west1-d"]);
        ws.apply();
        check(client, &ws, &sim, 3);
        ws.destroy();
        assert!(
            sim.names("instances").is_empty(),
            "[{client}] destroy leaked instances"
        );
    });
}

#[test]
fn a_vm_deleted_out_of_band_is_seen_by_plan_and_replaced_by_apply() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-vm-{client}"));
        let ws = Workspace::new(client, "drift-vm").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_zones(&ws, &["europe-west1-b", "europe-west1-c", "europe-west1-d"]);
        ws.apply();
        let replicas = outputs(&ws)["replicas"]["value"].clone();
        let (first, victim) = (
            replicas[0].as_str().unwrap().to_string(),
            replicas[1].as_str().unwrap().to_string(),
        );
        write_keys(&sim, &first);

        sim.fault(&["delete-instance", &victim]);
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(
            plan.code,
            Some(2),
            "[{client}] plan must see the missing VM:\n{}",
            plan.combined()
        );
        plan.assert_contains("must be replaced");
        plan.assert_contains(&format!("The VM of replica {victim} is gone"));

        ws.apply();
        check(client, &ws, &sim, 3);
        let now: BTreeSet<String> = sim.names("instances").into_iter().collect();
        assert!(
            !now.contains(&victim),
            "[{client}] {victim} came back under its old name"
        );
    });
}
