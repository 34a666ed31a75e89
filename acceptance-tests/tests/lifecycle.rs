//! The original docs' walk-through, declaratively, under both clients on ha-sim with real etcd: a cluster and one
//! replica, then 2, 3, 2 and 1 replicas in different zones (for_each), and a cluster with 3 replicas created in
//! one apply; each ends with a destroy that leaves nothing in the sim.
//! After every apply: the next plan is empty; etcd's members are exactly the declared replicas, all healthy and
//! voting; keys written at the start are all still there; the static IP answers /healthz over TLS with a
//! certificate valid for that IP under the cluster CA; the load balancer exists exactly when there are two or more
//! replicas; and the sim holds no object Terraform does not know about (`acceptance_tests::walk::check`). Changes
//! made behind Terraform's back are in drift.rs.

use std::time::Duration;

use acceptance_tests::walk::{
    assert_private_keys_only_in_the_cluster, assert_sim_empty, check, outputs, set_zones,
    walk_config as config, write_keys,
};
use acceptance_tests::{Sim, Workspace, for_each_client};

#[test]
fn grow_one_two_three_then_shrink_to_one() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("walk-{client}"));
        let ws = Workspace::new(client, "walk").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        let walk: [&[&str]; 5] = [
            &["europe-west1-b"],
            &["europe-west1-b", "europe-west1-c"],
            &["europe-west1-b", "europe-west1-c", "europe-west1-d"],
            &["europe-west1-b", "europe-west1-c"],
            &["europe-west1-b"],
        ];
        for (step, zones) in walk.iter().enumerate() {
            set_zones(&ws, zones);
            let applied = ws.apply();
            // Two replicas are worse than one: the apply that ends with two says so, and only that one.
            let warned = applied
                .combined()
                .contains("Two replicas tolerate no more failures than one");
            assert_eq!(
                warned,
                zones.len() == 2,
                "[{client}] two-replica warning after {zones:?}:\n{}",
                applied.combined()
            );
            // The plan says what each change does to availability (`domain::availability`), and only that change.
            let said = |text: &str| applied.combined().contains(text);
            let expected: [(&str, bool); 3] = [
                ("to a load balancer", step == 1),
                ("Fault tolerance drops from 1 to 0 when", step == 3),
                ("The static IP moves from the load balancer to", step == 4),
            ];
            for (text, want) in expected {
                assert_eq!(
                    said(text),
                    want,
                    "[{client}] step {step} ({zones:?}) saying {text:?}:\n{}",
                    applied.combined()
                );
            }
            // A replica's certificates are in plans as fingerprints only: a shrink used to print some 40 lines of
            // PEM for each replica it removes. (The outputs print the CA; the first step creates the cluster, whose
            // CA certificates are known at plan.)
            let plan_part = applied
                .combined()
                .split("Outputs:")
                .next()
                .unwrap_or_default()
                .to_string();
            assert!(
                step == 0 || !plan_part.contains("BEGIN CERTIFICATE"),
                "[{client}] step {step} ({zones:?}) prints a certificate:\n{}",
                applied.combined()
            );
            if step == 0 {
                let first = outputs(&ws)["replicas"]["value"][0]
                    .as_str()
                    .unwrap()
                    .to_string();
                write_keys(&sim, &first);
            }
            check(client, &ws, &sim, zones.len());
        }
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}

#[test]
fn three_replicas_in_one_apply() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("three-{client}"));
        let ws = Workspace::new(client, "three").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        // The cluster and three replicas from nothing: Terraform creates the replicas in parallel; the provider
        // founds etcd with one and joins the others one at a time, building the load balancer on the way.
        set_zones(&ws, &["europe-west1-b", "europe-west1-c", "europe-west1-d"]);
        sim.requests(true);
        ws.apply();
        assert_every_call_names_the_provider_and_client(&ws, &sim);
        let replicas: Vec<String> = outputs(&ws)["replicas"]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(replicas.len(), 3, "[{client}] {replicas:?}");
        assert_masters_run_as_the_default_account_with_kube_ups_scopes(client, &sim, &replicas);
        // One secret per replica holds its keys, and one the cluster's.
        let secrets = sim.admin("state")["secrets"]
            .as_object()
            .map_or(0, |m| m.len());
        assert_eq!(secrets, 3 + 1, "[{client}] key secrets");
        // The private keys the state holds (docs/guides/secrets.md): the cluster's four, once, in its
        // `private_keys`. None in any replica's state: not a master's own (in its secret alone), and not the
        // cluster's (its `cluster` input names their secret instead).
        assert_private_keys_only_in_the_cluster(client, &ws, 4);
        let first = &replicas[0];
        write_keys(&sim, first);
        check(client, &ws, &sim, 3);
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}

/// Every Compute call of an apply says who made it, as Google's provider does (`Terraform/<version>
/// (+https://www.terraform.io) terraform-provider-ha/<version>`), with the version of the client that ran it, so
/// operators can find the provider's calls in Cloud Audit Logs.
fn assert_every_call_names_the_provider_and_client(ws: &Workspace, sim: &Sim) {
    let client = ws.client();
    let out = ws.run(&["version", "-json"]);
    let reported: serde_json::Value = serde_json::from_str(&out.stdout).expect("version -json");
    let version = reported["terraform_version"]
        .as_str()
        .expect("the client reports its version");
    let want = format!("Terraform/{version} (+https://www.terraform.io) terraform-provider-ha/");
    let log = sim.requests(false);
    let entries = log["entries"].as_array().expect("request log entries");
    assert!(!entries.is_empty(), "[{client}] the apply made no calls?");
    let mut masters = 0;
    for e in entries {
        let ua = e["userAgent"].as_str().unwrap_or_default();
        // The masters' own reads of their keys (fetch-keys.sh runs curl), as the VM's service account.
        if ua.starts_with("curl/") {
            assert_eq!(
                e["api"], "secretmanager.secrets.versions.access",
                "[{client}] {e}"
            );
            masters += 1;
            continue;
        }
        assert!(ua.starts_with(&want), "[{client}] want {want}…: {e}");
    }
    assert!(
        masters >= 3,
        "[{client}] the three masters fetched their keys: {masters}"
    );
}

/// The kubelet and controllers on a master call Google's APIs with the VM's credentials: by default a master runs
/// as the project's default Compute Engine account with kube-up's master scopes, as URLs, plus `cloud-platform`
/// for the fetch of its keys (checked with gcloud). No master's metadata holds a private key. One `gcloud compute
/// instances list` reads every master (each gcloud run costs about 2 s of CPU; a `describe` per master cost 3).
fn assert_masters_run_as_the_default_account_with_kube_ups_scopes(
    client: acceptance_tests::Client,
    sim: &Sim,
    replicas: &[String],
) {
    let listed = sim
        .gcloud(&["compute", "instances", "list"])
        .unwrap_or_else(|e| panic!("[{client}] {e}"));
    let vms: Vec<&serde_json::Value> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter(|vm| {
            vm["name"]
                .as_str()
                .is_some_and(|n| replicas.iter().any(|r| r == n))
        })
        .collect();
    assert_eq!(
        vms.len(),
        replicas.len(),
        "[{client}] gcloud lists every master: {listed}"
    );
    for vm in vms {
        assert_master_runs_as_the_default_account_with_kube_ups_scopes(client, vm);
    }
}

fn assert_master_runs_as_the_default_account_with_kube_ups_scopes(
    client: acceptance_tests::Client,
    vm: &serde_json::Value,
) {
    let replica = vm["name"].as_str().unwrap_or_default();
    let described = vm.to_string();
    assert!(
        !described.contains("PRIVATE KEY"),
        "[{client}] {replica}'s instance holds a private key: {described}"
    );
    let account = &vm["serviceAccounts"][0];
    assert!(
        account["email"]
            .as_str()
            .is_some_and(|e| e.ends_with("-compute@developer.gserviceaccount.com")),
        "[{client}] {vm}"
    );
    let mut scopes: Vec<&str> = account["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    scopes.sort();
    assert_eq!(
        scopes,
        [
            // Secret Manager takes no other scope: the fetch of the master's keys needs it.
            "https://www.googleapis.com/auth/cloud-platform",
            "https://www.googleapis.com/auth/compute",
            "https://www.googleapis.com/auth/devstorage.read_only",
            "https://www.googleapis.com/auth/logging.write",
            "https://www.googleapis.com/auth/monitoring",
        ],
        "[{client}]"
    );
}
