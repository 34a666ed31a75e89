//! Upgrading the provider plans nothing. A cluster applied with an earlier release's provider (built by
//! `scripts/build-previous-release` from the commits it pins) is planned with this checkout's provider, under each
//! client, and the plan must be empty: a new setting that changed every master's build digest, an attribute whose
//! default moved, or a state the new schema reads differently would all show here as a change, and a changed digest
//! as a roll of every replica. Two releases are started from:
//! - `PREVIOUS_RELEASE`, the last that landed: what most users run;
//! - `LEGACY_RELEASE`, the last whose masters keep their keys in instance metadata and whose replicas keep leaf
//!   keys in state (schema version 0). Its state must be upgraded to this schema, and the cluster destroyed with
//!   the Secret Manager API disabled, as in a project that never enabled it: its masters keep their keys in
//!   metadata, so nothing may need it. Its cluster also keeps the CA keys in every replica's state, and a second
//!   scenario moves them to the cluster's secret with `ca_key_store`, rolling nothing.
//!
//! Both releases' replicas kept their certificates as PEM (schema version 1 or 0) and their startup metadata's
//! values; this one keeps fingerprints and digests (version 3), computed from those at the upgrade, so no replica's
//! state keeps a private key even while its legacy master keeps its own in metadata.
//! Terraform's cluster runs the default etcd and OpenTofu's etcd 3.5, so both kinds of build the digest has to
//! keep stable (the default's image left out, and a non-default one in) are covered. After the empty plan an
//! apply with the new provider must leave every VM as it was and every key in etcd.

use std::time::Duration;

use acceptance_tests::faults::{Effect, Failpoint, Trigger};
use acceptance_tests::walk::{
    assert_private_keys_only_in_the_cluster, assert_sim_empty, check, outputs, set_vars,
    walk_config_in, write_keys,
};
use acceptance_tests::{Client, Mirror, Release, Sim, Workspace, for_each_client};

const ZONES: [&str; 2] = ["europe-west1-b", "europe-west1-c"];

/// Each client's cluster: the defaults under Terraform, a non-default etcd under OpenTofu.
fn vars(client: Client) -> Vec<(&'static str, &'static str)> {
    match client {
        Client::Terraform => Vec::new(),
        Client::OpenTofu => vec![("etcd_version", "3.5")],
    }
}

fn vm_ids(sim: &Sim, vms: &[String]) -> Vec<String> {
    vms.iter()
        .map(|vm| sim.instance(vm)["id"].to_string())
        .collect()
}

#[test]
fn a_cluster_applied_by_the_previous_release_plans_nothing_with_this_one() {
    for_each_client(|client| {
        let (sim, ws) = upgraded(client, Release::Previous, "provider-upgrade");
        assert_replicas_state_upgraded(client, &ws, false);
        // The previous release keeps the CA keys in the cluster's secret already.
        assert_private_keys_only_in_the_cluster(client, &ws, 4);
        // The replicas' deletes sign the provider's etcd client certificate with the key from the secret.
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}

#[test]
fn a_legacy_cluster_moves_its_ca_keys_to_secret_manager_without_a_roll() {
    for_each_client(|client| {
        let (sim, ws) = upgraded(client, Release::Legacy, "legacy-keys");
        move_ca_keys_to_secret_manager(client, &sim, &ws);
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}

/// The legacy release keeps the CA keys in the cluster's `spec`, and so in every replica's state. The upgraded
/// plan warns of it once; `ca_key_store = "secret_manager"` moves them, changing every replica's `cluster` input in
/// place with no VM rebuilt, after which only the cluster's state holds them and the next plan is empty.
fn move_ca_keys_to_secret_manager(client: Client, sim: &Sim, ws: &Workspace) {
    let warning = "CA keys are still in every replica's state";
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(plan.code, Some(0), "[{client}] {plan}");
    assert_eq!(
        plan.stdout.matches(warning).count() + plan.stderr.matches(warning).count(),
        1,
        "[{client}] the plan warns once: {plan}"
    );
    assert_eq!(
        private_keys(ws),
        (4 * (1 + ZONES.len()), 4 * ZONES.len()),
        "[{client}] before the move: the cluster's four keys in its spec and in each replica's input"
    );
    let vms: Vec<String> = outputs(ws)["replicas"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let before = vm_ids(sim, &vms);

    let config = walk_config_in(sim, ZONES[0]);
    let moved = config.replacen(
        "  name                      = \"walk\"\n",
        "  name                      = \"walk\"\n  ca_key_store              = \"secret_manager\"\n",
        1,
    );
    assert_ne!(moved, config, "the walk-through names its cluster `walk`");
    ws.write_main_tf(&moved);
    let plan = ws.run(&["plan", "-input=false", "-no-color"]);
    plan.assert_contains(&format!(
        "0 to add, {} to change, 0 to destroy",
        1 + ZONES.len()
    ));
    assert!(!plan.stdout.contains(warning), "[{client}] {plan}");
    ws.apply();
    assert_eq!(
        vm_ids(sim, &vms),
        before,
        "[{client}] moving the CA keys rebuilt a VM"
    );
    // The sim keys its secrets by `<project>/<id>`.
    let secrets: Vec<String> = sim.admin("state")["secrets"]
        .as_object()
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default();
    assert!(
        secrets.iter().any(|k| k.ends_with("/walk-cluster-keys")),
        "[{client}] the cluster's keys secret: {secrets:?}"
    );
    assert_eq!(
        private_keys(ws),
        (4, 0),
        "[{client}] after the move: the four keys in the cluster's `private_keys` alone"
    );
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(plan.code, Some(0), "[{client}] after the move: {plan}");
    check(client, ws, sim, ZONES.len());
}

#[test]
fn a_cluster_whose_keys_are_in_metadata_plans_nothing_with_this_one_and_is_removed_without_secret_manager()
 {
    for_each_client(|client| {
        let (sim, ws) = upgraded(client, Release::Legacy, "legacy-upgrade");
        assert_replicas_state_upgraded(client, &ws, true);

        // A project that never enabled Secret Manager can still remove a cluster whose masters keep their keys
        // in metadata: no replica's delete needs it, and the cluster's finds nothing there to clean.
        sim.add_failpoint(Failpoint::new(
            Trigger::Request {
                method: None,
                api: Some("secretmanager.*".into()),
                path: None,
            },
            Effect::Fail {
                code: ha_sim::faults::SERVICE_DISABLED.into(),
                message: None,
            },
        ));
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}

/// A two-replica cluster applied by `release`, then planned (nothing) and applied (no VM rebuilt, every key kept)
/// with this checkout's provider.
fn upgraded(client: Client, release: Release, scenario: &str) -> (Sim, Workspace) {
    let sim = Sim::start(&format!("{scenario}-{client}"));
    let mut ws = Workspace::with_mirror(client, scenario, Mirror::release(release))
        .with_timeout(Duration::from_secs(600));
    let config = walk_config_in(&sim, ZONES[0]);
    // The legacy release has no `secret_manager_custom_endpoint`: its masters keep their keys in metadata.
    match release {
        Release::Legacy => ws.write_main_tf(&without_secret_manager(&config)),
        Release::Previous => ws.write_main_tf(&config),
    }
    set_vars(&ws, &ZONES, &vars(client));
    ws.init();
    ws.apply();
    let vms: Vec<String> = outputs(&ws)["replicas"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(vms.len(), ZONES.len(), "[{client}] replicas: {vms:?}");
    write_keys(&sim, &vms[0]);
    let before = vm_ids(&sim, &vms);

    ws.switch_mirror(Mirror::shared());
    ws.write_main_tf(&config);
    ws.init();
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(0),
        "[{client}] upgrading the provider from {release:?} must plan nothing, but the plan says:\n{plan}"
    );
    // A legacy master keeps its keys in metadata until its next rebuild: the plan says so, once for them all.
    let warning = "Replica keys are still in instance metadata";
    let warned = plan.stdout.matches(warning).count() + plan.stderr.matches(warning).count();
    assert_eq!(
        warned,
        usize::from(release == Release::Legacy),
        "[{client}] upgrading from {release:?}: {plan}"
    );
    let apply = ws.apply();
    apply.assert_contains("0 added, 0 changed, 0 destroyed");
    assert_eq!(
        vm_ids(&sim, &vms),
        before,
        "[{client}] a VM was rebuilt by upgrading the provider from {release:?}"
    );
    check(client, &ws, &sim, ZONES.len());
    (sim, ws)
}

/// The private keys in the state (all of them, and those in replicas). A legacy master keeps its own keys in its
/// metadata until it is next built (docs/guides/secrets.md), but the state keeps only digests of that metadata.
fn private_keys(ws: &Workspace) -> (usize, usize) {
    let state: serde_json::Value =
        serde_json::from_str(&ws.read_file("terraform.tfstate")).unwrap();
    let (mut all, mut in_replicas) = (0, 0);
    for resource in state["resources"].as_array().into_iter().flatten() {
        for instance in resource["instances"].as_array().into_iter().flatten() {
            let keys = acceptance_tests::walk::private_keys_in(&instance["attributes"].to_string());
            all += keys;
            if resource["type"] == "ha_master_replica" {
                in_replicas += keys;
            }
        }
    }
    (all, in_replicas)
}

/// The replicas' stored state was upgraded to this release's schema (version 3: no leaf private keys, which the
/// legacy release wrote at version 0, the certificates as fingerprints, which both releases wrote as PEM, and the
/// startup metadata as digests, with `keys_in_metadata` saying whether the master keeps its keys there).
fn assert_replicas_state_upgraded(client: Client, ws: &Workspace, keys_in_metadata: bool) {
    let state: serde_json::Value =
        serde_json::from_str(&ws.read_file("terraform.tfstate")).unwrap();
    let replicas: Vec<&serde_json::Value> = state["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "ha_master_replica")
        .flat_map(|r| r["instances"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(replicas.len(), ZONES.len(), "[{client}] replicas in state");
    for r in replicas {
        assert_eq!(
            r["schema_version"], 3,
            "[{client}] {}",
            r["attributes"]["name"]
        );
        let attributes = r["attributes"].as_object().unwrap();
        let keys: Vec<&String> = attributes
            .keys()
            .filter(|k| k.ends_with("_private_key"))
            .collect();
        assert!(
            keys.is_empty(),
            "[{client}] {}: {keys:?} left in state",
            r["attributes"]["name"]
        );
        let pems: Vec<&String> = attributes
            .keys()
            .filter(|k| k.ends_with("_certificate"))
            .collect();
        assert!(pems.is_empty(), "[{client}] {pems:?} left in state");
        let fingerprints = attributes["certificate_sha256"].as_object().unwrap();
        assert_eq!(fingerprints.len(), 3, "[{client}] {fingerprints:?}");
        for (name, sha) in fingerprints {
            let sha = sha.as_str().unwrap_or_default();
            assert!(
                sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                "[{client}] {name}: {sha:?}"
            );
        }
        assert!(
            attributes["certificates_expire_at"].is_string(),
            "[{client}] {attributes:?}"
        );
        let digests = attributes["startup_metadata"].as_object().unwrap();
        assert!(
            digests.contains_key("user-data")
                && digests.values().all(|d| d
                    .as_str()
                    .is_some_and(|d| d.starts_with("sha256:") && d.len() == 71)),
            "[{client}] {digests:?}"
        );
        assert_eq!(
            attributes["keys_in_metadata"],
            serde_json::json!(keys_in_metadata),
            "[{client}] {}",
            r["attributes"]["name"]
        );
        // The legacy cluster's CA keys are in every replica's `cluster` input until they move (below).
        let mut own = r["attributes"].clone();
        own["cluster"] = serde_json::Value::Null;
        assert_eq!(
            acceptance_tests::walk::private_keys_in(&own.to_string()),
            0,
            "[{client}] {}",
            r["attributes"]["name"]
        );
    }
}

/// The walk-through's configuration as the legacy release takes it.
fn without_secret_manager(config: &str) -> String {
    let out: String = config
        .lines()
        .filter(|l| !l.trim_start().starts_with("secret_manager_custom_endpoint"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(
        out, config,
        "the walk-through sets secret_manager_custom_endpoint"
    );
    out
}
