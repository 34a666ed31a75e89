//! A drift job's provider (`HA_READ_ONLY=true`, the provider's `read_only`), under both clients on ha-sim with real
//! etcd: three replicas with keys, a firewall rule deleted out of band. The read-only plan reports the drift
//! (`-detailed-exitcode` 2), says it did not read etcd nor check the keys' secret, reads no secret payload (the
//! sim's request log counts no `secretmanager.secrets.versions.access`) and dials no etcd (from a host etcd's
//! firewall drops, with a 40 s dial timeout, it finishes well within that). Its apply is refused with nothing changed: the rule is
//! still gone. Every method the read-only plan called is in docs/guides/drift-jobs.md's table of what a drift
//! job's identity needs. The same workspace without the setting applies the repair, and every key is there.

use std::time::{Duration, Instant};

use acceptance_tests::faults::Event;
use acceptance_tests::for_each_client;
use acceptance_tests::walk::{THREE_ZONES, check, three_replicas, write_keys};

const PLAN_EXIT: [&str; 4] = ["plan", "-input=false", "-no-color", "-detailed-exitcode"];
const APPLY: [&str; 4] = ["apply", "-input=false", "-no-color", "-auto-approve"];

/// A host etcd's firewall drops (outside the walk-through's 127.0.0.0/8): a dial from there would wait its timeout.
const OUTSIDE: &str = "198.51.100.7";

/// The methods docs/guides/drift-jobs.md's table lists (its rows start with the method in backticks).
fn documented_methods() -> std::collections::BTreeSet<String> {
    let guide = acceptance_tests::repo_root().join("docs/guides/drift-jobs.md");
    let text = std::fs::read_to_string(&guide).expect("docs/guides/drift-jobs.md");
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_read_only_provider_plans_drift_without_keys_or_etcd_and_refuses_to_apply() {
    for_each_client(|client| {
        let (sim, mut ws, by_zone) = three_replicas(client, "read-only", Duration::from_secs(400));
        write_keys(&sim, &by_zone[THREE_ZONES[1]]);
        sim.gcloud(&[
            "compute",
            "firewall-rules",
            "delete",
            "walk-etcd",
            "--quiet",
        ])
        .unwrap_or_else(|e| panic!("[{client}] {e}"));

        // A dial from outside etcd's firewall waits the whole dial timeout: made longer than the plan's bound, so a
        // read-only plan that dialed etcd at all would fail it.
        let anchor = "  drain_delay";
        let tf = ws.read_file("main.tf");
        assert!(tf.contains(anchor));
        ws.write_main_tf(&tf.replacen(
            anchor,
            "  etcd_dial_timeout       = \"40s\"\n  drain_delay",
            1,
        ));
        ws.set_env("HA_READ_ONLY", "true");
        sim.event(Event::SetClientIp {
            ip: Some(OUTSIDE.parse().unwrap()),
        });
        sim.requests(true);
        let started = Instant::now();
        let plan = ws.run(&PLAN_EXIT);
        let took = started.elapsed();
        eprintln!("[{client}] the read-only plan took {took:.1?}");
        assert_eq!(
            plan.code,
            Some(2),
            "[{client}] the drift is planned:\n{plan}"
        );
        plan.assert_contains("Firewall rule walk-etcd is missing");
        plan.assert_contains("etcd of cluster walk was not read: the provider is read_only");
        plan.assert_contains("keys secret was not checked: the provider is read_only");
        let called = sim.requests(false)["byMethod"].clone();
        let access = called["secretmanager.secrets.versions.access"]
            .as_u64()
            .unwrap_or(0);
        assert_eq!(
            access, 0,
            "[{client}] the read-only plan read a secret's payload"
        );
        // What a drift job's identity must be allowed is what docs/guides/drift-jobs.md lists.
        let listed = documented_methods();
        for method in called.as_object().expect("byMethod").keys() {
            assert!(
                listed.contains(method),
                "[{client}] the read-only plan called {method}, which docs/guides/drift-jobs.md does not list"
            );
        }
        // 40 s per dial from here: a plan that dialed would wait at least that.
        assert!(
            took < Duration::from_secs(25),
            "[{client}] the read-only plan took {took:?}"
        );

        let apply = ws.run(&APPLY);
        apply.assert_failure();
        apply.assert_contains("The provider is read_only");
        assert!(
            sim.gcloud(&["compute", "firewall-rules", "describe", "walk-etcd"])
                .is_err(),
            "[{client}] a read-only apply changed the firewall"
        );

        sim.event(Event::SetClientIp { ip: None });
        ws.set_env("HA_READ_ONLY", "false");
        ws.apply();
        sim.gcloud(&["compute", "firewall-rules", "describe", "walk-etcd"])
            .unwrap_or_else(|e| panic!("[{client}] the repair put the rule back: {e}"));
        check(client, &ws, &sim, 3);
    });
}
