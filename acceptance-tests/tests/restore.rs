//! Restoring a cluster that lost every replica from its newest backup (issue #11), under both clients, against
//! a real Cloud Storage emulator (fake-gcs-server) and ha-sim with real etcd. Three replicas hold 1,000 keys, and
//! the third's join took a snapshot holding them; one more key is written after it. Every VM and data disk is
//! then deleted. With `restore { source = "snapshot" }` raised, the plan names the snapshot it restores and
//! warns what is lost; one apply brings back three healthy voters (the first replica restores the snapshot in
//! its etcd pod's init containers, fetched by the VM itself, the others join it), every key of the snapshot is
//! there and the later one is not, and the next plan is empty. Before that, the same restore of other bytes put
//! under the snapshot's name is refused by the VM before etcd sees them (the SHA-256 its backup recorded).
//!
//! Under Terraform the cluster runs etcd 3.5 (3.5.24; Debian trixie's 3.5.16 in the sim), which restores with
//! `--bump-revision` and `--mark-compacted`: the revision after the restore exceeds the one before the loss, and a
//! watch from a pre-loss revision is refused as compacted instead of resuming. Under OpenTofu it runs etcd 3.4,
//! which has neither flag: the restore still works, and the plan says what it does not do for watchers. (One
//! etcd per client keeps the scenario's time; each client still runs the whole restore.)

use std::time::Duration;

use acceptance_tests::walk::{
    check, delete_vm_and_disk, edit_config, key_count, replicas_by_zone, set_vars, walk_config,
    with_storage, write_keys, write_many_keys,
};
use acceptance_tests::{Client, FakeGcs, Sim, for_each_client};

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const D: &str = "europe-west1-d";
const BUCKET: &str = "ha-restore";
const PREFIX: &str = "clusters/walk/";
const KEYS: usize = 1000;

/// The walk-through with the provider pointed at the emulator, backing up to the bucket, and the `restore`
/// block at `generation` when given.
fn config(sim: &Sim, gcs: &FakeGcs, generation: Option<u32>) -> String {
    let restore = generation.map_or(String::new(), |g| {
        format!("  restore {{\n    source     = \"snapshot\"\n    generation = {g}\n  }}\n")
    });
    with_storage(
        walk_config(sim),
        gcs,
        &format!(
            "  backup {{\n    bucket = \"{BUCKET}\"\n    prefix = \"clusters\"\n  }}\n{restore}"
        ),
    )
}

#[test]
fn a_cluster_that_lost_every_vm_and_disk_comes_back_from_its_newest_snapshot_with_one_apply() {
    for_each_client(|client| {
        let label = client.to_string();
        // The cluster's etcd_version, and whether its restore bumps the revision.
        let (etcd, bumps) = match client {
            Client::Terraform => ("3.5", true),
            Client::OpenTofu => ("3.4", false),
        };
        let sim = Sim::start(&format!("restore-{client}"));
        let gcs = FakeGcs::start(&format!("restore-{client}"));
        gcs.create_bucket(BUCKET);
        let ws = acceptance_tests::Workspace::new(client, "restore")
            .with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim, &gcs, None));
        ws.init();
        set_vars(&ws, &[B, C], &[("etcd_version", etcd)]);
        ws.apply();
        let first = replicas_by_zone(&ws)[B].clone();
        write_keys(&sim, &first);
        write_many_keys(&sim, &first, "restore/", KEYS);

        // The third replica's join backs up first: that snapshot holds every key.
        set_vars(&ws, &[B, C, D], &[("etcd_version", etcd)]);
        ws.apply();
        let newest = gcs
            .list(BUCKET, PREFIX)
            .into_iter()
            .map(|o| o.name)
            .max()
            .expect("the join took a snapshot");
        // Written after the snapshot: a restore cannot bring it back.
        sim.ssh(&first, &["etcdctl", "put", "after-backup/key", "lost"]);
        let revision_before = revision(&sim, &first);

        let by_zone = replicas_by_zone(&ws);
        for (zone, vm) in &by_zone {
            delete_vm_and_disk(&sim, zone, vm);
        }

        // Opted in: the plan names the snapshot, says what is lost, and replaces no replica.
        ws.write_main_tf(&config(&sim, &gcs, Some(1)));
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(plan.code, Some(2), "[{label}] plan:\n{plan}");
        plan.assert_contains(&format!(
            "etcd will be restored from the snapshot gs://{BUCKET}/{newest}"
        ))
        .assert_contains("Everything written after the snapshot was taken is lost")
        .assert_contains(if bumps {
            "moves etcd's revision on by 1000000000"
        } else {
            "etcd 3.4 cannot move its revision on when it restores"
        });
        for vm in by_zone.values() {
            plan.assert_contains(&format!(
                "Replica {vm} comes back from the cluster's snapshot"
            ));
        }
        assert!(
            !plan.stdout.contains("must be replaced"),
            "[{label}] a restore replaces no replica:\n{plan}"
        );

        let restoring = refuse_bytes_the_backup_did_not_record(&ws, &sim, &gcs, &newest, &by_zone);

        // The refused restore left generation 1 unspent, and the first replica has restored with it since, from
        // the good copy: the same configuration, without the short timeout, brings the others back as new members.
        ws.write_main_tf(&restoring);
        ws.apply();
        // Three healthy voters, the same replicas by name, and an empty plan.
        check(client, &ws, &sim, 3);
        assert_eq!(
            replicas_by_zone(&ws),
            by_zone,
            "[{label}] the same replicas"
        );
        for vm in by_zone.values() {
            assert_eq!(
                key_count(&sim, vm, "restore/"),
                KEYS,
                "[{label}] keys of the snapshot seen from {vm}"
            );
            assert_eq!(
                sim.ssh(vm, &["etcdctl", "get", "after-backup/key"]).trim(),
                "",
                "[{label}] a key written after the snapshot, seen from {vm}"
            );
            assert_ne!(
                sim.instance(vm)["labels"]["ha-master-build"],
                "restore-snapshot",
                "[{label}] {vm} still boots with the restore"
            );
            if !bumps {
                continue;
            }
            let after = revision(&sim, vm);
            assert!(
                after > revision_before,
                "[{label}] {vm}: revision {after} after the restore, {revision_before} before the loss"
            );
            // A watcher that held the pre-loss revision is told to relist, not resumed (etcdctl exits non-zero);
            // `timeout` ends a watch that would wait for that revision to come round again.
            let rev = format!("--rev={revision_before}");
            let watched = sim.try_ssh(
                vm,
                &[
                    "timeout", "20", "etcdctl", "watch", &rev, "restore/", "--prefix",
                ],
            );
            assert!(
                watched
                    .as_ref()
                    .is_err_and(|e| e.contains("required revision has been compacted")),
                "[{label}] a watch from revision {revision_before} on {vm}: {watched:?}"
            );
        }
        ws.destroy();
    });
}

/// Someone with write access to the bucket puts other bytes under the snapshot's name, keeping its metadata. The
/// restore runs and fails: the restoring VM's fetch compares the bytes with the SHA-256 the backup recorded and
/// refuses them, so its etcd never starts (the etcd log says why), and the apply fails naming the init
/// containers. The user then points `restore.snapshot` at a good copy of the snapshot, and does nothing by hand:
/// the next plan shows the restore again for every replica (the failed attempt did not spend the generation),
/// naming the one whose VM that attempt left, and the next apply deletes that VM (which would go on fetching the
/// tampered object) and restores from the copy. Returns that configuration. The failed apply and the restoring one target
/// the first replica alone, so it is the one that restores (with all three, the others wait for the cluster's lock
/// and the one that gets it may clear the failed VM, logs and all, before the test reads them); the caller's apply
/// joins the others.
fn refuse_bytes_the_backup_did_not_record(
    ws: &acceptance_tests::Workspace,
    sim: &Sim,
    gcs: &FakeGcs,
    newest: &str,
    by_zone: &std::collections::BTreeMap<String, String>,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(gcs.download(BUCKET, newest, dir.path())).unwrap();
    let recorded = gcs
        .list(BUCKET, newest)
        .into_iter()
        .find(|o| o.name == newest)
        .expect("the snapshot is listed")
        .metadata;
    assert!(recorded.contains_key("ha-sha256"), "{recorded:?}");
    gcs.put(
        BUCKET,
        newest,
        b"not the snapshot the backup took, but other bytes under its name",
        &recorded,
    );

    // A short update timeout: the restoring replica waits for an etcd that never starts.
    let short = edit_config(
        config(sim, gcs, Some(1)),
        &[(
            "  zone     = each.value\n",
            "  zone     = each.value\n  timeouts {\n    update = \"40s\"\n  }\n",
        )],
    );
    ws.write_main_tf(&short);
    let first = &by_zone[B];
    let replica = format!("ha_master_replica.r[\"{B}\"]");
    let target = format!("-target={replica}");
    let failed = ws.run(&[
        "apply",
        "-input=false",
        "-no-color",
        "-auto-approve",
        &target,
    ]);
    assert!(
        !failed.success(),
        "a tampered snapshot was restored:\n{failed}"
    );
    failed.assert_contains("did not answer after restoring the snapshot");

    let mut logs = String::new();
    for zone in by_zone.keys() {
        for vm in std::fs::read_dir(sim.state_dir().join("vms").join(zone))
            .into_iter()
            .flatten()
        {
            logs +=
                &std::fs::read_to_string(vm.unwrap().path().join("etcd.log")).unwrap_or_default();
        }
    }
    assert!(
        logs.contains("init container fetch-snapshot failed")
            && logs.contains(&format!("not the {} recorded", recorded["ha-sha256"]))
            && logs.contains("refusing to restore it"),
        "the etcd logs say nothing of the refused snapshot:\n{logs}"
    );
    assert!(
        !logs.contains("init container restore-snapshot starting"),
        "etcd's restore ran on refused bytes:\n{logs}"
    );
    // A good copy, kept apart from the cluster's backups, with the metadata the backup wrote.
    let copy = format!("kept-by-hand/{}", newest.rsplit('/').next().unwrap());
    gcs.put(BUCKET, &copy, &good, &recorded);
    let restoring = edit_config(
        config(sim, gcs, Some(1)),
        &[(
            "    generation = 1\n",
            &format!("    generation = 1\n    snapshot   = \"gs://{BUCKET}/{copy}\"\n"),
        )],
    );

    // What the attempt left: the restoring VM, whose etcd never answers.
    assert_eq!(
        sim.instance(first)["labels"]["ha-master-build"],
        "restore-snapshot",
        "the refused restore's VM"
    );
    ws.write_main_tf(&restoring);
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(2),
        "plan after the refused restore:\n{plan}"
    );
    for vm in by_zone.values() {
        plan.assert_contains(&format!(
            "Replica {vm} comes back from the cluster's snapshot"
        ));
    }
    plan.assert_contains(&format!(
        "Replica {first} comes back from the cluster's snapshot, again"
    ));
    let said = plan.combined();
    assert!(
        !said.contains("survives") && !said.contains("must be replaced"),
        "a failed attempt's leftovers are cleared, not refused or replaced:\n{plan}"
    );
    // The first replica deletes its failed VM and restores the copy; its etcd answers with the snapshot's keys.
    ws.apply_target(&replica);
    assert_eq!(
        key_count(sim, first, "restore/"),
        KEYS,
        "keys after the restore"
    );
    restoring
}

/// The revision `vm`'s etcd is at (`etcdctl endpoint status`'s header).
fn revision(sim: &Sim, vm: &str) -> u64 {
    let status: serde_json::Value =
        serde_json::from_str(&sim.ssh(vm, &["etcdctl", "endpoint", "status", "-w", "json"]))
            .expect("endpoint status is JSON");
    status[0]["Status"]["header"]["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("no revision in {status}"))
}
