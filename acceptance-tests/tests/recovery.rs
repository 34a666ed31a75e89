//! A cluster that lost etcd quorum comes back with one apply (issue #11, the part that needs no snapshot). Under
//! both clients on ha-sim with real etcd: three replicas hold 1,000 keys, then two VMs are deleted out of band
//! with their etcd data disks kept, so one member of three runs and etcd has no quorum. The plan shows both
//! rebuilt on their disks (nothing replaced); one apply brings quorum back with the same member ids (no member
//! added or removed), every key is there, and the next plan is empty.

use std::collections::BTreeSet;
use std::time::Duration;

use acceptance_tests::faults::Event;
use acceptance_tests::gcs::snapshot_status;
use acceptance_tests::walk::{
    check, delete_vm_and_disk, edit_config, replicas_by_zone, set_zones, walk_config, with_storage,
    write_keys,
};
use acceptance_tests::{FakeGcs, Sim, Workspace, for_each_client};
use serde_json::Value;

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const D: &str = "europe-west1-d";

/// How many keys the scenario writes before the loss, under `recover/`.
const KEYS: usize = 1000;
const BUCKET: &str = "ha-recovery";

fn write_many_keys(sim: &Sim, vm: &str) {
    acceptance_tests::walk::write_many_keys(sim, vm, "recover/", KEYS);
}

fn key_count(sim: &Sim, vm: &str) -> usize {
    acceptance_tests::walk::key_count(sim, vm, "recover/")
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
            sim.event(Event::DeleteInstance {
                instance: vm.to_string(),
            });
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

/// The walk-through's configuration, with the cluster's `restore` block at `generation` when given.
fn config_with_restore(sim: &Sim, generation: Option<u32>) -> String {
    let base = walk_config(sim);
    match generation {
        None => base,
        Some(g) => edit_config(
            base,
            &[(
                "  kubernetes_version        = var.kubernetes_version\n",
                &format!(
                    "  kubernetes_version        = var.kubernetes_version\n  restore {{\n    source     = \"surviving_member\"\n    generation = {g}\n  }}\n"
                ),
            )],
        ),
    }
}

#[test]
fn two_vms_deleted_with_their_disks_recover_from_the_survivor_with_one_apply() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("recovery-survivor-{client}"));
        // Backing up: the recovery snapshots the survivor first.
        let gcs = FakeGcs::start(&format!("recovery-survivor-{client}"));
        gcs.create_bucket(BUCKET);
        let config = |generation| {
            with_storage(
                config_with_restore(&sim, generation),
                &gcs,
                &format!("  backup {{\n    bucket = \"{BUCKET}\"\n  }}\n"),
            )
        };
        let ws = Workspace::new(client, "recovery-survivor").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(None));
        ws.init();
        set_zones(&ws, &[B, C, D]);
        ws.apply();
        let by_zone = replicas_by_zone(&ws);
        let survivor = by_zone[B].clone();
        write_keys(&sim, &survivor);
        write_many_keys(&sim, &survivor);
        let before = member_ids(&sim, &survivor);

        // Two of three replicas lost for good: VMs and data disks. One member of three runs, with every key.
        for zone in [C, D] {
            delete_vm_and_disk(&sim, zone, &by_zone[zone]);
        }
        assert!(
            sim.try_ssh(
                &survivor,
                &["etcdctl", "endpoint", "health", "--command-timeout=1s"]
            )
            .is_err(),
            "[{client}] etcd must have lost quorum"
        );

        // Without the opt-in, plan refuses and names the way out.
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
        plan.assert_contains("etcd has lost quorum");
        plan.assert_contains("surviving_member");

        // Opted in: the plan says what the recovery does, and replaces nothing (a replacement's delete would run
        // before the cluster's recovery, when no member can be removed).
        ws.write_main_tf(&config(Some(1)));
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(plan.code, Some(2), "[{client}] plan:\n{plan}");
        plan.assert_contains(&format!(
            "etcd has lost quorum and will be recovered from replica {survivor}"
        ));
        for zone in [C, D] {
            plan.assert_contains(&format!(
                "Replica {} rejoins etcd as a new member after the recovery",
                by_zone[zone]
            ));
        }
        assert!(
            !plan.stdout.contains("must be replaced"),
            "[{client}] a recovery replaces no replica:\n{plan}"
        );
        let change = format!("recovery of etcd from replica {survivor}");
        plan.assert_contains(&format!("A backup of etcd is taken before the {change}"));

        // Killed once the survivor runs with `--force-new-cluster`: the next plan finishes the recovery (its VM
        // must not keep the flag), and the next apply does.
        let mut child = ws.spawn(
            &["apply", "-input=false", "-no-color", "-auto-approve"],
            "recovery-killed",
        );
        let until = std::time::Instant::now() + Duration::from_secs(120);
        // The survivor's VM is gone for a moment between the recovery's delete and its create.
        let forced = |sim: &Sim| {
            sim.find_instance(&survivor)
                .is_some_and(|vm| vm["labels"]["ha-master-build"] == "force-new-cluster")
        };
        while !forced(&sim) {
            assert!(
                std::time::Instant::now() < until,
                "[{client}] the survivor never ran with --force-new-cluster"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "[{client}] the apply ended before the forced start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: kill(2) with the negated pid of the process group `spawn` created for this child.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        child.wait().unwrap();
        // The survivor's data was snapshotted before the forced start, with every key, though it had no leader.
        let taken: Vec<_> = gcs
            .list(BUCKET, "")
            .into_iter()
            .filter(|o| o.metadata.get("ha-before") == Some(&change))
            .collect();
        assert_eq!(
            taken.len(),
            1,
            "[{client}] one backup before the recovery: {taken:?}"
        );
        let dir = tempfile::tempdir().expect("download dir");
        let status = snapshot_status(&gcs.download(BUCKET, &taken[0].name, dir.path()));
        assert!(
            status["totalKey"].as_u64().unwrap_or(0) as usize >= KEYS,
            "[{client}] the survivor's snapshot holds every key: {status}"
        );
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(
            plan.code,
            Some(2),
            "[{client}] plan after the kill:\n{plan}"
        );
        plan.assert_contains(&format!(
            "finishing the recovery of etcd from replica {survivor}"
        ));

        ws.apply();
        assert_ne!(
            sim.instance(&survivor)["labels"]["ha-master-build"],
            "force-new-cluster",
            "[{client}] the survivor kept --force-new-cluster"
        );
        check(client, &ws, &sim, 3);
        assert_eq!(
            replicas_by_zone(&ws),
            by_zone,
            "[{client}] the same replicas"
        );
        let after = member_ids(&sim, &survivor);
        assert_eq!(
            after.intersection(&before).count(),
            1,
            "[{client}] the survivor keeps its member id, the others are new: {before:?} -> {after:?}"
        );
        for vm in by_zone.values() {
            assert_eq!(key_count(&sim, vm), KEYS, "[{client}] keys seen from {vm}");
        }

        // Asking again on a healthy cluster is refused: a recovery drops members.
        ws.write_main_tf(&config(Some(2)));
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
        plan.assert_contains("etcd has quorum: there is nothing to recover");
        ws.write_main_tf(&config(Some(1)));
    });
}
