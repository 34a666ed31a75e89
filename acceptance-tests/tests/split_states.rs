//! Split states (Terragrunt stacks), under both clients on ha-sim with real etcd: the cluster lives in one state and
//! its replicas in two others, which read the cluster's `spec` through `terraform_remote_state` (local backend).
//! Both replica states are applied AT THE SAME TIME as separate client processes, starting from a cluster with no
//! replica: one of them founds etcd while the other wants to join, the race the cross-process lock exists for.
//!
//! Both applies must succeed, and afterwards: etcd's members are exactly the three replicas, all voting and healthy;
//! the load balancer exists with exactly the replica VMs in its pool; the static IP answers /healthz over TLS; the
//! plan of every workspace is empty. At least one provider must have logged that it waited for the cluster's lock
//! (TF_LOG_PROVIDER=info), so the test shows the applies were serialized, not lucky. Then both replica states are
//! destroyed at the same time too (leaves race the same way), and the cluster last: nothing is left in the sim.
//!
//! Measured without the cross-process layer (the in-process lock only): under OpenTofu one replica apply failed
//! with "etcd is not ready for a membership change: no etcd member answered" (it joined while the other process
//! was founding etcd); under Terraform both happened to succeed, and only the "waited for the lock" assertion
//! caught it. Hence that assertion.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use acceptance_tests::faults::{Effect, Failpoint, Trigger};
use acceptance_tests::{Client, CmdOutput, Sim, Workspace, for_each_client};
use serde_json::Value;

const HEADER: &str = r#"
terraform {
  required_providers {
    ha = { source = "hamaster/ha" }
  }
}
"#;

fn provider(sim: &Sim) -> String {
    format!(
        r#"
provider "ha" {{
  project                 = "split"
  zone                    = "europe-west1-b"
  compute_custom_endpoint = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token            = "sim-token"
}}
"#,
        url = sim.url()
    )
}

/// The cluster's state: the cluster alone, exporting `spec` for the replica states.
fn cluster_config(sim: &Sim) -> String {
    format!(
        r#"{HEADER}{provider}
resource "ha_master_cluster" "c" {{
  name                      = "split"
  multizone                 = true
  etcd_client_source_ranges = ["127.0.0.0/8"]
  deletion_protection       = false # scenarios end with a destroy
}}

output "spec" {{
  value     = ha_master_cluster.c.spec
  sensitive = true
}}

output "ca" {{
  value = ha_master_cluster.c.ca_certificate
}}

output "ip" {{
  value = ha_master_cluster.c.external_ip
}}
"#,
        provider = provider(sim)
    )
}

/// A replica state: one replica per zone, the cluster read from the cluster state's file.
fn replicas_config(sim: &Sim, cluster_state: &std::path::Path, zones: &[&str]) -> String {
    format!(
        r#"{HEADER}{provider}
data "terraform_remote_state" "cluster" {{
  backend = "local"
  config = {{
    path = "{state}"
  }}
}}

resource "ha_master_replica" "r" {{
  for_each = toset({zones})
  cluster  = data.terraform_remote_state.cluster.outputs.spec
  zone     = each.value
}}

output "replicas" {{
  value = sort([for r in ha_master_replica.r : r.name])
}}
"#,
        provider = provider(sim),
        state = cluster_state.display(),
        zones = serde_json::to_string(zones).unwrap(),
    )
}

fn outputs(ws: &Workspace) -> Value {
    let out = ws.run(&["output", "-json"]);
    out.assert_success();
    serde_json::from_str(&out.stdout).expect("output -json")
}

fn replicas(ws: &Workspace) -> BTreeSet<String> {
    outputs(ws)["replicas"]["value"]
        .as_array()
        .expect("replicas output")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Runs `args` in every workspace at the same time, each as its own client process.
fn at_once(workspaces: &[&Workspace], args: &[&str]) -> Vec<CmdOutput> {
    std::thread::scope(|s| {
        let running: Vec<_> = workspaces
            .iter()
            .map(|ws| s.spawn(move || ws.run(args)))
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

fn assert_all_succeeded(client: Client, what: &str, outs: &[CmdOutput]) {
    for out in outs {
        assert!(out.success(), "[{client}] {what} failed:\n{out}");
    }
}

/// Whether a provider said it waited for the cluster's lock (its info line, under TF_LOG_PROVIDER=info).
fn waited(outs: &[CmdOutput]) -> bool {
    outs.iter().any(|o| {
        o.combined()
            .contains("for the lock of cluster split: held by")
    })
}

fn assert_plan_empty(client: Client, ws: &Workspace, which: &str) {
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(0),
        "[{client}] the plan of the {which} state must be empty:\n{}",
        plan.combined()
    );
}

/// etcd, the load balancer and the static IP serve exactly `replicas`.
fn check_cluster(client: Client, sim: &Sim, cluster: &Workspace, replicas: &BTreeSet<String>) {
    for vm in replicas {
        let list: Value =
            serde_json::from_str(&sim.ssh(vm, &["etcdctl", "member", "list", "-w", "json"]))
                .unwrap();
        let members = list["members"].as_array().unwrap();
        let names: BTreeSet<String> = members
            .iter()
            .map(|m| m["name"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(&names, replicas, "[{client}] etcd members seen from {vm}");
        assert!(
            members
                .iter()
                .all(|m| m["isLearner"].as_bool() != Some(true)),
            "[{client}] a learner is left: {list}"
        );
        sim.ssh(vm, &["etcdctl", "endpoint", "health"]);
    }

    assert_eq!(
        sim.names("forwardingRules"),
        vec!["split".to_string()],
        "[{client}] forwarding rules"
    );
    let state = sim.admin("state");
    let pools: BTreeMap<String, BTreeSet<String>> = state["targetPools"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, p)| {
            let members = p["instances"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str()?.rsplit('/').next().map(str::to_string))
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), members)
        })
        .collect();
    assert_eq!(
        pools,
        [("split".to_string(), replicas.clone())].into(),
        "[{client}] target pools and their members"
    );
    let instances: BTreeSet<String> = sim.names("instances").into_iter().collect();
    assert_eq!(&instances, replicas, "[{client}] instances in the sim");

    let out = outputs(cluster);
    let ca = out["ca"]["value"].as_str().unwrap().to_string();
    let ip: IpAddr = out["ip"]["value"].as_str().unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = rt
        .block_on(ha_ops::endpoint::probe(
            &ca,
            ip,
            ip,
            443,
            Duration::from_secs(5),
        ))
        .unwrap_or_else(|e| panic!("[{client}] https://{ip}/healthz: {e}"));
    assert_eq!(answer.status, 200, "[{client}] /healthz on the static IP");
}

#[test]
fn two_replica_states_applied_at_once_from_an_empty_cluster() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("split-{client}"));
        let timeout = Duration::from_secs(300);
        let cluster = Workspace::new(client, "split-cluster").with_timeout(timeout);
        let log = |ws: Workspace| ws.with_env("TF_LOG_PROVIDER", "info");
        let a = log(Workspace::new(client, "split-a").with_timeout(timeout));
        let b = log(Workspace::new(client, "split-b").with_timeout(timeout));

        cluster.write_main_tf(&cluster_config(&sim));
        let state = cluster.path().join("terraform.tfstate");
        a.write_main_tf(&replicas_config(&sim, &state, &["europe-west1-b"]));
        b.write_main_tf(&replicas_config(
            &sim,
            &state,
            &["europe-west1-c", "europe-west1-d"],
        ));
        for ws in [&cluster, &a, &b] {
            ws.init();
        }
        cluster.apply();

        // From zero replicas: one apply founds etcd while the other waits, then joins. The founding VM's create
        // takes 4 s, so the founder holds the lock long enough that the other apply, started in the same instant
        // but with its own init and plan, finds it held: on a busy machine (CI) it could otherwise arrive after a
        // founding of under a second and never wait.
        sim.add_failpoint(
            Failpoint::new(
                Trigger::Operation {
                    kind: "instances.insert".into(),
                },
                Effect::Delay { ms: 4000 },
            )
            .times(1),
        );
        let applied = at_once(
            &[&a, &b],
            &["apply", "-input=false", "-no-color", "-auto-approve"],
        );
        assert_all_succeeded(client, "a concurrent apply", &applied);
        assert!(
            waited(&applied),
            "[{client}] no provider waited for the cluster's lock: the applies were not serialized\n{}",
            applied
                .iter()
                .map(|o| o.combined())
                .collect::<Vec<_>>()
                .join("\n-----\n")
        );

        let all: BTreeSet<String> = replicas(&a).into_iter().chain(replicas(&b)).collect();
        assert_eq!(all.len(), 3, "[{client}] replicas in state: {all:?}");
        check_cluster(client, &sim, &cluster, &all);
        for (ws, which) in [
            (&cluster, "cluster"),
            (&a, "first replica"),
            (&b, "second replica"),
        ] {
            assert_plan_empty(client, ws, which);
        }

        // Leaving races the same way: both replica states destroyed at once, the cluster last.
        let destroyed = at_once(
            &[&a, &b],
            &["destroy", "-input=false", "-no-color", "-auto-approve"],
        );
        assert_all_succeeded(client, "a concurrent destroy", &destroyed);
        cluster.destroy();
        acceptance_tests::walk::assert_sim_empty(client, &sim);
    });
}
