//! A cluster that lost etcd quorum comes back with one apply (issue #11, the part that needs no snapshot). Under
//! both clients on ha-sim with real etcd: three replicas hold 1,000 keys, then two VMs are deleted out of band
//! with their etcd data disks kept, so one member of three runs and etcd has no quorum. The plan shows both
//! rebuilt on their disks (nothing replaced); one apply brings quorum back with the same member ids (no member
//! added or removed), every key is there, and the next plan is empty.

use std::collections::BTreeSet;
use std::time::Duration;

use acceptance_tests::walk::{check, replicas_by_zone, set_zones, walk_config, write_keys};
use acceptance_tests::{Sim, Workspace, for_each_client};
use serde_json::Value;

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const D: &str = "europe-west1-d";

/// How many keys the scenario writes before the loss, under `recover/`.
const KEYS: usize = 1000;

/// Writes `KEYS` keys through `vm` in transactions of 100 puts (etcd's default limit is 128 operations per
/// transaction): ten etcdctl runs instead of a thousand. Each txn reads no comparison, the puts, and no failure
/// branch, each section ended by an empty line.
fn write_many_keys(sim: &Sim, vm: &str) {
    // The batch's counter lives in the outer loop: the pipeline's left side runs in a subshell.
    let script = format!(
        r#"for b in $(seq 0 100 {last}); do {{ echo; for i in $(seq $b $((b+99))); do echo "put recover/k$i v$i"; done; echo; echo; }} | etcdctl txn >/dev/null || exit 1; done"#,
        last = KEYS - 100
    );
    sim.ssh(vm, &["sh", "-c", &script]);
    assert_eq!(key_count(sim, vm), KEYS, "keys written through {vm}");
}

/// How many `recover/` keys `vm`'s etcd holds (a linearizable read: it needs quorum).
fn key_count(sim: &Sim, vm: &str) -> usize {
    let out = sim.ssh(
        vm,
        &[
            "sh",
            "-c",
            "etcdctl get recover/ --prefix --keys-only | grep -c .",
        ],
    );
    out.trim().parse().unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The member ids etcd lists, as `etcdctl member list` on `vm` shows them (a serializable read: it answers
/// without quorum).
fn member_ids(sim: &Sim, vm: &str) -> BTreeSet<u64> {
    let out = sim.ssh(vm, &["etcdctl", "member", "list", "-w", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["ID"].as_u64())
        .collect()
}

#[test]
fn two_vms_deleted_with_their_disks_kept_come_back_as_the_same_members_with_one_apply() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("recovery-disks-{client}"));
        let ws = Workspace::new(client, "recovery-disks").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&walk_config(&sim));
        ws.init();
        set_zones(&ws, &[B, C, D]);
        ws.apply();
        let by_zone = replicas_by_zone(&ws);
        let survivor = by_zone[B].clone();
        write_keys(&sim, &survivor);
        write_many_keys(&sim, &survivor);
        let before = member_ids(&sim, &survivor);
        assert_eq!(before.len(), 3, "[{client}] members before: {before:?}");

        // Two of three VMs deleted in the console; their data disks stay. etcd has 1 of 3 members: no quorum.
        let lost = [by_zone[C].clone(), by_zone[D].clone()];
        for vm in &lost {
            sim.fault(&["delete-instance", vm]);
        }
        assert!(
            sim.try_ssh(
                &survivor,
                &["etcdctl", "endpoint", "health", "--command-timeout=1s"]
            )
            .is_err(),
            "[{client}] etcd must have lost quorum"
        );

        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(
            plan.code,
            Some(2),
            "[{client}] plan must see the loss:\n{plan}"
        );
        for vm in &lost {
            plan.assert_contains(&format!(
                "The VM of replica {vm} is gone; its etcd data disk is not"
            ));
        }
        assert!(
            !plan.stdout.contains("must be replaced"),
            "[{client}] VMs with their data disks are rebuilt, not replaced:\n{plan}"
        );

        sim.requests(true);
        ws.apply();
        // The rebuilds made VMs and touched no disk: each came back on its own.
        let log = sim.requests(false);
        let mutations: Vec<String> = log["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["method"].as_str() != Some("GET"))
            .filter_map(|e| e["api"].as_str().map(str::to_string))
            .filter(|api| !api.contains("Operations."))
            .collect();
        assert!(
            !mutations.iter().any(|m| m.starts_with("compute.disks.")),
            "[{client}] a data disk was touched: {mutations:?}"
        );

        check(client, &ws, &sim, 3);
        let now = replicas_by_zone(&ws);
        assert_eq!(now, by_zone, "[{client}] the same replicas, by name");
        for vm in now.values() {
            assert_eq!(
                member_ids(&sim, vm),
                before,
                "[{client}] the same members seen from {vm}: none added or removed"
            );
            assert_eq!(key_count(&sim, vm), KEYS, "[{client}] keys seen from {vm}");
        }
    });
}
