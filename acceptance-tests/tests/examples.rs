//! The examples in `examples/` as users meet them: copied as they are into a workspace, `init` from the mirror,
//! `validate`, and, for those that plan on their own, `plan` from empty state. The plan must create every
//! resource, and leave unknown only what cannot be known before apply (what GCE or the CAs make); everything
//! derived from configuration (ids, the cluster link, zones, the settings replicas inherit) must be known, so
//! users see in the plan where each replica goes. Examples that use a feature a client does not have (provider
//! functions and import by identity under OpenTofu 1.6) must fail there with the client's own words, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use acceptance_tests::{Client, Sim, Workspace, for_each_client, repo_root};
use serde_json::Value;

/// Copies `examples/<name>` (files only, recursively) into a fresh workspace under `client`.
fn workspace_of(client: Client, name: &str) -> Workspace {
    let ws = Workspace::new(client, &format!("example-{}", name.replace('/', "-")));
    let source = repo_root().join("examples").join(name);
    copy_tree(&source, &source, &ws);
    ws
}

fn copy_tree(root: &Path, dir: &Path, ws: &Workspace) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            copy_tree(root, &path, ws);
        } else {
            let relative = path.strip_prefix(root).expect("inside the example");
            let contents = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            ws.write_file(relative.to_str().expect("UTF-8 path"), &contents);
        }
    }
}

/// `plan -out` then `show -json` of that plan.
fn planned(ws: &Workspace, extra: &[&str]) -> Value {
    let mut args = vec!["plan", "-input=false", "-no-color", "-out=example.tfplan"];
    args.extend_from_slice(extra);
    ws.run(&args).assert_success();
    let shown = ws.run(&["show", "-json", "-no-color", "example.tfplan"]);
    shown.assert_success();
    serde_json::from_str(&shown.stdout).expect("show -json of a plan")
}

/// For each planned resource address: its type and the top-level attributes left unknown.
fn unknowns_by_address(plan: &Value) -> BTreeMap<String, (String, BTreeSet<String>)> {
    plan["resource_changes"]
        .as_array()
        .expect("resource_changes")
        .iter()
        .map(|rc| {
            let address = rc["address"].as_str().unwrap().to_string();
            let actions = &rc["change"]["actions"];
            assert_eq!(
                actions,
                &serde_json::json!(["create"]),
                "{address} must be created"
            );
            let unknown: BTreeSet<String> = rc["change"]["after_unknown"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, v)| v.as_bool() == Some(true) || is_partly_unknown(v))
                .map(|(k, _)| k.clone())
                .collect();
            (address, (rc["type"].as_str().unwrap().to_string(), unknown))
        })
        .collect()
}

fn is_partly_unknown(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Array(items) => items.iter().any(is_partly_unknown),
        Value::Object(fields) => fields.values().any(is_partly_unknown),
        _ => false,
    }
}

/// What only apply can know. A cluster: its static IP and what hangs on it, the CAs (and their keys) it generates,
/// the drift refresh finds. A replica: what GCE assigns and the certificates signed for its IPs, its member id, and the
/// spec's generated parts (`cluster` carries the cluster's IP and CA material, unknown until the cluster exists).
const CLUSTER_UNKNOWN: &[&str] = &[
    "api_server_ca_certificate",
    "ca_certificate",
    "drift",
    "endpoint",
    "etcd_client_ca_certificate",
    "etcd_peer_ca_certificate",
    "external_ip",
    "private_keys",
    "self_link",
    "spec",
];
/// A replica's `name` (and the `id` built from it) is known at plan when configured; otherwise apply picks
/// kube-up's random suffix. It cannot be picked at plan: Terraform plans a create again during apply and refuses a
/// different known value, and a name derived from configuration alone would collide for two replicas configured
/// alike (`count`). `a_configured_replica_name_is_known_at_plan` checks the first half.
const REPLICA_UNKNOWN: &[&str] = &[
    "certificate_sha256",
    "certificates_expire_at",
    "cluster",
    "etcd_member_id",
    "external_ip",
    "holds_static_ip",
    "id",
    "instance_id",
    "internal_ip",
    "name",
    "self_link",
    "startup_metadata",
    "status",
];

/// Checks every resource of a plan from empty state against the lists above: nothing derived from configuration
/// is unknown. (An attribute in a list but known at plan is fine: the lists bound what may be unknown.)
#[track_caller]
fn assert_known_where_knowable(client: Client, example: &str, plan: &Value) -> usize {
    let changes = unknowns_by_address(plan);
    assert!(
        !changes.is_empty(),
        "[{client}] {example}: the plan creates nothing"
    );
    for (address, (kind, unknown)) in &changes {
        let allowed: BTreeSet<String> = match kind.as_str() {
            "ha_master_cluster" => CLUSTER_UNKNOWN,
            "ha_master_replica" => REPLICA_UNKNOWN,
            other => panic!("[{client}] {example}: unexpected resource type {other}"),
        }
        .iter()
        .map(|s| s.to_string())
        .collect();
        let surprising: Vec<&String> = unknown.difference(&allowed).collect();
        assert!(
            surprising.is_empty(),
            "[{client}] {example}: {address} leaves {surprising:?} unknown, but configuration decides them"
        );
        let always_known: &[&str] = match kind.as_str() {
            "ha_master_cluster" => &["id", "name", "zone", "region", "project"],
            _ => &["zone", "cluster_id"],
        };
        for attr in always_known {
            assert!(
                !unknown.contains(*attr),
                "[{client}] {example}: {address}.{attr} must be known at plan"
            );
        }
    }
    changes.len()
}

/// The examples that plan from empty state with nothing but the provider (no cloud call is needed to plan a
/// create), and how many resources each creates.
const PLANNABLE: &[(&str, usize)] = &[
    ("quickstart", 4),
    ("single-zone", 2),
    ("split-states/cluster", 1),
];

#[test]
fn every_example_validates_and_plans_its_creates_with_unknowns_only_where_apply_decides() {
    for_each_client(|client| {
        for (example, resources) in PLANNABLE {
            let ws = workspace_of(client, example);
            ws.init();
            ws.validate();
            let plan = planned(&ws, &[]);
            let planned = assert_known_where_knowable(client, example, &plan);
            assert_eq!(
                planned, *resources,
                "[{client}] {example}: resources planned"
            );
        }

        // The replicas of a split state read the cluster's spec from its state file: validate needs no state.
        let ws = workspace_of(client, "split-states/replicas-east");
        ws.init();
        ws.validate();
    });
}

/// A replica whose name is configured plans with its name and id known (the example `single-zone` plus a second,
/// named replica).
#[test]
fn a_configured_replica_name_is_known_at_plan() {
    for_each_client(|client| {
        let ws = workspace_of(client, "single-zone");
        ws.write_file(
            "named.tf",
            "resource \"ha_master_replica\" \"named\" {\n  cluster = ha_master_cluster.dev.spec\n  name    = \"dev-master-abc\"\n}\n",
        );
        ws.init();
        let plan = planned(&ws, &[]);
        let named = plan["resource_changes"]
            .as_array()
            .expect("resource_changes")
            .iter()
            .find(|rc| rc["address"] == "ha_master_replica.named")
            .unwrap_or_else(|| panic!("[{client}] ha_master_replica.named is not planned"));
        let after = &named["change"]["after"];
        assert_eq!(after["name"], "dev-master-abc", "[{client}] {named:#}");
        assert_eq!(
            after["id"], "ha-sim/us-central1-b/dev-master-abc",
            "[{client}] {named:#}"
        );
    });
}

/// The replica-count guard is written with provider functions: Terraform plans 3 zones (and 1) and refuses 2 with
/// the example's own message; OpenTofu 1.6 has no provider functions and refuses the configuration.
#[test]
fn the_replica_count_guard_refuses_an_even_count() {
    for_each_client(|client| {
        let ws = workspace_of(client, "replica-count-guard");
        match client {
            Client::Terraform => {
                ws.init();
                ws.validate();
                let plan = planned(&ws, &[]);
                let planned = assert_known_where_knowable(client, "replica-count-guard", &plan);
                assert_eq!(planned, 4, "[{client}] the cluster and 3 replicas");

                let two = r#"-var=zones=["us-central1-a","us-central1-b"]"#;
                let refused = ws.run(&["plan", "-input=false", "-no-color", two]);
                refused.assert_failure();
                refused.assert_contains("Resource precondition failed");
                refused.assert_contains(
                    "Use 1, 3 or 5 replicas: 2 tolerates 0 failed members, no more than 1 would.",
                );

                let one = r#"-var=zones=["us-central1-a"]"#;
                ws.run(&["plan", "-input=false", "-no-color", one])
                    .assert_success();
            }
            Client::OpenTofu => {
                // OpenTofu 1.6 cannot even parse a provider function call (they came in 1.7, as the example says),
                // and reads the configuration before installing anything, so `init` refuses it at the call.
                let out = ws.run(&["init", "-input=false", "-no-color"]);
                out.assert_failure();
                out.assert_contains("Missing newline after argument");
                out.assert_contains(r#"in resource "ha_master_cluster" "main""#);
            }
        }
    });
}

/// The import example adopts a running cluster, so it plans only against one (tests/import.rs does that with
/// its own configuration, import by identity included); here it must validate under both clients.
#[test]
fn the_import_example_validates() {
    for_each_client(|client| {
        let ws = workspace_of(client, "import");
        ws.init();
        ws.validate();
    });
}

/// The registry's example layout (`examples/<kind>/<name>/…`, which `scripts/gen-docs` puts under "Example Usage"
/// and "Import" of each page): which example file each kind has, and the schema section naming what it shows.
const REGISTRY_KINDS: &[(&str, &str, &str)] = &[
    ("resources", "resource.tf", "resource_schemas"),
    ("data-sources", "data-source.tf", "data_source_schemas"),
    (
        "ephemeral-resources",
        "ephemeral-resource.tf",
        "ephemeral_resource_schemas",
    ),
    ("functions", "function.tf", "functions"),
];

/// Names the examples as the provider itself does: `required_providers`, and a provider block unless the example
/// is the provider's own.
fn registry_workspace(client: Client, dir: &str) -> Workspace {
    let ws = workspace_of(client, dir);
    ws.write_file(
        "versions.tf",
        "terraform {\n  required_providers {\n    ha = { source = \"hamaster/ha\" }\n  }\n}\n",
    );
    if dir != "provider" {
        ws.write_file(
            "provider.tf",
            "provider \"ha\" {\n  project = \"my-project\"\n}\n",
        );
    }
    ws
}

/// What OpenTofu 1.6 lacks (ephemeral resources came in 1.11, provider functions in 1.7): those examples must
/// fail there, at the feature, in OpenTofu's own words.
fn tofu_1_6_refuses(kind: &str) -> Option<&'static str> {
    match kind {
        "ephemeral-resources" => Some("ephemeral"),
        "functions" => Some("provider::ha::"),
        _ => None,
    }
}

/// Every resource, data source, ephemeral resource and function the provider serves has its registry example and
/// every example names one it serves; each validates under both clients (or fails at the feature OpenTofu 1.6
/// lacks); each resource's `import.sh` imports an address its `resource.tf` declares, with an id the provider's
/// import accepts (it gets as far as calling Compute, where a malformed id is refused first).
#[test]
fn the_registry_examples_cover_the_schema_and_validate() {
    let root = repo_root().join("examples");
    for_each_client(|client| {
        let sim = Sim::start(&format!("registry-examples-{client}"));
        let ws = registry_workspace(client, "provider");
        ws.write_file("main.tf", "");
        ws.init();
        ws.validate();
        let out = ws.run(&["providers", "schema", "-json"]);
        out.assert_success();
        let schema: Value = serde_json::from_str(&out.stdout).expect("providers schema -json");
        let schema = schema["provider_schemas"]
            .as_object()
            .and_then(|p| p.values().next())
            .expect("the provider's schema")
            .clone();

        for (kind, file, section) in REGISTRY_KINDS {
            let served: BTreeSet<String> = schema[section]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, _)| name.clone())
                .collect();
            let examples: BTreeSet<String> = std::fs::read_dir(root.join(kind))
                .map(|entries| {
                    entries
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            // OpenTofu 1.6's schema has no ephemeral resources or functions: compare only what it reports.
            if client == Client::Terraform || tofu_1_6_refuses(kind).is_none() {
                assert_eq!(
                    examples, served,
                    "[{client}] examples/{kind} against the schema"
                );
            }
            for name in &examples {
                let dir = format!("{kind}/{name}");
                assert!(
                    root.join(&dir).join(file).exists(),
                    "examples/{dir}/{file} is missing"
                );
                let ws = registry_workspace(client, &dir);
                match (client, tofu_1_6_refuses(kind)) {
                    (Client::OpenTofu, Some(feature)) => {
                        let init = ws.run(&["init", "-input=false", "-no-color"]);
                        let out = if init.success() {
                            ws.run(&["validate", "-no-color"])
                        } else {
                            init
                        };
                        out.assert_failure();
                        out.assert_contains(feature);
                    }
                    _ => {
                        ws.init();
                        ws.validate();
                    }
                }
                if *kind == "resources" {
                    assert_import_example(client, &sim, &root, &dir, name);
                }
            }
        }
    });
}

/// `examples/resources/<type>/import.sh` is one `terraform import <address> <id>`: the address is declared in the
/// example, and the id passes the provider's parsing (an import block with that id gets as far as asking an
/// empty ha-sim, which has no such object), while a mangled id is refused as an invalid import id.
fn assert_import_example(client: Client, sim: &Sim, root: &Path, dir: &str, name: &str) {
    let script = std::fs::read_to_string(root.join(dir).join("import.sh"))
        .unwrap_or_else(|e| panic!("examples/{dir}/import.sh: {e}"));
    let line = script
        .lines()
        .find(|l| l.starts_with("terraform import "))
        .unwrap_or_else(|| panic!("examples/{dir}/import.sh has no `terraform import` line"));
    let rest = line.trim_start_matches("terraform import ");
    let (address, id) = rest.rsplit_once(' ').expect("an address and an id");
    let address = address.trim_matches('\'');
    assert!(
        address.starts_with(&format!("{name}.")),
        "examples/{dir}/import.sh imports {address}, not a {name}"
    );
    for (id, valid) in [(id.to_string(), true), (format!("{id}/extra"), false)] {
        let ws = registry_workspace(client, dir);
        ws.write_file(
            "provider.tf",
            &format!(
                "provider \"ha\" {{\n  project                 = \"my-project\"\n  compute_custom_endpoint = \"{}\"\n  access_token            = \"sim-token\"\n}}\n",
                sim.url()
            ),
        );
        ws.write_file(
            "import.tf",
            &format!("import {{\n  to = {address}\n  id = \"{id}\"\n}}\n"),
        );
        ws.init();
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure();
        assert_eq!(
            plan.combined().contains("Invalid import id"),
            !valid,
            "[{client}] examples/{dir}/import.sh: importing {address} with id {id:?}:\n{plan}"
        );
    }
}
