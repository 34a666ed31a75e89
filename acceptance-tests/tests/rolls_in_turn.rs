//! Five replicas roll one at a time under the cluster's lock, each inside its own `timeouts.update`. The time a
//! replica spends queued behind its siblings is not taken from its work: its timeout bounds the wait, and again
//! the roll once it holds the lock. Before, the later replicas' timeouts ran out while they waited, and one was
//! left stopped and out of the load balancer.
//!
//! The scenario calibrates itself: a first roll of all five with the default timeout measures the whole apply; the
//! second gets half of that as each replica's timeout, more than one roll needs (about a fifth) and less than the
//! queue (the fourth replica waits three fifths). Every replica must roll, none left stopped, and every key kept.
//! A move of one replica to another zone (a replacement: keyed by name, its `zone` changes) says at plan what it
//! does to fault tolerance while the member is gone.
//!
//! And a roll does not take a master down without the time to bring it back (`domain::disruption`): each join
//! and roll writes how long its master was out of service on the VM, and a roll whose timeout is shorter than the
//! longest of those and a quarter is refused before anything stops.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use acceptance_tests::walk::{check, edit_config, not_running, walk_config_in, write_keys};
use acceptance_tests::{Sim, Workspace, for_each_client};

/// Five replicas keyed by name, two sharing a zone (us-central1 has four).
const REPLICAS: [(&str, &str); 5] = [
    ("r1", "us-central1-a"),
    ("r2", "us-central1-b"),
    ("r3", "us-central1-c"),
    ("r4", "us-central1-f"),
    ("r5", "us-central1-a"),
];

/// The walk-through with replicas keyed by name (`var.replicas`: key → zone) and their update timeout a variable.
fn config(sim: &Sim) -> String {
    edit_config(
        walk_config_in(sim, REPLICAS[0].1),
        &[
            (
                "variable \"zones\" {\n  type = list(string)\n}",
                "variable \"replicas\" {\n  type = map(string)\n}\n\nvariable \"update_timeout\" {\n  type    = string\n  default = \"10m\"\n}",
            ),
            ("for_each = toset(var.zones)", "for_each = var.replicas"),
            (
                "  zone     = each.value\n",
                "  zone     = each.value\n  timeouts {\n    update = var.update_timeout\n  }\n",
            ),
        ],
    )
}

fn set(ws: &Workspace, replicas: &BTreeMap<&str, &str>, machine_type: &str, timeout: &str) {
    let vars = serde_json::json!({
        "replicas": replicas,
        "machine_type": machine_type,
        "update_timeout": timeout,
    });
    ws.write_file("terraform.tfvars.json", &vars.to_string());
}

#[test]
fn five_replicas_each_roll_inside_their_own_timeout_however_long_they_queue() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("rolls-in-turn-{client}"));
        let ws = Workspace::new(client, "rolls-in-turn").with_timeout(Duration::from_secs(600));
        ws.write_main_tf(&config(&sim));
        ws.init();
        let mut replicas: BTreeMap<&str, &str> = REPLICAS.into_iter().collect();
        set(&ws, &replicas, "e2-standard-2", "10m");
        ws.apply();
        let names: Vec<String> = sim.vm_field("status").into_keys().collect();
        assert_eq!(names.len(), 5, "[{client}] {names:?}");
        write_keys(&sim, &names[0]);

        // The whole queue, measured with the default timeout.
        set(&ws, &replicas, "e2-standard-4", "10m");
        let started = Instant::now();
        ws.apply();
        let queue = started.elapsed();
        check(client, &ws, &sim, 5);

        // Half the queue per replica: the later ones wait longer than that for their turn.
        let timeout = (queue.as_secs_f64() / 2.0).ceil().max(2.0) as u64;
        eprintln!(
            "[{client}] five rolls took {queue:.1?}; each replica's update timeout is now {timeout}s"
        );
        set(&ws, &replicas, "e2-standard-2", &format!("{timeout}s"));
        let rolled = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_eq!(
            rolled.code,
            Some(0),
            "[{client}] every replica rolls within {timeout}s of its turn:\n{rolled}"
        );
        let stopped = not_running(&sim);
        assert!(
            stopped.is_empty(),
            "[{client}] no master left stopped: {stopped:?}"
        );
        check(client, &ws, &sim, 5);

        // A zone move replaces the replica: the plan says what the member's absence costs, then it happens.
        replicas.insert("r5", "us-central1-b");
        set(&ws, &replicas, "e2-standard-2", "10m");
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("Fault tolerance drops from 2 to 1 while");
        plan.assert_contains("is replaced");
        ws.apply();
        check(client, &ws, &sim, 5);
    });
}

/// How long each replica VM's last window took, as its label says (`ha-master-window`, seconds).
fn windows(sim: &Sim) -> BTreeMap<String, Option<u64>> {
    sim.names("instances")
        .into_iter()
        .map(|vm| {
            let took = sim.instance(&vm)["labels"]["ha-master-window"]
                .as_str()
                .and_then(|s| s.parse().ok());
            (vm, took)
        })
        .collect()
}

#[test]
fn a_roll_takes_a_master_down_only_with_the_time_to_bring_it_back() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("roll-window-{client}"));
        let ws = Workspace::new(client, "roll-window").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        let replicas: BTreeMap<&str, &str> = REPLICAS[..2].iter().copied().collect();
        set(&ws, &replicas, "e2-standard-2", "10m");
        ws.apply();
        let measured = windows(&sim);
        assert!(
            measured.values().all(|w| w.is_some_and(|s| s >= 1)),
            "[{client}] every join writes its first boot's window: {measured:?}"
        );
        let vms: Vec<&String> = measured.keys().collect();
        write_keys(&sim, vms[0]);

        // Masters that take ten minutes to come back, as one VM's label now says: a five-minute timeout is
        // refused before anything stops.
        let zone = sim.instance(vms[1])["zone"]
            .as_str()
            .and_then(|z| z.rsplit('/').next())
            .unwrap()
            .to_string();
        sim.gcloud(&[
            "compute",
            "instances",
            "add-labels",
            vms[1],
            &format!("--zone={zone}"),
            "--labels=ha-master-window=600",
        ])
        .unwrap_or_else(|e| panic!("[{client}] gcloud add-labels: {e}"));
        set(&ws, &replicas, "e2-standard-4", "5m");
        sim.requests(true);
        let refused = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(
            refused.code,
            Some(0),
            "[{client}] the roll must be refused:\n{refused}"
        );
        refused.assert_contains("did not start");
        refused.assert_contains("takes about 600s to go out of service and come back");
        refused.assert_contains(&format!("on VM {}", vms[1]));
        refused.assert_contains("Nothing was stopped or deleted");
        let log = sim.requests(false);
        for down in [
            "instances.stop",
            "targetPools.removeInstance",
            "instances.setMachineType",
        ] {
            assert!(
                log["byMethod"][format!("compute.{down}")].is_null(),
                "[{client}] {down} was called:\n{refused}"
            );
        }
        let types = sim.vm_field("machineType");
        assert!(
            types.values().all(|t| t.ends_with("/e2-standard-2")),
            "[{client}] {types:?}"
        );

        // With the time, both roll; each writes the window it measured, and the labels plan nothing.
        set(&ws, &replicas, "e2-standard-4", "15m");
        ws.apply();
        let measured = windows(&sim);
        assert!(
            measured
                .values()
                .all(|w| w.is_some_and(|s| (1..600).contains(&s))),
            "[{client}] each roll writes the window it measured: {measured:?}"
        );
        check(client, &ws, &sim, 2);
        assert_eq!(
            ws.plan_detailed_exitcode(),
            0,
            "[{client}] a second plan is empty"
        );
    });
}
