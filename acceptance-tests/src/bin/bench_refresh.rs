//! Refresh cost benchmark: Compute API calls made by one `plan` of a cluster with N replicas, counted by ha-sim's
//! request log, per replica. A plan needs one look at the cluster, not one per replica or per attribute, so the
//! figure falls as N grows; target ≤ 1.5 calls per replica per plan. Both clients, N = 1, 3 and 6.
//!
//! Run: `make build && cargo run --release -p acceptance-tests --bin bench_refresh` (`--strict` exits 1 on a miss).

use std::collections::BTreeMap;

use acceptance_tests::{Client, Sim, Workspace};

const TARGET: f64 = 1.5;
const ZONES: [&str; 3] = ["europe-west1-b", "europe-west1-c", "europe-west1-d"];

fn config(sim: &Sim) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    ha = {{ source = "hamaster/ha" }}
  }}
}}
variable "replicas" {{
  type = map(string)
}}
provider "ha" {{
  project                 = "bench"
  zone                    = "europe-west1-b"
  compute_custom_endpoint = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token            = "bench"
}}
resource "ha_master_cluster" "c" {{
  name                      = "refresh"
  multizone                 = true
  etcd_client_source_ranges = ["127.0.0.0/8"]
  deletion_protection       = false # scenarios end with a destroy
}}
resource "ha_master_replica" "r" {{
  for_each = var.replicas
  cluster  = ha_master_cluster.c.spec
  name     = each.key
  zone     = each.value
}}
"#,
        url = sim.url()
    )
}

/// API calls by method so far (the log counts every Compute API request; admin calls are not in it).
fn calls(sim: &Sim) -> BTreeMap<String, u64> {
    // The log's JSON is camelCase (`byMethod`): a wrong key would read as zero calls and pass any target.
    let summary = sim.requests(false);
    let counts = &summary["byMethod"];
    assert!(
        counts.is_object(),
        "the request log has no byMethod: {summary}"
    );
    counts
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

fn diff(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

fn measure(client: Client, n: usize) -> (f64, BTreeMap<String, u64>) {
    let sim = Sim::start(&format!("bench-refresh-{client}-{n}"));
    let ws = Workspace::new(client, &format!("bench-refresh-{n}"));
    ws.write_main_tf(&config(&sim));
    let replicas: BTreeMap<String, &str> = (0..n)
        .map(|i| (format!("refresh-m{i}"), ZONES[i % ZONES.len()]))
        .collect();
    ws.write_file(
        "terraform.tfvars.json",
        &serde_json::json!({ "replicas": replicas }).to_string(),
    );
    ws.init().assert_success();
    ws.apply().assert_success();
    let before = calls(&sim);
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(0),
        "the plan must be empty:\n{}",
        plan.combined()
    );
    let made = diff(&calls(&sim), &before);
    let total: u64 = made.values().sum();
    ws.destroy().assert_success();
    (total as f64 / n as f64, made)
}

fn main() {
    let strict = std::env::args().any(|a| a == "--strict");
    let mut missed = false;
    println!("Compute API calls per replica per plan (target ≤ {TARGET}):");
    for client in Client::all() {
        for n in [1, 3, 6] {
            let (per_replica, made) = measure(client, n);
            let verdict = if per_replica <= TARGET {
                "PASS"
            } else if n == 1 {
                // One replica still costs the cluster's own look; the target is about how it scales.
                "(n=1: the cluster's own reads)"
            } else {
                missed = true;
                "MISS"
            };
            let methods: Vec<String> = made.iter().map(|(k, v)| format!("{k}×{v}")).collect();
            println!(
                "  {client:<9} N={n}: {per_replica:.2} calls/replica  {verdict}   [{}]",
                methods.join(", ")
            );
        }
    }
    if strict && missed {
        std::process::exit(1);
    }
}
