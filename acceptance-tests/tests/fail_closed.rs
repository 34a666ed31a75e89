//! Unknown is not empty: when etcd's client port cannot be reached from where Terraform runs (a CI runner outside
//! `etcd_client_source_ranges`), no membership change is decided. Before this, the provider read "no members",
//! skipped the quorum check and the member's removal, and deleted the VM: etcd kept a member with no VM, and a
//! second removal left it without quorum. Now plan refuses with a sentence that names the cause and the fix,
//! nothing is deleted, and once the port is reachable again a plain apply converges.

use std::time::Duration;

use acceptance_tests::faults::Event;
use acceptance_tests::for_each_client;
use acceptance_tests::walk::{check, member_names, set_zones, three_replicas, write_keys};

const A: &str = "us-central1-a";
const B: &str = "us-central1-b";
const C: &str = "us-central1-c";

#[test]
fn a_removal_with_etcd_unreachable_from_terraform_is_refused_and_resumes_once_reachable() {
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "fail-closed", Duration::from_secs(300));
        let (a, b, c) = (&by_zone[A], &by_zone[B], &by_zone[C]);
        write_keys(&sim, b);
        let before = member_names(&sim, b);
        assert_eq!(before.len(), 3, "[{client}] {before:?}");

        // Terraform's host can no longer reach any replica's etcd client port; the VMs still reach each other.
        sim.event(Event::BlockPort { port: 2379 });
        set_zones(&ws, &[B, C]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
        plan.assert_contains(&format!(
            "Cannot remove replica {a}: etcd's member list could not be read from where Terraform runs"
        ));
        plan.assert_contains("etcd_client_source_ranges");
        plan.assert_contains("tcp connect error");
        let apply = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(
            apply.code,
            Some(0),
            "[{client}] apply must refuse:\n{apply}"
        );
        apply.assert_contains("could not be read from where Terraform runs");
        assert_eq!(
            sim.names("instances").len(),
            3,
            "[{client}] nothing was deleted"
        );
        assert_eq!(
            member_names(&sim, b),
            before,
            "[{client}] etcd keeps every member, each with its VM"
        );
        for vm in [b, c] {
            let got = sim.ssh(vm, &["etcdctl", "get", "walk/k0", "--print-value-only"]);
            assert_eq!(got.trim(), "v0", "[{client}] {vm} still serves the data");
        }

        // Reachable again: the same plain apply finishes the removal, and everything checks out.
        sim.event(Event::UnblockPort { port: 2379 });
        ws.apply();
        check(client, &ws, &sim, 2);
    });
}
