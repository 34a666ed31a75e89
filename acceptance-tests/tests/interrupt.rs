//! Ctrl-C during an apply, under both clients on ha-sim with real etcd. The client gets SIGINT (sent to its
//! process group, as a terminal does), asks the provider to stop (StopProvider), and the provider's replica
//! applies in flight return at once with what they made; the client exits within a bound although a Compute
//! operation the join waits on never finishes by itself. The next apply observes what exists and finishes: the
//! plan is then empty, etcd's members are the replicas (all voting), and the sim holds no orphan VM or address.
//!
//! Replicas have explicit names so the scenario can tell when the second one's VM exists. With default names the
//! interrupted replica's generated name is saved in its partial state too, so the next apply's replacement finds
//! and removes what it made; a replica interrupted while still waiting for the cluster's lock made nothing and
//! saves no state.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use acceptance_tests::faults::{Effect, Failpoint, Trigger};
use acceptance_tests::{Client, Sim, Workspace, for_each_client};
use serde_json::Value;

/// How long the client may take to exit after Ctrl-C.
const EXIT_BOUND: Duration = Duration::from_secs(60);

fn config(sim: &Sim) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    ha = {{ source = "hamaster/ha" }}
  }}
}}

variable "names" {{
  type = list(string)
}}

provider "ha" {{
  project                 = "intr"
  zone                    = "europe-west1-b"
  compute_custom_endpoint = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token            = "sim-token"
}}

resource "ha_master_cluster" "c" {{
  name                      = "intr"
  multizone                 = true
  etcd_client_source_ranges = ["127.0.0.0/8"]
}}

resource "ha_master_replica" "r" {{
  for_each = toset(var.names)
  cluster  = ha_master_cluster.c.spec
  name     = each.value
  zone     = "europe-west1-${{substr(each.value, -1, 1)}}"
}}
"#,
        url = sim.url()
    )
}

fn set_names(ws: &Workspace, names: &[&str]) {
    ws.write_file(
        "terraform.tfvars.json",
        &serde_json::json!({ "names": names }).to_string(),
    );
}

/// etcd's members as `vm` sees them: (name, is learner), or nothing while `vm`'s etcd does not answer.
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

/// Polls `cond` every 100 ms until it holds, failing after `within`.
fn wait_for(client: Client, what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < within,
            "[{client}] timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ctrl_c_during_a_join_returns_promptly_and_the_next_apply_finishes() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("intr-{client}"));
        let ws = Workspace::new(client, "intr").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_names(&ws, &["intr-b"]);
        ws.apply();

        // The second replica's join will wait forever on its forwarding rule: without the stop, the apply could
        // not end by itself, so a prompt exit shows the provider gave up its work when asked.
        sim.add_failpoint(Failpoint::new(
            Trigger::Operation {
                kind: "forwardingRules.insert".into(),
            },
            Effect::Stall,
        ));
        set_names(&ws, &["intr-b", "intr-c", "intr-d"]);
        let mut child = ws.spawn(
            &["apply", "-input=false", "-no-color", "-auto-approve"],
            "interrupted",
        );
        let second = |sim: &Sim| {
            sim.names("instances")
                .iter()
                .find(|n| n.as_str() != "intr-b")
                .cloned()
        };
        wait_for(
            client,
            "a second replica VM",
            Duration::from_secs(120),
            || second(&sim).is_some(),
        );
        let second = second(&sim).unwrap();
        // Interrupt once it votes: a learner left behind is the next apply's to clear, but its replacement and a
        // sibling's join race for the cluster, which this scenario is not about.
        wait_for(
            client,
            "the second replica to vote",
            Duration::from_secs(120),
            || members(&sim, "intr-b").contains(&(second.clone(), false)),
        );

        // Ctrl-C: SIGINT to the client's process group, as a terminal sends it (the provider ignores it and
        // waits for StopProvider).
        let interrupted = Instant::now();
        // SAFETY: kill(2) with the negated pid of the process group we created for this child.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if interrupted.elapsed() > EXIT_BOUND {
                // SAFETY: as above; the client did not stop, so end it and its providers.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                panic!(
                    "[{client}] apply did not exit within {EXIT_BOUND:?} of Ctrl-C:\n{}",
                    ws.read_file("interrupted.stdout") + &ws.read_file("interrupted.stderr")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let output = ws.read_file("interrupted.stdout") + &ws.read_file("interrupted.stderr");
        eprintln!(
            "[{client}] interrupted apply exited with {status} {:.1?} after Ctrl-C",
            interrupted.elapsed()
        );
        assert!(
            !status.success(),
            "[{client}] an interrupted apply must fail:\n{output}"
        );
        assert!(
            acceptance_tests::normalize_ws(&output).contains(
                "Interrupted: Terraform asked the provider to stop. What was made so far is saved in state; run apply again to finish."
            ),
            "[{client}] the provider must say it was interrupted:\n{output}"
        );

        // The stalled operation is released; the next apply finishes from what it observes.
        sim.clear_failpoints();
        ws.apply();
        let replicas = ["intr-b", "intr-c", "intr-d"];
        assert_eq!(
            ws.plan_detailed_exitcode(),
            0,
            "[{client}] the plan after apply must be empty"
        );
        let want: Vec<(String, bool)> = replicas.iter().map(|r| (r.to_string(), false)).collect();
        for vm in replicas {
            assert_eq!(
                members(&sim, vm),
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
        addresses.insert("intr-ip".into());
        assert_eq!(
            sim.names("addresses").into_iter().collect::<BTreeSet<_>>(),
            addresses,
            "[{client}] addresses in the sim"
        );
    });
}
