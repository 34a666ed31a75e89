//! The Terragrunt example (`examples/terragrunt/`: a cluster unit and two replica units), under both clients on
//! ha-sim with real etcd, run unit by unit as Terragrunt runs them (`acceptance_tests::terragrunt`: the example's
//! own terragrunt.hcl files, inputs as `TF_VAR_`, a dependency's outputs from `output -json`, or its mock).
//!
//! 1. Before anything exists, every unit plans (`run --all plan`): the replica units with the mock, which spells
//!    only the cluster's identity, and warn that such a plan cannot be applied; an apply with it is refused with
//!    nothing made.
//! 2. The cluster unit applies, then one replica unit (one master, keys written), then the other (the cluster grows
//!    to two members).
//! 3. A machine type change in the cluster unit: its plan says both masters will roll though the replica units'
//!    plans show nothing yet (they read the applied `spec`); once the cluster unit applies, each replica unit
//!    rolls its master. Every key is kept.
//! 4. Every unit plans empty (`-detailed-exitcode`); the replica units and then the cluster are destroyed, and
//!    nothing is left.

use std::collections::BTreeMap;

use acceptance_tests::terragrunt::Stack;
use acceptance_tests::walk::{KEYS, key_count, member_names, write_keys};
use acceptance_tests::{Client, CmdOutput, Sim, for_each_client, normalize_ws, repo_root};
use serde_json::Value;

const REPLICA_UNITS: [&str; 2] = ["replicas-b", "replicas-c"];
const PLAN: [&str; 3] = ["plan", "-input=false", "-no-color"];
const PLAN_EXIT: [&str; 4] = ["plan", "-input=false", "-no-color", "-detailed-exitcode"];
const APPLY: [&str; 4] = ["apply", "-input=false", "-no-color", "-auto-approve"];
const DESTROY: [&str; 4] = ["destroy", "-input=false", "-no-color", "-auto-approve"];

fn edit(stack: &Stack, unit: &str, from: &str, to: &str) {
    let path = stack.path().join(unit).join("terragrunt.hcl");
    let text = std::fs::read_to_string(&path).expect("the unit's terragrunt.hcl");
    assert!(text.contains(from), "{unit}: {from:?} not in the example");
    std::fs::write(&path, text.replace(from, to)).expect("writing terragrunt.hcl");
}

fn says(out: &CmdOutput, needle: &str) -> bool {
    normalize_ws(&out.combined()).contains(needle)
}

/// The replica unit's masters, zone by name, from its `replicas` output.
fn masters(stack: &mut Stack, unit: &str) -> Vec<String> {
    let out = stack.run(unit, &["output", "-json"]);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).expect("output -json");
    v["replicas"]["value"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, name)| name.as_str().expect("a name").to_string())
        .collect()
}

fn machine_types(sim: &Sim, vms: &[String]) -> BTreeMap<String, String> {
    vms.iter()
        .map(|vm| {
            let url = sim.instance(vm)["machineType"]
                .as_str()
                .unwrap_or("")
                .to_string();
            (vm.clone(), url.rsplit('/').next().unwrap_or("").to_string())
        })
        .collect()
}

fn plan_before_anything_exists(client: Client, stack: &mut Stack, sim: &Sim) {
    let out = stack.run("cluster", &PLAN);
    out.assert_success();
    assert!(
        says(&out, "ha_master_cluster.this will be created"),
        "[{client}] {out}"
    );
    for unit in REPLICA_UNITS {
        let out = stack.run(unit, &PLAN);
        out.assert_success();
        assert!(says(&out, "will be created"), "[{client}] {unit}: {out}");
        assert!(
            says(&out, "names cluster prod-master but is not its spec"),
            "[{client}] {unit}: the mock plan does not say it cannot be applied:\n{out}"
        );
    }
    // Terragrunt would not apply with a mock; a hand-written stand-in gets this far and is refused, nothing made.
    let out = stack.unit("replicas-b").run(&APPLY);
    out.assert_failure();
    assert!(says(&out, "is not its spec"), "[{client}] {out}");
    assert!(
        sim.names("instances").is_empty(),
        "[{client}] a stand-in made a VM"
    );
}

#[test]
fn the_terragrunt_example_plans_with_mocks_then_applies_grows_rolls_and_plans_empty() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("terragrunt-{client}"));
        let env = [
            ("GOOGLE_COMPUTE_CUSTOM_ENDPOINT", sim.url()),
            ("GOOGLE_SECRET_MANAGER_CUSTOM_ENDPOINT", sim.url()),
            ("GOOGLE_OAUTH_ACCESS_TOKEN", "sim-token"),
        ];
        let units = ["cluster", "replicas-b", "replicas-c"];
        let example = repo_root().join("examples").join("terragrunt");
        let mut stack = Stack::new(client, &example, &units, &env);
        // The example protects its cluster; this scenario ends with a destroy.
        edit(
            &stack,
            "cluster",
            "deletion_protection       = true",
            "deletion_protection       = false",
        );

        plan_before_anything_exists(client, &mut stack, &sim);

        stack.run("cluster", &APPLY).assert_success();
        stack.run("replicas-b", &APPLY).assert_success();
        let first = masters(&mut stack, "replicas-b");
        write_keys(&sim, &first[0]);
        stack.run("replicas-c", &APPLY).assert_success();
        let mut all = first.clone();
        all.extend(masters(&mut stack, "replicas-c"));
        all.sort();
        assert_eq!(
            member_names(&sim, &all[0]),
            all,
            "[{client}] etcd after the growth"
        );

        // A roll: the cluster unit's plan is the only one that sees it before its apply, and says how far it goes.
        edit(&stack, "cluster", "\"e2-standard-2\"", "\"e2-standard-4\"");
        let out = stack.run("cluster", &PLAN);
        out.assert_success();
        assert!(
            says(
                &out,
                "2 masters of cluster prod-master will roll: machine_type changes"
            ),
            "[{client}] the cluster's plan does not count the masters that will roll:\n{out}"
        );
        for unit in REPLICA_UNITS {
            assert_eq!(
                stack.run(unit, &PLAN_EXIT).code,
                Some(0),
                "[{client}] {unit} before the cluster applies"
            );
        }
        stack.run("cluster", &APPLY).assert_success();
        for unit in REPLICA_UNITS {
            let out = stack.run(unit, &PLAN);
            assert!(
                says(&out, "will be rolled: machine_type changes"),
                "[{client}] {unit}: {out}"
            );
            stack.run(unit, &APPLY).assert_success();
        }
        let types = machine_types(&sim, &all);
        assert!(
            types.values().all(|t| t == "e2-standard-4"),
            "[{client}] after the roll: {types:?}"
        );
        for vm in &all {
            assert_eq!(
                key_count(&sim, vm, "walk/"),
                KEYS,
                "[{client}] keys on {vm} after the roll"
            );
        }
        assert_eq!(
            member_names(&sim, &all[1]),
            all,
            "[{client}] etcd after the roll"
        );

        for unit in units {
            assert_eq!(
                stack.run(unit, &PLAN_EXIT).code,
                Some(0),
                "[{client}] {unit} after the roll"
            );
        }
        for unit in REPLICA_UNITS {
            stack.run(unit, &DESTROY).assert_success();
        }
        stack.run("cluster", &DESTROY).assert_success();
        acceptance_tests::walk::assert_sim_empty(client, &sim);
    });
}
