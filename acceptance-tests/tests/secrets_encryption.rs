//! Secrets encrypted at rest (issue #31): a cluster created with `secrets_encryption_key`, under both clients
//! against ha-sim (whose VMs run the masters' startup contract, kube-apiserver's flags judged by its own rules) and
//! fake-gcs-server. The key is a Secret Manager version the user made with `gcloud secrets` against ha-sim.
//!
//! - A version that does not exist is refused at plan, naming it, before anything is made.
//! - Two replicas come up healthy; each master's API server is given the configuration in its own secret: the
//!   key is in neither instance metadata (`gcloud compute instances describe`) nor Terraform state, and only the
//!   file on the VM (0600) holds it.
//! - The second join's snapshot records the key's name (`ha-secrets-key`), and a new cluster that would restore
//!   it without that key is refused at plan.
//! - Changing the key of the running cluster is refused at plan, naming the attribute; the next plan with the
//!   key it was made with is empty.
//! - Imported after its state is lost, the cluster's state names its masters' key by name: a configuration
//!   without a version, or with one holding another key, is refused naming it; a version holding the same key is
//!   taken with no roll, and the cluster passes the full check.

use std::time::Duration;

use acceptance_tests::walk::{
    check, replicas_by_zone, set_vars, walk_config, with_storage, write_keys,
};
use acceptance_tests::{FakeGcs, Sim, Workspace, for_each_client};
use base64::Engine as _;

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const BUCKET: &str = "ha-encrypted";
/// The key, as the user's `head -c 32 /dev/urandom` would make it; fixed so the test can look for it.
const KEY: &[u8; 32] = b"an-etcd-secrets-key-of-32-bytes!";

fn config(sim: &Sim, gcs: &FakeGcs, key: &str, restore: &str) -> String {
    with_storage(
        walk_config(sim),
        gcs,
        &format!(
            "  secrets_encryption_key    = \"{key}\"\n  backup {{\n    bucket = \"{BUCKET}\"\n  }}\n{restore}"
        ),
    )
}

/// Every way the key could be written where it does not belong: raw, and as the configuration's base64.
fn holds_key(text: &str) -> bool {
    let b64 = base64::engine::general_purpose::STANDARD.encode(KEY);
    text.contains(std::str::from_utf8(KEY).unwrap()) || text.contains(&b64)
}

#[test]
fn a_cluster_made_with_a_key_encrypts_secrets_and_keeps_the_key_out_of_metadata_and_state() {
    for_each_client(|client| {
        let gcs = FakeGcs::start(&format!("encrypted-{client}"));
        gcs.create_bucket(BUCKET);
        let sim = Sim::start(&format!("encrypted-{client}"));
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("key");
        std::fs::write(&key_file, KEY).unwrap();
        sim.gcloud(&[
            "secrets",
            "create",
            "etcd-secrets-key",
            "--replication-policy=automatic",
            &format!("--data-file={}", key_file.display()),
        ])
        .unwrap_or_else(|e| panic!("[{client}] the key's secret: {e}"));
        let version = "projects/walk/secrets/etcd-secrets-key/versions/1";

        let ws = Workspace::new(client, "encrypted").with_timeout(Duration::from_secs(300));
        // A version that is not there: refused at plan, naming it.
        let missing = "projects/walk/secrets/etcd-secrets-key/versions/2";
        ws.write_main_tf(&config(&sim, &gcs, missing, ""));
        ws.init();
        set_vars(&ws, &[B], &[]);
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains(&format!(
                "secrets_encryption_key {missing}: no such secret version"
            ));

        ws.write_main_tf(&config(&sim, &gcs, version, ""));
        ws.apply();
        // Keys first, so the second join's snapshot has data and `check` finds every key from both members.
        let first = replicas_by_zone(&ws)[B].clone();
        write_keys(&sim, &first);
        set_vars(&ws, &[B, C], &[]);
        ws.apply();
        check(client, &ws, &sim, 2);
        let second = replicas_by_zone(&ws)[C].clone();

        // Where the key is, and where it is not.
        assert!(
            !holds_key(&ws.read_file("terraform.tfstate")),
            "[{client}] the key is in Terraform state"
        );
        for (zone, vm) in replicas_by_zone(&ws) {
            let described = sim
                .gcloud(&["compute", "instances", "describe", &vm, "--zone", &zone])
                .unwrap_or_else(|e| panic!("[{client}] {e}"));
            let described = described.to_string();
            assert!(
                !holds_key(&described),
                "[{client}] {vm}'s metadata holds the key"
            );
            assert!(
                described.contains(
                    "--encryption-provider-config=/etc/srv/kubernetes/encryption-config.yaml"
                ),
                "[{client}] {vm}'s API server is not given the configuration"
            );
            // The sim keeps a guest's `/` under the VM's `rootfs/` (docs/master-config.md §7).
            let file = "rootfs/etc/srv/kubernetes/encryption-config.yaml";
            let mode = sim.ssh(&vm, &["stat", "-c", "%a", file]);
            assert_eq!(
                mode.trim(),
                "600",
                "[{client}] {vm}'s configuration file's mode"
            );
            let config = sim.ssh(&vm, &["cat", file]);
            assert!(
                holds_key(&config) && config.contains("secretbox") && config.contains("identity"),
                "[{client}] {vm}'s configuration:\n{config}"
            );
        }

        // The second join's snapshot names the key its Secrets need.
        let snapshots = gcs.list(BUCKET, "walk/");
        let snapshot = snapshots
            .iter()
            .max_by_key(|o| o.name.clone())
            .unwrap_or_else(|| panic!("[{client}] the second join took no snapshot"));
        let named = snapshot.metadata.get("ha-secrets-key").cloned();
        assert!(
            named
                .as_deref()
                .is_some_and(|n| n.starts_with("ha-") && n.len() == 19),
            "[{client}] the snapshot's metadata: {:?}",
            snapshot.metadata
        );
        assert!(!holds_key(&format!("{:?}", snapshot.metadata)));

        // A new cluster (another project, its own sim) restoring it without the key: refused at plan.
        let other_sim = Sim::start(&format!("encrypted-restore-{client}"));
        let other = Workspace::new(client, "encrypted-restore");
        let restore = format!(
            "  restore {{\n    source     = \"snapshot\"\n    generation = 1\n    snapshot   = \"gs://{BUCKET}/{}\"\n  }}\n",
            snapshot.name
        );
        let plain = with_storage(
            walk_config(&other_sim),
            &gcs,
            &format!(
                "  backup {{\n    bucket = \"{BUCKET}\"\n    prefix = \"other\"\n  }}\n{restore}"
            ),
        );
        other.write_main_tf(&plain);
        other.init();
        set_vars(&other, &[B], &[]);
        other
            .run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("encrypted with a key this cluster does not hold")
            .assert_contains(named.as_deref().unwrap());

        // The running cluster keeps its key: another version is refused at plan, and its own plans empty.
        sim.gcloud(&[
            "secrets",
            "versions",
            "add",
            "etcd-secrets-key",
            &format!("--data-file={}", key_file.display()),
        ])
        .unwrap_or_else(|e| panic!("[{client}] a second version: {e}"));
        ws.write_main_tf(&config(&sim, &gcs, missing, ""));
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("secrets_encryption_key cannot change the key of a running cluster");
        ws.write_main_tf(&config(&sim, &gcs, version, ""));
        assert_eq!(ws.plan_detailed_exitcode(), 0, "[{client}] not converged");

        // The state is lost and the cluster imported: its masters' key is known by name only, so a configuration
        // without a version is refused naming it, one whose key differs is refused, and one that holds the very
        // key (version 2, the same bytes) is taken with no roll.
        ws.run(&["state", "rm", "ha_master_cluster.c", "ha_master_replica.r"])
            .assert_success();
        ws.run(&[
            "import",
            "-input=false",
            "-no-color",
            "ha_master_cluster.c",
            "walk/europe-west1/walk",
        ])
        .assert_success();
        for (zone, vm) in [(B, &first), (C, &second)] {
            ws.run(&[
                "import",
                "-input=false",
                "-no-color",
                &format!("ha_master_replica.r[\"{zone}\"]"),
                &format!("walk/{zone}/{vm}"),
            ])
            .assert_success();
        }
        let unset = with_storage(
            walk_config(&sim),
            &gcs,
            &format!("  backup {{\n    bucket = \"{BUCKET}\"\n  }}\n"),
        );
        ws.write_main_tf(&unset);
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("must name the key this cluster's masters encrypt with")
            .assert_contains(named.as_deref().unwrap());
        let other_key = dir.path().join("other-key");
        std::fs::write(&other_key, [7u8; 32]).unwrap();
        sim.gcloud(&[
            "secrets",
            "versions",
            "add",
            "etcd-secrets-key",
            &format!("--data-file={}", other_key.display()),
        ])
        .unwrap_or_else(|e| panic!("[{client}] a third version: {e}"));
        let third = "projects/walk/secrets/etcd-secrets-key/versions/3";
        ws.write_main_tf(&config(&sim, &gcs, third, ""));
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("holds another key than the masters encrypt with")
            .assert_contains(named.as_deref().unwrap());
        ws.write_main_tf(&config(&sim, &gcs, missing, ""));
        let plan = ws.plan();
        assert!(
            !plan.stdout.contains("will be rolled"),
            "[{client}] adopting the masters' key rolls nothing:\n{}",
            plan.stdout
        );
        ws.apply();
        check(client, &ws, &sim, 2);
    });
}
