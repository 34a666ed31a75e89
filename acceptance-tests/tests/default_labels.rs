//! The provider's `default_labels`, as Google's provider has them: every cluster's replica VMs carry them under
//! the cluster's own `labels` (which win on a shared key), the cluster shows the result in `effective_labels`,
//! and changing a default updates the VMs in place (the same VMs, no roll). Bad defaults are refused before
//! anything is touched, naming the attribute.

use std::collections::BTreeMap;
use std::time::Duration;

use acceptance_tests::walk::{check, set_vars, walk_config_in, write_keys};
use acceptance_tests::{Sim, Workspace, for_each_client};
use serde_json::Value;

const ZONES: [&str; 2] = ["europe-west1-b", "europe-west1-c"];

/// The walk-through's cluster with `default_labels = var.default_labels` on the provider and
/// `labels = { team = "platform" }` on the cluster.
fn config(sim: &Sim) -> String {
    let base = walk_config_in(sim, ZONES[0]);
    let edits = [
        (
            "provider \"ha\" {\n",
            "variable \"default_labels\" {\n  type = map(string)\n}\n\nprovider \"ha\" {\n  default_labels = var.default_labels\n",
        ),
        (
            "  multizone                 = true\n",
            "  multizone                 = true\n  labels                    = { team = \"platform\" }\n",
        ),
        (
            "output \"ca\" {",
            "output \"effective_labels\" {\n  value = ha_master_cluster.c.effective_labels\n}\n\noutput \"ca\" {",
        ),
    ];
    acceptance_tests::walk::edit_config(base, &edits)
}

fn set_defaults(ws: &Workspace, defaults: &[(&str, &str)]) {
    let defaults: BTreeMap<&str, &str> = defaults.iter().copied().collect();
    let defaults = serde_json::to_string(&defaults).unwrap();
    set_vars(ws, &ZONES, &[]);
    let mut vars: Value = serde_json::from_str(&ws.read_file("terraform.tfvars.json")).unwrap();
    vars["default_labels"] = serde_json::from_str(&defaults).unwrap();
    ws.write_file("terraform.tfvars.json", &vars.to_string());
}

/// The user-visible labels of a VM (the provider's own `ha-…` ones left out).
fn vm_labels(sim: &Sim, vm: &str) -> BTreeMap<String, String> {
    sim.instance(vm)["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with("ha-"))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn default_labels_reach_every_replica_vm_and_change_in_place() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("default-labels-{client}"));
        let ws = Workspace::new(client, "default-labels").with_timeout(Duration::from_secs(600));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_defaults(&ws, &[("env", "prod"), ("team", "infra")]);
        ws.apply();
        let out = acceptance_tests::walk::outputs(&ws);
        let want = labels(&[("env", "prod"), ("team", "platform")]);
        let effective: BTreeMap<String, String> =
            serde_json::from_value(out["effective_labels"]["value"].clone()).unwrap();
        assert_eq!(effective, want, "[{client}] effective_labels");
        let vms: Vec<String> = out["replicas"]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        write_keys(&sim, &vms[0]);
        for vm in &vms {
            assert_eq!(vm_labels(&sim, vm), want, "[{client}] labels of {vm}");
        }
        let ids: Vec<String> = vms
            .iter()
            .map(|v| sim.instance(v)["id"].to_string())
            .collect();

        // A changed default: an in-place update of the cluster and both replicas, no roll.
        set_defaults(&ws, &[("env", "staging"), ("team", "infra")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("0 to add, 3 to change, 0 to destroy");
        plan.assert_contains(r#""prod" -> "staging""#);
        assert!(
            !plan.combined().contains("will be rolled"),
            "[{client}] a label change must not roll the masters:\n{plan}"
        );
        ws.apply();
        let want = labels(&[("env", "staging"), ("team", "platform")]);
        for vm in &vms {
            assert_eq!(vm_labels(&sim, vm), want, "[{client}] labels of {vm}");
        }
        let after: Vec<String> = vms
            .iter()
            .map(|v| sim.instance(v)["id"].to_string())
            .collect();
        assert_eq!(after, ids, "[{client}] the VMs were rebuilt for a label");
        check(client, &ws, &sim, ZONES.len());

        // Refused before anything moves, naming the attribute: a bad key, and too many labels together.
        set_defaults(&ws, &[("Env", "prod")]);
        let bad = ws.run(&["plan", "-input=false", "-no-color"]);
        bad.assert_failure();
        bad.assert_contains("Invalid label key \"Env\"");
        bad.assert_contains("default_labels");
        // As many defaults as one cluster may set: with the cluster's `team`, one too many.
        let max = ha_domain::labels::MAX_USER_LABELS;
        let many: Vec<(String, String)> = (0..max).map(|i| (format!("k{i}"), "v".into())).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        set_defaults(&ws, &many);
        let too_many = ws.run(&["plan", "-input=false", "-no-color"]);
        too_many.assert_failure();
        too_many.assert_contains("Too many labels");
        too_many.assert_contains("with the provider's default_labels");
        assert_eq!(
            vms.iter().map(|v| vm_labels(&sim, v)).collect::<Vec<_>>(),
            vec![want.clone(); vms.len()],
            "[{client}] a refused plan changed labels"
        );
        // Destroy plans against the configuration too: valid defaults again first.
        set_defaults(&ws, &[("env", "staging"), ("team", "infra")]);
        ws.destroy();
    });
}
