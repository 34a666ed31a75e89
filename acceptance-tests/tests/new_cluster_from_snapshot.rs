//! A new cluster created from another cluster's snapshot (issue #32): the way to another VPC network, which no
//! cluster can move to with its data (docs/guides/network.md). Under both clients, against fake-gcs-server and
//! two ha-sims with real etcd, one per project: the old cluster in the first holds keys, and its second replica's
//! join backs them up. A brand-new cluster in the second sim, on a network and subnetwork of its own, is created with
//! `restore { source = "snapshot", generation = 1, snapshot = "gs://…" }` naming that snapshot. The create's plan names the
//! snapshot; one apply brings up two healthy voters holding every key, the old cluster is untouched, and both
//! clusters' next plans are empty. Once the new cluster has data of its own, a replica's create never restores
//! over it: with its replicas destroyed, the plan that would create them again is refused. Destroyed whole, a new
//! cluster of the same name in the same backup location is refused at its own plan (its first replica would be
//! refused at apply), and plans again once its `backup` block has a prefix of its own.

use std::time::Duration;

use acceptance_tests::walk::{
    check, key_count, replicas_by_zone, set_vars, walk_config, with_storage, write_keys,
    write_many_keys,
};
use acceptance_tests::{FakeGcs, Sim, Workspace, for_each_client};

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const BUCKET: &str = "ha-migrate";
const KEYS: usize = 200;

/// The walk-through backing up under `prefix`, with a `restore` block when one is given.
fn config(sim: &Sim, gcs: &FakeGcs, prefix: &str, restore: &str) -> String {
    with_storage(
        walk_config(sim),
        gcs,
        &format!(
            "  backup {{\n    bucket = \"{BUCKET}\"\n    prefix = \"{prefix}\"\n  }}\n{restore}"
        ),
    )
}

#[test]
fn a_new_cluster_on_another_network_starts_from_another_clusters_snapshot() {
    for_each_client(|client| {
        let gcs = FakeGcs::start(&format!("migrate-{client}"));
        gcs.create_bucket(BUCKET);

        // The old cluster: one replica holds the keys; the second's join backs them up.
        let old_sim = Sim::start(&format!("migrate-old-{client}"));
        let old = Workspace::new(client, "migrate-old").with_timeout(Duration::from_secs(300));
        old.write_main_tf(&config(&old_sim, &gcs, "old", ""));
        old.init();
        set_vars(&old, &[B], &[]);
        old.apply();
        let first = replicas_by_zone(&old)[B].clone();
        write_keys(&old_sim, &first);
        write_many_keys(&old_sim, &first, "migrate/", KEYS);
        set_vars(&old, &[B, C], &[]);
        old.apply();
        let snapshot = gcs
            .list(BUCKET, "old/walk/")
            .into_iter()
            .map(|o| o.name)
            .max()
            .unwrap_or_else(|| panic!("[{client}] the second join took no snapshot"));
        let url = format!("gs://{BUCKET}/{snapshot}");

        // The new cluster, in another project (its own sim) and on a network of its own.
        let new_sim = Sim::start(&format!("migrate-new-{client}"));
        let range = new_sim.spare_subnetwork_range();
        new_sim
            .gcloud(&[
                "compute",
                "networks",
                "subnets",
                "create",
                "masters",
                "--network=prod",
                "--region=europe-west1",
                &format!("--range={range}"),
            ])
            .unwrap_or_else(|e| panic!("[{client}] subnetwork: {e}"));
        let new = Workspace::new(client, "migrate-new").with_timeout(Duration::from_secs(300));
        let restore = format!(
            "  restore {{\n    source     = \"snapshot\"\n    generation = 1\n    snapshot   = \"{url}\"\n  }}\n"
        );
        new.write_main_tf(&config(&new_sim, &gcs, "new", &restore));
        new.init();
        set_vars(
            &new,
            &[B, C],
            &[("network", "prod"), ("subnetwork", "masters")],
        );
        let plan = new.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success()
            .assert_contains(&format!("etcd will be restored from the snapshot {url}"));
        new.apply();

        check(client, &new, &new_sim, 2);
        for vm in replicas_by_zone(&new).values() {
            assert_eq!(
                key_count(&new_sim, vm, "migrate/"),
                KEYS,
                "[{client}] keys of the snapshot seen from {vm}"
            );
            assert_eq!(
                new_sim.instance(vm)["networkInterfaces"][0]["network"]
                    .as_str()
                    .and_then(|n| n.rsplit('/').next()),
                Some("prod"),
                "[{client}] {vm}'s network"
            );
        }
        // A replica's create never restores over a cluster with data of its own: with every replica of the new
        // cluster destroyed, its own snapshots (its second join took one) say it had data, and the create that
        // would found it again is refused at plan, its `restore` block notwithstanding.
        new.run(&[
            "destroy",
            "-target=ha_master_replica.r",
            "-auto-approve",
            "-input=false",
            "-no-color",
        ])
        .assert_success();
        let plan = new.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure()
            .assert_contains(
                "Cluster walk had data of its own, so its `restore` block does not apply to this create: refused",
            )
            .assert_contains("its newest snapshot is gs://ha-migrate/new/walk/")
            .assert_contains("raise `restore.generation` by one");

        // A new cluster of the same name whose backup location holds those snapshots: the first replica's create
        // would refuse to restore, so the cluster's own plan refuses, naming the way that works: a prefix of its
        // own, with the snapshot named in `restore.snapshot`.
        // Both clients' destroy plans the configuration first to refresh it, and that plan is the refused one:
        // `-refresh=false` skips it (docs/guides/troubleshooting.md).
        new.run(&[
            "destroy",
            "-refresh=false",
            "-auto-approve",
            "-input=false",
            "-no-color",
        ])
        .assert_success();
        let plan = new.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure()
            .assert_contains(
                "Cluster walk's backup location already holds snapshots of a cluster of that name",
            )
            .assert_contains("gs://ha-migrate/new/walk/")
            .assert_contains("give its `backup` block a `prefix`");
        new.write_main_tf(&config(&new_sim, &gcs, "new-2", &restore));
        let plan = new.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success()
            .assert_contains(&format!("etcd will be restored from the snapshot {url}"));

        // The old cluster is as it was, and its snapshots are where they were.
        check(client, &old, &old_sim, 2);
        assert!(
            gcs.list(BUCKET, "old/walk/")
                .iter()
                .any(|o| o.name == snapshot),
            "[{client}] the snapshot the new cluster came from is kept"
        );
    });
}
