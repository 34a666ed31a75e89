//! Import under both clients on ha-sim with real etcd: a running cluster built in one workspace is adopted by a
//! fresh one, through `import {}` blocks and the `import` CLI command, without replacing or recreating anything;
//! after the apply the walk-through's `check` holds (plan empty, etcd members == replicas, keys intact, static
//! IP serving). And `plan -generate-config-out` writes configuration that, with the one line a user must write
//! (a replica's `cluster = ha_master_cluster.<name>.spec`, which no id can carry), applies and then plans clean.
//! OpenTofu 1.6.2 supports both `import {}` blocks and `-generate-config-out`, so both run under both clients.

use std::time::Duration;

use acceptance_tests::faults::Event;
use acceptance_tests::walk::{
    assert_private_keys_only_in_the_cluster, check, replicas_by_zone, set_vars, set_zones,
    walk_config, write_keys,
};
use acceptance_tests::{Client, Sim, Workspace, for_each_client};

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const D: &str = "europe-west1-d";
const UBUNTU: &str = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64";

/// The walk cluster with a replica in each of `zones`, built and then left behind in its own workspace.
fn built_elsewhere(client: Client, sim: &Sim, zones: &[&str]) -> Vec<(String, String)> {
    let ws = Workspace::new(client, "import-origin").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(sim));
    ws.init();
    set_zones(&ws, zones);
    ws.apply();
    let by_zone = replicas_by_zone(&ws);
    write_keys(sim, &by_zone[zones[0]]);
    by_zone.into_iter().collect()
}

#[test]
fn a_fresh_workspace_adopts_a_running_cluster_without_replacing_anything() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("import-{client}"));
        let replicas = built_elsewhere(client, &sim, &[B, C]);
        let name_in = |zone: &str| {
            replicas
                .iter()
                .find(|(z, _)| z == zone)
                .map(|(_, n)| n.clone())
                .unwrap()
        };

        let ws = Workspace::new(client, "import-adopt").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&walk_config(&sim));
        set_zones(&ws, &[B, C]);
        ws.init();

        // One replica through the CLI command...
        let cli = ws.run(&[
            "import",
            "-input=false",
            "-no-color",
            &format!("ha_master_replica.r[\"{C}\"]"),
            &format!("walk/{C}/{}", name_in(C)),
        ]);
        cli.assert_success().assert_contains("Import successful");

        // ...the cluster and the other replica through import blocks.
        ws.write_file(
            "imports.tf",
            &format!(
                r#"
import {{
  to = ha_master_cluster.c
  id = "walk/europe-west1/walk"
}}

import {{
  to = ha_master_replica.r["{B}"]
  id = "walk/{B}/{b}"
}}
"#,
                b = name_in(B)
            ),
        );
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success()
            .assert_contains("2 to import, 0 to add")
            .assert_contains("0 to destroy");
        assert!(
            !plan.combined().contains("must be replaced"),
            "[{client}] import must not replace anything:\n{plan}"
        );
        ws.apply();
        check(client, &ws, &sim, 2);

        // The CA keys were never on a master, so the imported cluster cannot sign for a new replica: the plan
        // says so instead of failing half-way through a join.
        set_zones(&ws, &[B, C, D]);
        let grow = ws.run(&["plan", "-input=false", "-no-color"]);
        grow.assert_failure()
            .assert_contains("Cluster walk was imported without its CA private keys");

        // Import read the service-account signing key from a master, so every replica's state holds it, and the
        // plan says so. `ca_key_store = "secret_manager"` moves it to the cluster's secret, rebuilding no VM:
        // then the cluster's `private_keys` holds it once and no replica's state any key. The CA keys are still
        // nowhere, so a grow is still refused.
        set_zones(&ws, &[B, C]);
        let warning = "The service-account signing key is in every replica's state";
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(plan.code, Some(0), "[{client}] {plan}");
        plan.assert_contains(warning);
        let vm_ids = || {
            replicas
                .iter()
                .map(|(_, vm)| sim.instance(vm)["id"].to_string())
                .collect::<Vec<_>>()
        };
        let before = vm_ids();
        let config = walk_config(&sim);
        let moved = config.replacen(
            "  name                      = \"walk\"\n",
            "  name                      = \"walk\"\n  ca_key_store              = \"secret_manager\"\n",
            1,
        );
        assert_ne!(moved, config, "the walk-through names its cluster `walk`");
        ws.write_main_tf(&moved);
        let applied = ws.apply();
        applied.assert_contains("0 added, 3 changed, 0 destroyed");
        assert!(
            !applied.combined().contains(warning),
            "[{client}] {applied}"
        );
        assert_eq!(vm_ids(), before, "[{client}] moving the key rebuilt a VM");
        assert_private_keys_only_in_the_cluster(client, &ws, 1);
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(plan.code, Some(0), "[{client}] after the move: {plan}");
        check(client, &ws, &sim, 2);
        set_zones(&ws, &[B, C, D]);
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("Cluster walk was imported without its CA private keys");
    });
}

#[test]
fn generated_configuration_plans_clean_once_the_replica_names_its_cluster() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("import-gen-{client}"));
        let replicas = built_elsewhere(client, &sim, &[B]);
        let name = &replicas[0].1;

        let ws = Workspace::new(client, "import-gen").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&format!(
            r#"
terraform {{
  required_providers {{
    ha = {{ source = "hamaster/ha" }}
  }}
}}

provider "ha" {{
  project                 = "walk"
  zone                    = "{B}"
  compute_custom_endpoint = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token            = "sim-token"
}}

import {{
  to = ha_master_cluster.c
  id = "walk/europe-west1/walk"
}}

import {{
  to = ha_master_replica.r
  id = "walk/{B}/{name}"
}}
"#,
            url = sim.url()
        ));
        ws.init();
        // A replica's `cluster` cannot come from its id, so the first plan stops at it; the file is written.
        let first = ws.run(&[
            "plan",
            "-input=false",
            "-no-color",
            "-generate-config-out=generated.tf",
        ]);
        let generated = ws.read_file("generated.tf");
        assert!(
            generated.contains("resource \"ha_master_cluster\" \"c\"")
                && generated.contains("resource \"ha_master_replica\" \"r\""),
            "[{client}] generated:\n{generated}\nplan:\n{first}"
        );
        // The one edit a user makes: the replica joins its cluster.
        let edited: String = generated
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("cluster ") || l.trim_start().starts_with("cluster=")
                {
                    "  cluster = ha_master_cluster.c.spec".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            edited.contains("cluster = ha_master_cluster.c.spec"),
            "[{client}] no `cluster` line to edit in:\n{generated}"
        );
        ws.write_file("generated.tf", &edited);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success()
            .assert_contains("2 to import, 0 to add");
        assert!(
            !plan.combined().contains("must be replaced"),
            "[{client}] import must not replace anything:\n{plan}"
        );
        ws.apply();
        let again = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(again.code, Some(0), "[{client}] plan after apply:\n{again}");
        let members = sim.ssh(
            name,
            &["etcdctl", "get", "walk/", "--prefix", "--keys-only"],
        );
        assert_eq!(
            members.lines().filter(|l| !l.trim().is_empty()).count(),
            acceptance_tests::walk::KEYS,
            "[{client}] keys"
        );
    });
}

/// `import { identity = { … } }` (Terraform 1.12+). Terraform only: OpenTofu 1.6.2 has no resource identity (it
/// neither asks for identity schemas nor sends identities), so the same blocks would not parse there.
#[test]
fn terraform_imports_by_identity_and_keeps_it_in_state() {
    let client = Client::Terraform;
    let sim = Sim::start("import-identity");
    let replicas = built_elsewhere(client, &sim, &[B]);
    let name = &replicas[0].1;

    let ws = Workspace::new(client, "import-identity").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(&sim));
    set_zones(&ws, &[B]);
    ws.write_file(
        "imports.tf",
        &format!(
            r#"
import {{
  to       = ha_master_cluster.c
  identity = {{ project = "walk", region = "europe-west1", name = "walk" }}
}}

import {{
  to       = ha_master_replica.r["{B}"]
  identity = {{ project = "walk", zone = "{B}", name = "{name}" }}
}}
"#
        ),
    );
    ws.init();
    let plan = ws.run(&["plan", "-input=false", "-no-color"]);
    plan.assert_success()
        .assert_contains("2 to import, 0 to add");
    ws.apply();
    check(client, &ws, &sim, 1);
    // The identity is in state, as Terraform shows it.
    let state = ws.show_json();
    let resources = state["values"]["root_module"]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let identity = |ty: &str| {
        resources
            .iter()
            .find(|r| r["type"] == ty)
            .map(|r| r["identity"].clone())
            .unwrap_or_default()
    };
    assert_eq!(
        identity("ha_master_cluster"),
        serde_json::json!({ "project": "walk", "region": "europe-west1", "name": "walk" }),
        "state: {state}"
    );
    assert_eq!(
        identity("ha_master_replica"),
        serde_json::json!({ "project": "walk", "zone": B, "name": name }),
        "state: {state}"
    );
}

/// A cluster made "outside Terraform" with the original scripts' names: the first master `walk`, the second
/// `walk-a1f`, address `walk-ip`, pool and rule `walk`, and VMs without this provider's label (built by one
/// workspace, labels stripped through the sim, then adopted by a fresh one). Import names the unlabelled VMs and
/// says how to label them; once labelled, the import plans no replacement and the apply leaves etcd and its data
/// as they were.
///
/// The masters carry kube-up's network tag (`walk`, not `walk-master`) and the rules are kube-up's: each targets
/// `walk`, the peer rule also opens 2381, and there is no health rule and no etcd client rule, which import asks
/// for (with the gcloud command, for the masters' tag) together with the labels. The import's apply widens the rules to `walk-master` as well, and must keep
/// `walk` while a master lacks `walk-master` (`ha_domain::firewall_handover`): retargeted at once, the masters
/// would lose their API clients, their etcd peers and the provider's etcd client. An imported cluster cannot
/// rebuild a master (no CA keys), so a rolling change is refused at plan; once the masters are given
/// `walk-master` by hand, the next plan narrows the rules to it.
#[test]
fn a_kube_up_named_cluster_is_adopted_once_its_masters_carry_the_label() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("import-kubeup-{client}"));
        let origin =
            Workspace::new(client, "import-kubeup-origin").with_timeout(Duration::from_secs(300));
        let walk = walk_config(&sim);
        let head = &walk[..walk.find("resource \"ha_master_replica\"").unwrap()];
        origin.write_main_tf(&format!(
            r#"{head}
resource "ha_master_replica" "first" {{
  cluster = ha_master_cluster.c.spec
  name    = "walk"
  zone    = "{B}"
}}

resource "ha_master_replica" "second" {{
  cluster = ha_master_cluster.c.spec
  name    = "walk-a1f"
  zone    = "{C}"
}}
"#
        ));
        set_zones(&origin, &[]);
        origin.init();
        origin.apply();
        write_keys(&sim, "walk");
        for vm in ["walk", "walk-a1f"] {
            sim.event(Event::SetLabel {
                instance: vm.to_string(),
                key: "ha-master-cluster".into(),
                value: None,
            });
        }
        kube_up_tags_and_rules(client, &sim);

        let ws = Workspace::new(client, "import-kubeup").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&walk_config(&sim));
        set_zones(&ws, &[B, C]);
        ws.write_file(
            "imports.tf",
            &format!(
                r#"
import {{
  to = ha_master_cluster.c
  id = "walk/europe-west1/walk"
}}

import {{
  to = ha_master_replica.r["{B}"]
  id = "walk/{B}/walk"
}}

import {{
  to = ha_master_replica.r["{C}"]
  id = "walk/{C}/walk-a1f"
}}
"#
            ),
        );
        ws.init();
        // Through the CLI command: with import blocks, OpenTofu 1.6.2 reports the blocks' addresses as missing
        // (the failed import stops the expansion of `for_each`) instead of the provider's error.
        // kube-up makes no etcd client rule and labels no master: import names both at once, with the commands
        // (the rule for the masters' tag).
        ws.run(&[
            "import",
            "-input=false",
            "-no-color",
            "ha_master_cluster.c",
            "walk/europe-west1/walk",
        ])
        .assert_failure()
            .assert_contains("cluster walk has no firewall rule walk-etcd-client")
            .assert_contains("gcloud compute firewall-rules create walk-etcd-client --network=default --allow=tcp:2379 --target-tags=walk --source-ranges=<Terraform's address>/32")
            .assert_contains("do not carry the label ha-master-cluster=walk")
            .assert_contains("gcloud compute instances add-labels walk-a1f --zone=europe-west1-c --labels=ha-master-cluster=walk");

        // What the user runs (the gcloud commands above), here through gcloud and the sim.
        sim.gcloud(&[
            "compute",
            "firewall-rules",
            "create",
            "walk-etcd-client",
            "--network=default",
            "--allow=tcp:2379",
            "--target-tags=walk",
            "--source-ranges=127.0.0.0/8",
        ])
        .unwrap_or_else(|e| panic!("[{client}] {e}"));
        for vm in ["walk", "walk-a1f"] {
            sim.event(Event::SetLabel {
                instance: vm.to_string(),
                key: "ha-master-cluster".into(),
                value: Some("walk".into()),
            });
        }
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success()
            .assert_contains("3 to import, 0 to add")
            .assert_contains("0 to destroy")
            .assert_contains(
                "Masters walk, walk-a1f do not carry the network tag walk-master yet (an imported kube-up master carries walk)",
            );
        assert!(
            !plan.combined().contains("must be replaced"),
            "[{client}] adoption must not replace anything:\n{plan}"
        );
        ws.apply();
        // Nothing rolled: the masters' build is what the configuration asks for. They still carry only `walk`,
        // and serve (etcd members, keys, the API at the static IP, an empty plan) through rules that now admit
        // both tags.
        check(client, &ws, &sim, 2);
        let https = sim
            .gcloud(&["compute", "firewall-rules", "describe", "walk-https"])
            .unwrap_or_else(|e| panic!("[{client}] {e}"));
        assert_eq!(
            https["targetTags"],
            serde_json::json!(["walk-master", "walk"]),
            "[{client}] {https}"
        );
        // The imported cluster has no CA keys, so a change that rebuilds a master is refused at plan, before its
        // VM is deleted (an apply used to delete it and then fail to sign its certificates).
        set_vars(&ws, &[B, C], &[("image", UBUNTU)]);
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("Replica walk cannot be rolled: cluster walk was imported without its CA private keys");
        set_zones(&ws, &[B, C]);
        // What the drift sentence tells the user to run, as it says it: each master gets the cluster's tag by hand.
        let commands = add_tags_commands(&plan.combined());
        assert_eq!(
            commands,
            [
                format!("compute instances add-tags walk --zone={B} --tags=walk-master"),
                format!("compute instances add-tags walk-a1f --zone={C} --tags=walk-master"),
            ],
            "[{client}] {plan}"
        );
        for command in &commands {
            let args: Vec<&str> = command.split(' ').collect();
            sim.gcloud(&args)
                .unwrap_or_else(|e| panic!("[{client}] gcloud {command}: {e}"));
        }
        // Every master carries `walk-master` now; the rules still admit `walk` and 2381 until this plan.
        let narrow = ws.run(&["plan", "-input=false", "-no-color"]);
        narrow
            .assert_success()
            .assert_contains("Firewall rule walk-etcd has ports 2380, 2381, not 2380")
            .assert_contains("0 to add, 1 to change, 0 to destroy");
        assert!(
            !narrow.combined().contains("do not carry the network tag"),
            "[{client}] every master carries walk-master now:\n{narrow}"
        );
        ws.apply();
        for rule in [
            "walk-etcd",
            "walk-https",
            "walk-etcd-client",
            "walk-healthz",
        ] {
            let found = sim
                .gcloud(&["compute", "firewall-rules", "describe", rule])
                .unwrap_or_else(|e| panic!("[{client}] {e}"));
            assert_eq!(
                found["targetTags"],
                serde_json::json!(["walk-master"]),
                "[{client}] {rule}: {found}"
            );
        }
        check(client, &ws, &sim, 2);
    });
}

/// The `gcloud compute instances add-tags` commands a plan's drift sentence names, without `gcloud`, once each.
fn add_tags_commands(plan: &str) -> Vec<String> {
    let mut commands: Vec<String> = Vec::new();
    for command in plan
        .split("`gcloud ")
        .skip(1)
        .filter_map(|rest| rest.split('`').next())
        .filter(|c| c.starts_with("compute instances add-tags "))
    {
        if !commands.iter().any(|c| c == command) {
            commands.push(command.to_string());
        }
    }
    commands
}

/// What kube-up leaves behind, made from this provider's cluster with gcloud: masters tagged `walk` only, rules
/// targeting `walk`, the peer rule with the events etcd's 2381 as well, and no health or etcd client rule.
fn kube_up_tags_and_rules(client: Client, sim: &Sim) {
    let gcloud = |args: &[&str]| {
        sim.gcloud(args)
            .unwrap_or_else(|e| panic!("[{client}] gcloud {args:?}: {e}"));
    };
    for (vm, zone) in [("walk", B), ("walk-a1f", C)] {
        gcloud(&[
            "compute",
            "instances",
            "add-tags",
            vm,
            "--zone",
            zone,
            "--tags=walk",
        ]);
        gcloud(&[
            "compute",
            "instances",
            "remove-tags",
            vm,
            "--zone",
            zone,
            "--tags=walk-master",
        ]);
    }
    gcloud(&[
        "compute",
        "firewall-rules",
        "update",
        "walk-etcd",
        "--allow=tcp:2380,tcp:2381",
        "--source-tags=walk",
        "--target-tags=walk",
    ]);
    gcloud(&[
        "compute",
        "firewall-rules",
        "update",
        "walk-https",
        "--target-tags=walk",
    ]);
    for rule in ["walk-healthz", "walk-etcd-client"] {
        gcloud(&["compute", "firewall-rules", "delete", rule, "--quiet"]);
    }
}

/// `terraform query` (Terraform 1.14+) discovers a cluster's masters through the `ha_master_replica` list
/// resource, with their identities, and `-generate-config-out` writes import blocks for them. Terraform only:
/// OpenTofu 1.6.2 has no `query` command and no list resources.
#[test]
fn terraform_query_lists_the_masters_of_a_cluster() {
    let client = Client::Terraform;
    let sim = Sim::start("import-query");
    let replicas = built_elsewhere(client, &sim, &[B, C]);

    let ws = Workspace::new(client, "import-query").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&format!(
        r#"
terraform {{
  required_providers {{
    ha = {{ source = "hamaster/ha" }}
  }}
}}

provider "ha" {{
  project                 = "walk"
  zone                    = "{B}"
  compute_custom_endpoint = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token            = "sim-token"
}}
"#,
        url = sim.url()
    ));
    ws.write_file(
        "masters.tfquery.hcl",
        r#"
list "ha_master_replica" "masters" {
  provider = ha
  config {
    cluster = "walk"
  }
}
"#,
    );
    ws.init();
    let query = ws.run(&["query", "-no-color"]);
    query.assert_success();
    for (zone, name) in &replicas {
        query.assert_contains(&format!("walk/{zone}/{name}"));
    }
    let generated = ws.run(&["query", "-no-color", "-generate-config-out=found.tf"]);
    generated.assert_success();
    let found = ws.read_file("found.tf");
    for (zone, name) in &replicas {
        assert!(
            found.contains(name) && found.contains(zone.as_str()),
            "found.tf lacks {zone}/{name}:\n{found}"
        );
    }
}
