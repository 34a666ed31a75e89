//! Rules of a cluster's lifecycle beyond growing and shrinking, under both clients on ha-sim with real etcd:
//! a join whose VM cannot be made takes its etcd learner back out (so nothing half-joined is left) and the next
//! apply finishes the job; a join abandoned after its address and keys existed (its state removed) leaves them
//! only until the next join or the cluster's delete; a cluster whose replicas still exist refuses to be deleted
//! and deletes nothing; and a replica's labels change in place on its VM.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use acceptance_tests::faults::{Effect, Failpoint, Trigger};
use acceptance_tests::walk::edit_config;
use acceptance_tests::{Client, Sim, Workspace, for_each_client};
use serde_json::Value;

const PROVIDER: &str = r#"
terraform {
  required_providers {
    ha = { source = "hamaster/ha" }
  }
}

provider "ha" {
  project                 = "rules"
  zone                    = "europe-west1-b"
  compute_custom_endpoint = "URL"
  secret_manager_custom_endpoint = "URL"
  access_token            = "sim-token"
}
"#;

/// A cluster and one replica per name, each with the same `labels`; names are explicit so the scenario can
/// look the VMs up.
fn config(sim: &Sim) -> String {
    format!(
        r#"{provider}
variable "names" {{
  type = list(string)
}}

variable "labels" {{
  type    = map(string)
  default = {{}}
}}

resource "ha_master_cluster" "c" {{
  name                      = "rules"
  etcd_client_source_ranges = ["127.0.0.0/8"]
  deletion_protection       = false # scenarios end with a destroy
}}

resource "ha_master_replica" "r" {{
  for_each = toset(var.names)
  cluster  = ha_master_cluster.c.spec
  name     = each.value
  labels   = var.labels
}}
"#,
        provider = PROVIDER.replace("URL", sim.url())
    )
}

fn set_vars(ws: &Workspace, names: &[&str], labels: &[(&str, &str)]) {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    ws.write_file(
        "terraform.tfvars.json",
        &serde_json::json!({ "names": names, "labels": labels }).to_string(),
    );
}

/// etcd's members as `vm` sees them: (name, is learner) for each.
fn members(sim: &Sim, vm: &str) -> Vec<(String, bool)> {
    let list: Value =
        serde_json::from_str(&sim.ssh(vm, &["etcdctl", "member", "list", "-w", "json"])).unwrap();
    let mut out: Vec<(String, bool)> = list["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or("").to_string(),
                m["isLearner"].as_bool() == Some(true),
            )
        })
        .collect();
    out.sort();
    out
}

/// After a successful apply: the plan is empty, etcd's members are the replicas (all voting), and the sim holds
/// exactly the replicas' VMs and addresses plus the cluster's static IP.
fn check(client: Client, ws: &Workspace, sim: &Sim, replicas: &[&str]) {
    assert_eq!(
        ws.plan_detailed_exitcode(),
        0,
        "[{client}] the plan after apply must be empty"
    );
    let want: Vec<(String, bool)> = replicas.iter().map(|r| (r.to_string(), false)).collect();
    for vm in replicas {
        assert_eq!(
            members(sim, vm),
            want,
            "[{client}] etcd members seen from {vm}"
        );
    }
    let names: BTreeSet<String> = replicas.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        sim.names("instances").into_iter().collect::<BTreeSet<_>>(),
        names,
        "[{client}] instances in the sim"
    );
    let mut addresses: BTreeSet<String> = replicas.iter().map(|r| format!("{r}-int")).collect();
    addresses.insert("rules-ip".into());
    assert_eq!(
        sim.names("addresses").into_iter().collect::<BTreeSet<_>>(),
        addresses,
        "[{client}] addresses in the sim"
    );
}

#[test]
fn a_join_whose_vm_cannot_be_made_leaves_no_learner_and_the_next_apply_finishes() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("rules-join-{client}"));
        let ws = Workspace::new(client, "rules-join").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_vars(&ws, &["rules-a"], &[]);
        ws.apply();

        // The zone runs out of VMs: the second replica's learner is added, then its VM insert fails.
        fail_vm_inserts(&sim);
        set_vars(&ws, &["rules-a", "rules-b"], &[]);
        let failed = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        failed.assert_failure();
        failed.assert_contains("Could not create replica rules-b");
        failed.assert_contains("does not have enough resources (ZONE_RESOURCE_POOL_EXHAUSTED)");
        // The error names the phase the join stopped in.
        failed.assert_contains("(creating its VM) failed");
        assert_eq!(
            members(&sim, "rules-a"),
            [("rules-a".to_string(), false)],
            "[{client}] the failed join's learner must be gone"
        );
        assert_eq!(sim.names("instances"), ["rules-a"], "[{client}] instances");

        // Capacity is back: the next apply replaces the failed replica and the cluster has two members.
        sim.clear_failpoints();
        ws.apply();
        check(client, &ws, &sim, &["rules-a", "rules-b"]);
    });
}

#[test]
fn a_cluster_with_replicas_refuses_deletion_and_labels_change_in_place() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("rules-keep-{client}"));
        let ws = Workspace::new(client, "rules-keep").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_vars(&ws, &["rules-a"], &[("team", "red")]);
        ws.apply();
        assert_eq!(
            vm_labels(&sim, "rules-a").get("team").map(String::as_str),
            Some("red")
        );

        // Labels: an in-place update of the replica, carried to its VM.
        set_vars(&ws, &["rules-a"], &[("team", "blue"), ("tier", "gold")]);
        let plan = ws.plan();
        plan.assert_contains("update in-place");
        assert!(
            !plan.combined().contains("must be replaced"),
            "[{client}] a label change must not replace the replica:\n{plan}"
        );
        ws.apply();
        let labels = vm_labels(&sim, "rules-a");
        assert_eq!(
            (
                labels.get("team").map(String::as_str),
                labels.get("tier").map(String::as_str)
            ),
            (Some("blue"), Some("gold")),
            "[{client}] VM labels: {labels:?}"
        );
        check(client, &ws, &sim, &["rules-a"]);

        // A setting masters read at boot rolls the replica in place: the plan says how, and replaces nothing.
        ws.write_main_tf(&edit_config(
            config(&sim),
            &[(
                "  name                      = \"rules\"\n",
                "  name                      = \"rules\"\n  dns_domain                = \"corp.example\"\n",
            )],
        ));
        let plan = ws.plan();
        plan.assert_contains("Replica rules-a will be rolled: dns_domain changes");
        assert!(
            !plan.combined().contains("must be replaced"),
            "[{client}] a DNS domain change must not replace the replica by itself:\n{plan}"
        );
        ws.apply();
        check(client, &ws, &sim, &["rules-a"]);

        // The cluster alone is deleted (the replica is forgotten by Terraform, not destroyed): refused, naming
        // the replica, and nothing goes.
        ws.run(&["state", "rm", "ha_master_replica.r[\"rules-a\"]"])
            .assert_success();
        ws.write_main_tf(&PROVIDER.replace("URL", sim.url()));
        ws.write_file("terraform.tfvars.json", "{}");
        let refused = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        refused.assert_failure();
        refused.assert_contains("Cluster rules still has replicas: rules-a");
        refused.assert_contains("Remove their ha_master_replica resources first");
        assert_eq!(sim.names("instances"), ["rules-a"], "[{client}] instances");
        assert_eq!(
            sim.names("addresses"),
            ["rules-a-int", "rules-ip"],
            "[{client}] addresses"
        );
        assert_eq!(
            members(&sim, "rules-a"),
            [("rules-a".to_string(), false)],
            "[{client}] etcd"
        );
        let state = ws.run(&["state", "list"]);
        state.assert_success();
        assert!(
            state.stdout.contains("ha_master_cluster.c"),
            "[{client}] the cluster must stay in state:\n{state}"
        );
    });
}

/// The labels the sim's VM `name` carries.
fn vm_labels(sim: &Sim, name: &str) -> BTreeMap<String, String> {
    serde_json::from_value(sim.instance(name)["labels"].clone()).unwrap_or_default()
}

/// The secrets the sim holds, by id (`projects/rules/secrets/<id>`).
fn secrets(sim: &Sim) -> BTreeSet<String> {
    sim.admin("state")["secrets"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.rsplit('/').next().unwrap_or(k).to_string())
        .collect()
}

/// The zone runs out of VMs: every VM insert fails, as GCE's stockout does, until the failpoints are cleared.
fn fail_vm_inserts(sim: &Sim) {
    sim.add_failpoint(Failpoint::new(
        Trigger::Operation {
            kind: "instances.insert".into(),
        },
        Effect::Fail {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
            message: None,
        },
    ));
}

/// Makes the next join fail at its VM insert, after its address and keys exist, and abandons it as a user who
/// gives up on a replica does (`terraform state rm`): what it made is then under a name no state holds.
fn abandon_a_join(client: Client, ws: &Workspace, sim: &Sim, names: &[&str]) {
    let abandoned = names.last().unwrap();
    fail_vm_inserts(sim);
    set_vars(ws, names, &[]);
    ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"])
        .assert_failure();
    sim.clear_failpoints();
    ws.run(&[
        "state",
        "rm",
        &format!("ha_master_replica.r[\"{abandoned}\"]"),
    ])
    .assert_success();
    assert!(
        sim.names("addresses").contains(&format!("{abandoned}-int")),
        "[{client}] the abandoned join's address is the leftover under test"
    );
    assert!(
        secrets(sim).contains(&format!("{abandoned}-europe-west1-b-keys")),
        "[{client}] the abandoned join's keys are the leftover under test: {:?}",
        secrets(sim)
    );
}

#[test]
fn an_abandoned_join_leaves_no_address_or_keys_once_a_later_join_or_the_clusters_delete_runs() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("rules-abandon-{client}"));
        let ws = Workspace::new(client, "rules-abandon").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_vars(&ws, &["rules-a"], &[]);
        ws.apply();

        // A later join, under the cluster's lock, removes what the abandoned one left.
        abandon_a_join(client, &ws, &sim, &["rules-a", "rules-b"]);
        set_vars(&ws, &["rules-a", "rules-c"], &[]);
        ws.apply();
        check(client, &ws, &sim, &["rules-a", "rules-c"]);
        assert_eq!(
            secrets(&sim),
            BTreeSet::from([
                "rules-a-europe-west1-b-keys".to_string(),
                "rules-c-europe-west1-b-keys".to_string(),
                "rules-cluster-keys".to_string(),
            ]),
            "[{client}] the abandoned join's keys are gone, the replicas' and the cluster's are kept"
        );

        // So does the cluster's delete, when no join comes first.
        abandon_a_join(client, &ws, &sim, &["rules-a", "rules-c", "rules-d"]);
        ws.destroy();
        acceptance_tests::walk::assert_sim_empty(client, &sim);
    });
}
