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
//! - Changing the key of the running cluster in one step is refused at plan, naming the attribute; the next plan
//!   with the key it was made with is empty. The stages that do change it are the second scenario.
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
            .assert_contains(
                "secrets_encryption_key cannot change to a key before every API server reads it",
            );
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

/// The walk-through's cluster with its Secrets encryption keys as given, backed up to [`BUCKET`] under `rekey/`.
fn staged(sim: &Sim, gcs: &FakeGcs, writes: Option<&str>, reads: &[&str]) -> String {
    let mut block = String::new();
    if let Some(w) = writes {
        block += &format!("  secrets_encryption_key    = \"{w}\"\n");
    }
    if !reads.is_empty() {
        let list: Vec<String> = reads.iter().map(|r| format!("\"{r}\"")).collect();
        block += &format!("  secrets_decryption_keys   = [{}]\n", list.join(", "));
    }
    block += &format!("  backup {{\n    bucket = \"{BUCKET}\"\n    prefix = \"rekey\"\n  }}\n");
    with_storage(walk_config(sim), gcs, &block)
}

/// The keys each master's API server is given, from the configuration file on the VM: `secretbox`'s key names
/// in order, with `identity` where it stands (`ha-…,ha-…;identity`, or `identity;ha-…` while nothing is written
/// with a key).
fn configured(sim: &Sim, vm: &str) -> String {
    let text = sim.ssh(
        vm,
        &["cat", "rootfs/etc/srv/kubernetes/encryption-config.yaml"],
    );
    let config: serde_json::Value = serde_norway::from_str(&text)
        .unwrap_or_else(|e| panic!("{vm}'s configuration: {e}\n{text}"));
    config["resources"][0]["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| match p.get("secretbox") {
            Some(b) => b["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(","),
            None => "identity".to_string(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// A running cluster goes from one key to another in the guide's stages (docs/guides/secrets.md), under both
/// clients, two replicas rolling at each stage:
/// - the new key written straight away is refused at plan, naming the stage to take first;
/// - stage 1 (the new key read) applied to the cluster alone (`-target`), so its masters never rolled: stage 2's
///   plan passes on state, and its apply is refused by the masters as they run, naming one, with nothing changed;
/// - stages 1 and 2 then roll every master, whose configuration lists the keys in each stage's order;
/// - the snapshot taken before stage 2's rolls names both keys, the written one first;
/// - stage 4 (the old key dropped) is refused while etcd holds a Secret under the old key, then goes once it is
///   rewritten; every etcd key written before is still there.
#[test]
fn a_running_cluster_changes_its_key_in_stages() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("rekey-{client}"));
        let gcs = FakeGcs::start(&format!("rekey-{client}"));
        gcs.create_bucket(BUCKET);
        let dir = tempfile::tempdir().unwrap();
        for (secret, bytes) in [
            ("old-key", KEY),
            ("new-key", b"a-second-secrets-key-of-32-bytes"),
        ] {
            let file = dir.path().join(secret);
            std::fs::write(&file, bytes).unwrap();
            sim.gcloud(&[
                "secrets",
                "create",
                secret,
                "--replication-policy=automatic",
                &format!("--data-file={}", file.display()),
            ])
            .unwrap_or_else(|e| panic!("[{client}] secret {secret}: {e}"));
        }
        let (k1, k2) = (
            "projects/walk/secrets/old-key/versions/1",
            "projects/walk/secrets/new-key/versions/1",
        );
        let ws = Workspace::new(client, "rekey").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&staged(&sim, &gcs, Some(k1), &[]));
        ws.init();
        set_vars(&ws, &[B, C], &[]);
        ws.apply();
        let vms = replicas_by_zone(&ws);
        write_keys(&sim, &vms[B]);
        let first = configured(&sim, &vms[B]);
        let old = first.split(';').next().unwrap().to_string();
        assert!(
            old.starts_with("ha-") && !old.contains(','),
            "[{client}] {first}"
        );

        // Written straight away: refused at plan.
        ws.write_main_tf(&staged(&sim, &gcs, Some(k2), &[k1]));
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("before every API server reads it")
            .assert_contains("secrets_decryption_keys");

        // Stage 1 on the cluster alone: the masters never rolled, so stage 2 is refused by them at apply.
        ws.write_main_tf(&staged(&sim, &gcs, Some(k1), &[k2]));
        ws.apply_target("ha_master_cluster.c");
        ws.write_main_tf(&staged(&sim, &gcs, Some(k2), &[k1]));
        ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"])
            .assert_failure()
            .assert_contains("does not read key")
            .assert_contains("which this change writes with");
        for vm in vms.values() {
            assert_eq!(
                configured(&sim, vm),
                format!("{old};identity"),
                "[{client}] {vm} was rolled"
            );
        }

        // Stage 1 applied whole, then stage 2: every master rolls, and reads both keys, the written one first.
        ws.write_main_tf(&staged(&sim, &gcs, Some(k1), &[k2]));
        ws.apply();
        let both = configured(&sim, &vms[B]);
        let new = both.split([',', ';']).nth(1).unwrap().to_string();
        assert!(new.starts_with("ha-") && new != old, "[{client}] {both}");
        for vm in vms.values() {
            assert_eq!(
                configured(&sim, vm),
                format!("{old},{new};identity"),
                "[{client}] {vm}"
            );
        }
        ws.write_main_tf(&staged(&sim, &gcs, Some(k2), &[k1]));
        ws.apply();
        for vm in vms.values() {
            assert_eq!(
                configured(&sim, vm),
                format!("{new},{old};identity"),
                "[{client}] {vm}"
            );
        }
        // The snapshot before stage 2's rolls may hold Secrets under either key, and says so.
        let newest = gcs
            .list(BUCKET, "rekey/")
            .into_iter()
            .max_by_key(|o| o.name.clone())
            .unwrap_or_else(|| panic!("[{client}] no snapshot before the rolls"));
        assert_eq!(
            newest.metadata.get("ha-secrets-key").map(String::as_str),
            Some(format!("{new},{old}").as_str()),
            "[{client}] {}",
            newest.name
        );

        // A Secret still under the old key (as the API server writes one) stops stage 4 until it is rewritten.
        let leftover = "/registry/secrets/default/leftover";
        sim.ssh(
            &vms[C],
            &[
                "etcdctl",
                "put",
                leftover,
                &format!("k8s:enc:secretbox:v1:{old}:sealed"),
            ],
        );
        ws.write_main_tf(&staged(&sim, &gcs, Some(k2), &[]));
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_success()
            .assert_contains("will stop reading Secrets encrypted with");
        ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"])
            .assert_failure()
            .assert_contains(&format!("1 under {old}"));
        sim.ssh(
            &vms[C],
            &[
                "etcdctl",
                "put",
                leftover,
                &format!("k8s:enc:secretbox:v1:{new}:sealed"),
            ],
        );
        ws.apply();
        for vm in vms.values() {
            assert_eq!(
                configured(&sim, vm),
                format!("{new};identity"),
                "[{client}] {vm}"
            );
        }
        check(client, &ws, &sim, 2);
    });
}
