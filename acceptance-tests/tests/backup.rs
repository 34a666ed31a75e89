//! Backups before every change that touches etcd (issue #11), under both clients, against a real Cloud Storage
//! emulator (fake-gcs-server) and ha-sim with real etcd. A cluster with a `backup` block holding 1,000 keys grows,
//! rolls and shrinks: each plan says a backup will be taken, each change leaves a snapshot in the bucket that
//! etcd's own `etcdutl` reads back with every key, old snapshots are pruned to `keep`, and `last_backup` names
//! the newest after a refresh. With a bucket that does not exist, a grow is refused before anything moves, with
//! a sentence that names the bucket. With every VM and disk deleted, plan and apply refuse to found an empty etcd
//! over the cluster's data, naming the newest snapshot (#32), and so does the apply of a grow's plan saved before
//! the loss; `restore { source = "empty" }` starts it empty on
//! purpose, and the pre-loss snapshot is still in the bucket afterwards.

use std::time::Duration;

use acceptance_tests::gcs::snapshot_status;
use acceptance_tests::storage_faults::StorageFaults;
use acceptance_tests::walk::{
    check, delete_vm_and_disk, member_names, replicas_by_zone, set_vars, set_zones, walk_config,
    with_storage_at, write_keys, write_many_keys,
};
use acceptance_tests::{FakeGcs, Sim, for_each_client};

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const D: &str = "europe-west1-d";
const BUCKET: &str = "ha-backups";
const PREFIX: &str = "clusters/walk/";
const KEYS: usize = 1000;

/// The customer-managed key the snapshots are encrypted with. The emulator keeps no such thing, so the test reads
/// it from the uploads the proxy carried.
const KMS_KEY: &str =
    "projects/walk-project/locations/europe-west1/keyRings/etcd/cryptoKeys/snapshots";

/// The walk-through with the provider's storage calls sent to `storage` (the proxy in front of the emulator) and
/// the cluster backing up to `bucket`, encrypted with [`KMS_KEY`].
fn config(sim: &Sim, storage: &str, bucket: &str) -> String {
    config_with(sim, storage, bucket, "")
}

/// [`config`] with more of the cluster's blocks (`restore`).
fn config_with(sim: &Sim, storage: &str, bucket: &str, more: &str) -> String {
    with_storage_at(
        walk_config(sim),
        storage,
        &format!(
            "  backup {{\n    bucket       = \"{bucket}\"\n    prefix       = \"clusters\"\n    keep         = 3\n    kms_key_name = \"{KMS_KEY}\"\n  }}\n{more}"
        ),
    )
}

/// The uploads the proxy carried (JSON API media and multipart uploads), each with its `kmsKeyName`.
fn uploads(proxy: &StorageFaults) -> Vec<(String, Option<String>)> {
    proxy
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("POST /upload/storage/v1/b/"))
        .map(|r| {
            let key = r
                .split(['?', '&'])
                .find_map(|kv| kv.strip_prefix("kmsKeyName="))
                .map(|k| k.replace("%2F", "/").replace("%2f", "/"));
            (r, key)
        })
        .collect()
}

/// The snapshot `name` as etcd reads it: present, whole, with at least the scenario's keys.
fn assert_restorable(gcs: &FakeGcs, dir: &std::path::Path, name: &str, label: &str) {
    let file = gcs.download(BUCKET, name, dir);
    let status = snapshot_status(&file);
    let keys = status["totalKey"].as_u64().unwrap_or(0);
    assert!(
        keys as usize >= KEYS,
        "[{label}] {name} holds {keys} keys, fewer than the {KEYS} written: {status}"
    );
    assert!(
        status["revision"].as_i64().unwrap_or(0) > 0,
        "[{label}] {status}"
    );
}

#[test]
fn grow_roll_and_shrink_each_leave_a_checked_snapshot_and_a_missing_bucket_stops_a_grow() {
    for_each_client(|client| {
        let label = client.to_string();
        let sim = Sim::start(&format!("backup-{client}"));
        let gcs = FakeGcs::start(&format!("backup-{client}"));
        gcs.create_bucket(BUCKET);
        let proxy = StorageFaults::start(&gcs.origin());
        let storage = proxy.endpoint();
        let ws = acceptance_tests::Workspace::new(client, "backup")
            .with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim, &storage, BUCKET));
        ws.init();
        set_zones(&ws, &[B]);
        ws.apply();
        assert!(
            gcs.list(BUCKET, PREFIX).is_empty(),
            "[{label}] the founding replica has nothing to back up"
        );
        let first = replicas_by_zone(&ws)[B].clone();
        write_keys(&sim, &first);
        write_many_keys(&sim, &first, "backup/", KEYS);

        // Grow: the plan says so, and the join leaves a snapshot holding every key.
        set_zones(&ws, &[B, C]);
        ws.plan().assert_contains(&format!(
            "A backup of etcd is taken before the join of the new replica in {C}"
        ));
        ws.apply();
        let after_grow = gcs.list(BUCKET, PREFIX);
        assert_eq!(after_grow.len(), 1, "[{label}] {after_grow:?}");
        let snap = &after_grow[0];
        assert_eq!(
            snap.metadata.get("ha-cluster").map(String::as_str),
            Some("walk")
        );
        assert!(
            snap.metadata
                .get("ha-before")
                .is_some_and(|b| b.starts_with("join of replica")),
            "[{label}] {:?}",
            snap.metadata
        );
        assert_eq!(snap.metadata.get("ha-sha256").map(String::len), Some(64));
        let dir = tempfile::tempdir().expect("download dir");
        assert_restorable(&gcs, dir.path(), &snap.name, &label);
        // The upload asked for the cluster's key (the one upload so far).
        let sent = uploads(&proxy);
        assert_eq!(sent.len(), 1, "[{label}] {sent:?}");
        assert_eq!(
            sent[0].1.as_deref(),
            Some(KMS_KEY),
            "[{label}] {}",
            sent[0].0
        );

        // Roll: one snapshot before each replica's roll.
        set_vars(&ws, &[B, C], &[("machine_type", "e2-standard-4")]);
        ws.plan()
            .assert_contains("A backup of etcd is taken before the roll of replica");
        ws.apply();
        check(client, &ws, &sim, 2);
        let after_roll = gcs.list(BUCKET, PREFIX);
        assert_eq!(after_roll.len(), 3, "[{label}] {after_roll:?}");
        let rolls = after_roll
            .iter()
            .filter(|o| {
                o.metadata
                    .get("ha-before")
                    .is_some_and(|b| b.starts_with("roll of replica"))
            })
            .count();
        assert_eq!(rolls, 2, "[{label}] {after_roll:?}");

        // Shrink: a fourth snapshot, and the oldest pruned (keep = 3).
        set_vars(&ws, &[B], &[("machine_type", "e2-standard-4")]);
        ws.plan()
            .assert_contains("A backup of etcd is taken before the removal of replica");
        ws.apply();
        let after_shrink = gcs.list(BUCKET, PREFIX);
        assert_eq!(
            after_shrink.len(),
            3,
            "[{label}] pruned to keep = 3: {after_shrink:?}"
        );
        assert!(
            !after_shrink.iter().any(|o| o.name == snap.name),
            "[{label}] the oldest snapshot was pruned"
        );
        // Every snapshot so far went up with the cluster's key.
        let sent = uploads(&proxy);
        assert_eq!(
            sent.len(),
            4,
            "[{label}] a grow, two rolls, a shrink: {sent:?}"
        );
        assert!(
            sent.iter().all(|(_, key)| key.as_deref() == Some(KMS_KEY)),
            "[{label}] {sent:?}"
        );
        let newest = after_shrink.last().expect("a snapshot").clone();
        assert!(newest.metadata["ha-before"].starts_with("removal of replica"));
        assert_restorable(&gcs, dir.path(), &newest.name, &label);

        // `last_backup` shows the newest after a refresh. (Not an output here: an output of it changes after every
        // change that took a backup, which `check`'s empty plan would count.)
        ws.refresh_only();
        let cluster = ws.state_values("ha_master_cluster.c");
        assert_eq!(
            cluster["last_backup"].as_str(),
            Some(format!("gs://{BUCKET}/{}", newest.name).as_str()),
            "[{label}] last_backup"
        );

        // A bucket that does not exist: the grow is refused before etcd or any VM changes.
        ws.write_main_tf(&config(&sim, &storage, "missing-bucket"));
        set_vars(&ws, &[B, C], &[("machine_type", "e2-standard-4")]);
        let refused = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        refused
            .assert_failure()
            .assert_contains("The backup before the join of replica")
            .assert_contains("missing-bucket");
        assert_eq!(
            member_names(&sim, &first).len(),
            1,
            "[{label}] no member was added"
        );
        assert_eq!(
            sim.names("instances").len(),
            1,
            "[{label}] no VM was created: {:?}",
            sim.names("instances")
        );

        // With the bucket back, the grow finishes.
        ws.write_main_tf(&config(&sim, &storage, BUCKET));
        ws.apply();
        check(client, &ws, &sim, 2);

        // A grow planned while the cluster is whole and applied from the saved plan after every VM and data disk
        // was deleted out of band: refused, and nothing left behind. Both clients plan each resource again when
        // they apply a saved plan, so the refusal is the replica's plan check seeing the loss; the join's own
        // check (`ha_ops::restore::check_founding`) stays behind it for a loss during the apply itself, which no
        // scenario reaches yet (taking it out fails no test).
        set_vars(&ws, &[B, C, D], &[("machine_type", "e2-standard-4")]);
        ws.run(&["plan", "-input=false", "-no-color", "-out=grow.tfplan"])
            .assert_success();
        let pre_loss = gcs
            .list(BUCKET, PREFIX)
            .into_iter()
            .map(|o| o.name)
            .max()
            .expect("snapshots before the loss");
        let addresses_before = sim.names("addresses");
        for (zone, vm) in replicas_by_zone(&ws) {
            delete_vm_and_disk(&sim, &zone, &vm);
        }
        ws.run(&["apply", "-input=false", "-no-color", "grow.tfplan"])
            .assert_failure()
            .assert_contains("Cluster walk had data, and this apply would start it empty: refused")
            .assert_contains(&format!("its newest snapshot is gs://{BUCKET}/{pre_loss}"));
        assert!(
            sim.names("instances").is_empty() && sim.names("disks").is_empty(),
            "[{label}] the refused saved plan made a VM or disk: {:?} {:?}",
            sim.names("instances"),
            sim.names("disks")
        );
        assert_eq!(
            sim.names("addresses"),
            addresses_before,
            "[{label}] the refused saved plan left an address behind"
        );
        set_vars(&ws, &[B, C], &[("machine_type", "e2-standard-4")]);

        // Plan and apply of the configuration as it was refuse too, naming the evidence and the newest snapshot,
        // instead of quietly founding a new cluster.
        for command in ["plan", "apply"] {
            let mut args = vec![command, "-input=false", "-no-color"];
            if command == "apply" {
                args.push("-auto-approve");
            }
            ws.run(&args)
                .assert_failure()
                .assert_contains(
                    "Cluster walk had data, and this apply would start it empty: refused",
                )
                .assert_contains("its load balancer exists")
                .assert_contains(&format!("its newest snapshot is gs://{BUCKET}/{pre_loss}"))
                .assert_contains("source = \"empty\"");
        }
        assert!(
            sim.names("instances").is_empty(),
            "[{label}] the refused apply made a VM: {:?}",
            sim.names("instances")
        );

        // Starting empty on purpose: the plan says so and names the snapshot it keeps; the cluster comes back
        // with two voters and no data, and the pre-loss snapshot is still in the bucket.
        ws.write_main_tf(&config_with(
            &sim,
            &storage,
            BUCKET,
            "  restore {\n    source     = \"empty\"\n    generation = 1\n  }\n",
        ));
        let plan = ws.plan();
        plan.assert_contains("Cluster walk starts with a new, empty etcd")
            .assert_contains(&format!("gs://{BUCKET}/{pre_loss}"));
        assert!(
            !plan.stdout.contains("must be replaced"),
            "[{label}] an empty start replaces no replica:\n{plan}"
        );
        ws.apply();
        let by_zone = replicas_by_zone(&ws);
        for vm in by_zone.values() {
            assert_eq!(
                member_names(&sim, vm).len(),
                2,
                "[{label}] members seen from {vm}"
            );
            let keys = acceptance_tests::probe::keys_under(&sim, vm, "walk");
            assert!(keys.is_empty(), "[{label}] keys seen from {vm}: {keys:?}");
        }
        assert_eq!(
            ws.plan_detailed_exitcode(),
            0,
            "[{label}] the plan after the empty start"
        );
        assert!(
            gcs.list(BUCKET, PREFIX).iter().any(|o| o.name == pre_loss),
            "[{label}] {pre_loss} was pruned"
        );
        ws.destroy();
    });
}
