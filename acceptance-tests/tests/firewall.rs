//! ha-sim enforces the cluster's firewall rules, so a Terraform host outside `etcd_client_source_ranges` is as cut
//! off as it would be on GCE: its connections to etcd's client port are dropped (they time out, nothing refuses
//! them). A plan with no change says it could not read etcd (a drift job there sees nothing) and costs one dial
//! timeout. A grow and a shrink are refused at plan and at apply with a sentence that names the cause and the
//! attribute, and nothing is half done: the same VMs, the same etcd members, the data intact. Once the range admits
//! the host (the cluster's rule widened first, since the replicas' plan reads etcd before the rule changes), a plain
//! apply converges.

use std::time::{Duration, Instant};

use acceptance_tests::faults::Event;
use acceptance_tests::for_each_client;
use acceptance_tests::walk::{
    THREE_ZONES, check, member_names, set_zones_and_etcd_ranges, three_replicas, write_keys,
};

/// Where the Terraform host is, as the masters' firewall sees it: outside the configured 127.0.0.0/8.
const OUTSIDE: &str = "198.51.100.7";
const F: &str = "us-central1-f";

#[test]
fn a_terraform_host_outside_the_etcd_source_ranges_is_refused_until_the_rule_admits_it() {
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "firewall", Duration::from_secs(400));
        let b = &by_zone[THREE_ZONES[1]];
        write_keys(&sim, b);

        // A drift job outside the range: its plan cannot read etcd, and says so instead of a silent "no changes".
        // Every member is asked at once and the refresh's look serves the whole plan, so with the default dial
        // timeout (10 s) the plan costs one timeout, not one per member and per look (60 s before).
        sim.event(Event::SetClientIp {
            ip: Some(OUTSIDE.parse().unwrap()),
        });
        let started = Instant::now();
        let drift = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        let took = started.elapsed();
        eprintln!("[{client}] a plan from outside etcd's source ranges took {took:.1?}");
        assert_eq!(
            drift.code,
            Some(0),
            "[{client}] nothing changed, and the plan says what it could not see:\n{drift}"
        );
        drift.assert_contains(
            "etcd of cluster walk could not be read: this plan cannot see drift in etcd",
        );
        drift.assert_contains("etcd_client_source_ranges");
        assert!(
            took < Duration::from_secs(25),
            "[{client}] the plan waited {took:?} on etcd that cannot answer"
        );
        sim.event(Event::SetClientIp { ip: None });

        // A dropped connection costs the whole dial timeout: short here, so each refusal comes quickly.
        let anchor = "  drain_delay";
        let tf = ws.read_file("main.tf");
        assert!(tf.contains(anchor));
        ws.write_main_tf(&tf.replacen(
            anchor,
            "  etcd_dial_timeout       = \"1s\"\n  drain_delay",
            1,
        ));
        let a = &by_zone[THREE_ZONES[0]];
        let before_members = member_names(&sim, b);
        let before_vms = sim.vm_field("id");
        assert_eq!(before_members.len(), 3, "[{client}] {before_members:?}");

        // The host moves outside 127.0.0.0/8: the rule `walk-etcd-client` no longer admits it to 2379.
        sim.event(Event::SetClientIp {
            ip: Some(OUTSIDE.parse().unwrap()),
        });
        let ranges = ["127.0.0.0/8"];
        let shrink = [THREE_ZONES[1], THREE_ZONES[2]];
        let grow = [THREE_ZONES[0], THREE_ZONES[1], THREE_ZONES[2], F];
        for (what, zones, sentence) in [
            ("shrink", &shrink[..], format!("Cannot remove replica {a}")),
            ("grow", &grow[..], "Cannot add a replica".to_string()),
        ] {
            set_zones_and_etcd_ranges(&ws, zones, &ranges);
            let plan = ws.run(&["plan", "-input=false", "-no-color"]);
            assert_eq!(
                plan.code,
                Some(1),
                "[{client}] the {what} plan must refuse:\n{plan}"
            );
            plan.assert_contains(&sentence);
            plan.assert_contains("etcd's member list could not be read from where Terraform runs");
            plan.assert_contains("etcd_client_source_ranges");
            // Dropped, as on GCE: the provider waited and gave up, nobody refused the connection.
            assert!(
                !plan.combined().contains("Connection refused"),
                "[{client}] a firewall drops, it does not refuse:\n{plan}"
            );
            let apply = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
            assert_ne!(
                apply.code,
                Some(0),
                "[{client}] the {what} apply must refuse:\n{apply}"
            );
            apply.assert_contains("could not be read from where Terraform runs");
            assert_eq!(
                sim.vm_field("id"),
                before_vms,
                "[{client}] {what}: no VM was made or deleted"
            );
            assert_eq!(
                member_names(&sim, b),
                before_members,
                "[{client}] {what}: etcd keeps exactly its members"
            );
            let got = sim.ssh(b, &["etcdctl", "get", "walk/k0", "--print-value-only"]);
            assert_eq!(got.trim(), "v0", "[{client}] {what}: the data is intact");
        }

        // The range now admits the host. The cluster's rule changes first (the replicas' plan reads etcd through
        // it); then the same plain apply as before grows the cluster, and everything checks out.
        let widened = ["127.0.0.0/8", "198.51.100.0/24"];
        set_zones_and_etcd_ranges(&ws, &THREE_ZONES, &widened);
        ws.apply_target("ha_master_cluster.c");
        set_zones_and_etcd_ranges(&ws, &grow, &widened);
        ws.apply();
        check(client, &ws, &sim, 4);
        let rules = sim.admin("state")["firewalls"].clone();
        assert!(
            rules.to_string().contains("198.51.100.0/24"),
            "[{client}] the etcd client rule admits the new range: {rules}"
        );
    });
}
