//! The walk-through cluster shared by the lifecycle and drift scenarios: its configuration (a cluster named `walk`
//! and one replica per zone in `var.zones`), and `check`, every assertion made after an apply: the next plan is
//! empty; etcd's members are exactly the declared replicas, all healthy and voting; the keys written at the start
//! are all there; the static IP answers /healthz over TLS with a certificate valid for that IP under the cluster
//! CA; the load balancer (forwarding rule, and a target pool of exactly the replica VMs) exists exactly when there
//! are two or more replicas; and the sim holds no object Terraform does not know about.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use serde_json::Value;

use crate::{Client, Sim, Workspace};

/// The configuration: `ha_master_cluster.c` named `walk`, `ha_master_replica.r[<zone>]` per zone, in
/// europe-west1 (three zones).
pub fn walk_config(sim: &Sim) -> String {
    walk_config_in(sim, "europe-west1-b")
}

/// The same cluster with its primary zone (and so its region) chosen: us-central1 has four zones, room for a
/// fourth replica.
pub fn walk_config_in(sim: &Sim, primary_zone: &str) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    ha = {{ source = "hamaster/ha" }}
  }}
}}

variable "zones" {{
  type = list(string)
}}

# What the masters are made of; the defaults are the provider's, so only scenarios that roll set them.
variable "machine_type" {{
  type    = string
  default = "e2-standard-2"
}}

variable "image" {{
  type    = string
  default = "projects/cos-cloud/global/images/family/cos-stable"
}}

variable "data_disk_size_gb" {{
  type    = number
  default = 20
}}

variable "network" {{
  type    = string
  default = "default"
}}

# Unset: the network's own subnetwork (`default`).
variable "subnetwork" {{
  type    = string
  default = null
}}

variable "etcd_version" {{
  type    = string
  default = "3.4"
}}

# Unset: the provider's default for a new cluster, and what it runs for an existing one.
variable "kubernetes_version" {{
  type    = string
  default = null
}}

# Where Terraform may reach etcd from: ha-sim's host is 127.0.0.1 unless `ha-sim fault client-ip` moves it.
variable "etcd_client_source_ranges" {{
  type    = list(string)
  default = ["127.0.0.0/8"]
}}

provider "ha" {{
  project                 = "walk"
  zone                    = "{primary_zone}"
  compute_custom_endpoint = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token            = "sim-token"
  drain_delay             = "500ms" # ha-sim's load balancers take 100 ms to see a pool change
  roll_soak               = "600ms" # still three checks after each rolled replica, 200 ms apart
  lock_ttl                = "6s"    # a killed apply's lock is taken over after 6 s, not 30 (the resume matrix)
}}

resource "ha_master_cluster" "c" {{
  name                      = "walk"
  multizone                 = true
  etcd_client_source_ranges = var.etcd_client_source_ranges
  deletion_protection       = false # scenarios end with a destroy
  machine_type              = var.machine_type
  image                     = var.image
  data_disk_size_gb         = var.data_disk_size_gb
  network                   = var.network
  subnetwork                = var.subnetwork
  etcd_version              = var.etcd_version
  kubernetes_version        = var.kubernetes_version
}}

resource "ha_master_replica" "r" {{
  for_each = toset(var.zones)
  cluster  = ha_master_cluster.c.spec
  zone     = each.value
}}

output "ca" {{
  value = ha_master_cluster.c.ca_certificate
}}

output "ip" {{
  value = ha_master_cluster.c.external_ip
}}

output "replicas" {{
  value = sort([for r in ha_master_replica.r : r.name])
}}

output "by_zone" {{
  value = {{ for z, r in ha_master_replica.r : z => r.name }}
}}
"#,
        url = sim.url()
    )
}

/// A configuration (the walk-through's, or a scenario's own) with each `(from, to)` replaced once, for scenarios
/// that need a setting or an output more; fails loudly when the configuration no longer has `from`, rather than
/// testing the wrong thing. Every scenario edits HCL through this, never a bare `replace`.
pub fn edit_config(base: String, edits: &[(&str, &str)]) -> String {
    edits.iter().fold(base, |config, (from, to)| {
        assert!(
            config.contains(from),
            "the configuration no longer has {from:?}: the edit would test nothing"
        );
        config.replacen(from, to, 1)
    })
}

pub fn set_zones(ws: &Workspace, zones: &[&str]) {
    set_vars(ws, zones, &[]);
}

/// The replicas' zones and other variables of the walk-through's configuration (`machine_type`, `image`,
/// `data_disk_size_gb`, `network`, `subnetwork`, `etcd_version`).
pub fn set_vars(ws: &Workspace, zones: &[&str], vars: &[(&str, &str)]) {
    let mut all = serde_json::json!({ "zones": zones });
    for (k, v) in vars {
        all[*k] = Value::String(v.to_string());
    }
    ws.write_file("terraform.tfvars.json", &all.to_string());
}

/// The replicas' zones and the ranges etcd's client port admits (`etcd_client_source_ranges`).
pub fn set_zones_and_etcd_ranges(ws: &Workspace, zones: &[&str], ranges: &[&str]) {
    let all = serde_json::json!({ "zones": zones, "etcd_client_source_ranges": ranges });
    ws.write_file("terraform.tfvars.json", &all.to_string());
}

/// etcd's member names, sorted, as `vm`'s etcd sees them from inside the VPC (where the firewall admits it, even
/// when the Terraform host is blocked).
pub fn member_names(sim: &Sim, vm: &str) -> Vec<String> {
    let out = sim.ssh(vm, &["etcdctl", "member", "list"]);
    let mut names: Vec<String> = out
        .lines()
        .filter_map(|l| l.split(", ").nth(2).map(str::to_string))
        .collect();
    names.sort();
    names
}

/// Waits until etcd on `vm` answers healthy (it has a leader and serves a quorum read): after a member is crashed
/// on purpose, the others may be electing a new leader, and a scenario about "one member down" must not look
/// during the election, when every member reads unhealthy.
pub fn wait_until_healthy(sim: &Sim, vm: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match sim.try_ssh(
            vm,
            &["etcdctl", "--command-timeout=2s", "endpoint", "health"],
        ) {
            Ok(_) => return,
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("etcd on {vm} did not become healthy within 30 s: {e}")
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
        }
    }
}

/// Waits until the load balancer sees every backend healthy: ha-sim's health checker, which
/// `targetPools.getHealth` (what the provider reads) answers from. After a VM starts, its check must pass several
/// times in a row, so it lags etcd's health (`wait_until_healthy`), by seconds under the full suite's load.
pub fn wait_until_load_balancer_healthy(sim: &Sim) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let rules = sim.status()["forwardingRules"].clone();
        let backends: Vec<&Value> = rules
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|rule| rule["backends"].as_array().into_iter().flatten())
            .collect();
        if !backends.is_empty() && backends.iter().all(|b| b["healthy"] == true) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the load balancer did not see every backend healthy within 30 s: {rules}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `output -json`, parsed.
pub fn outputs(ws: &Workspace) -> Value {
    let out = ws.run(&["output", "-json"]);
    out.assert_success();
    serde_json::from_str(&out.stdout).expect("terraform output -json")
}

/// Replica names by zone, as state has them.
pub fn replicas_by_zone(ws: &Workspace) -> BTreeMap<String, String> {
    outputs(ws)["by_zone"]["value"]
        .as_object()
        .expect("by_zone output")
        .iter()
        .map(|(z, n)| (z.clone(), n.as_str().unwrap().to_string()))
        .collect()
}

/// The us-central1 zones the three-replica scenarios use (the region has a fourth, `-f`, for a grow).
pub const THREE_ZONES: [&str; 3] = ["us-central1-a", "us-central1-b", "us-central1-c"];

/// A private sim and a workspace with the walk-through's cluster (primary zone us-central1-a) and one replica in
/// each of [`THREE_ZONES`], applied. Returns the replicas by zone.
pub fn three_replicas(
    client: Client,
    scenario: &str,
    timeout: Duration,
) -> (Sim, Workspace, BTreeMap<String, String>) {
    let sim = Sim::start(&format!("{scenario}-{client}"));
    let ws = Workspace::new(client, scenario).with_timeout(timeout);
    ws.write_main_tf(&walk_config_in(&sim, THREE_ZONES[0]));
    ws.init();
    set_zones(&ws, &THREE_ZONES);
    ws.apply();
    let by_zone = replicas_by_zone(&ws);
    (sim, ws, by_zone)
}

/// How many keys `write_keys` writes and `check` expects.
pub const KEYS: usize = 5;

/// Writes `walk/k0..` through the etcd of `vm`, so later checks can see they survived every change.
pub fn write_keys(sim: &Sim, vm: &str) {
    for i in 0..KEYS {
        sim.ssh(
            vm,
            &["etcdctl", "put", &format!("walk/k{i}"), &format!("v{i}")],
        );
    }
}

/// Writes `n` keys (a multiple of 100) `<prefix>k<i>` through `vm` in transactions of 100 puts (etcd's default
/// limit is 128 operations per transaction): ten etcdctl runs for a thousand keys. Each txn reads no comparison,
/// the puts, and no failure branch, each section ended by an empty line.
pub fn write_many_keys(sim: &Sim, vm: &str, prefix: &str, n: usize) {
    // The batch's counter lives in the outer loop: the pipeline's left side runs in a subshell.
    let script = format!(
        r#"for b in $(seq 0 100 {last}); do {{ echo; for i in $(seq $b $((b+99))); do echo "put {prefix}k$i v$i"; done; echo; echo; }} | etcdctl txn >/dev/null || exit 1; done"#,
        last = n - 100
    );
    sim.ssh(vm, &["sh", "-c", &script]);
    assert_eq!(key_count(sim, vm, prefix), n, "keys written through {vm}");
}

/// How many keys under `prefix` `vm`'s etcd holds (a linearizable read: it needs quorum).
pub fn key_count(sim: &Sim, vm: &str, prefix: &str) -> usize {
    let out = sim.ssh(
        vm,
        &[
            "sh",
            "-c",
            &format!("etcdctl get {prefix} --prefix --keys-only | grep -c ."),
        ],
    );
    out.trim().parse().unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Deletes a replica's VM and its etcd data disk with Google's own CLI, as an operator would by mistake.
pub fn delete_vm_and_disk(sim: &Sim, zone: &str, vm: &str) {
    let disk = format!("{vm}-pd");
    for args in [
        [
            "compute",
            "instances",
            "delete",
            vm,
            "--zone",
            zone,
            "--quiet",
        ],
        [
            "compute", "disks", "delete", &disk, "--zone", zone, "--quiet",
        ],
    ] {
        sim.gcloud(&args).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Every check of the walk-through, for the replicas Terraform says exist.
pub fn check(client: Client, ws: &Workspace, sim: &Sim, expected: usize) {
    check_on_port(client, ws, sim, expected, 443);
}

/// [`check`] for a cluster whose API is on `api_port`.
pub fn check_on_port(client: Client, ws: &Workspace, sim: &Sim, expected: usize, api_port: u16) {
    let out = outputs(ws);
    let replicas: BTreeSet<String> = out["replicas"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        replicas.len(),
        expected,
        "[{client}] replicas in state: {replicas:?}"
    );

    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(0),
        "[{client}] the plan after apply must be empty:\n{}",
        plan.combined()
    );

    check_etcd(client, sim, &replicas);
    check_static_ip(client, &out, &replicas, api_port);
    check_load_balancer(client, sim, &replicas, expected);
}

/// etcd: members == replicas, every one voting and healthy, seen from every replica, each holding every key.
fn check_etcd(client: Client, sim: &Sim, replicas: &BTreeSet<String>) {
    // One ssh per replica for the three questions (each `ha-sim ssh` is a process of its own, and this check
    // runs after every case of the resume matrix); `&&` makes a failed health check fail the whole.
    const SPLIT: &str = "--- keys ---";
    let script = format!(
        "etcdctl member list -w json && etcdctl endpoint health >&2 && echo '{SPLIT}' && \
         etcdctl get walk/ --prefix --keys-only"
    );
    for vm in replicas {
        let out = sim.ssh(vm, &["sh", "-c", &script]);
        let (list, keys) = out
            .split_once(SPLIT)
            .unwrap_or_else(|| panic!("[{client}] etcdctl on {vm} said: {out}"));
        let list: Value = serde_json::from_str(list).unwrap();
        let members = list["members"].as_array().unwrap();
        let names: BTreeSet<String> = members
            .iter()
            .map(|m| m["name"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(&names, replicas, "[{client}] etcd members seen from {vm}");
        assert!(
            members
                .iter()
                .all(|m| m["isLearner"].as_bool() != Some(true)),
            "[{client}] a learner is left: {list}"
        );
        assert_eq!(
            keys.lines().filter(|l| !l.trim().is_empty()).count(),
            KEYS,
            "[{client}] keys seen from {vm}"
        );
    }
}

/// The static IP serves the API over TLS, verified for that IP under the cluster CA, answered by a replica.
fn check_static_ip(client: Client, out: &Value, replicas: &BTreeSet<String>, port: u16) {
    let ca = out["ca"]["value"].as_str().unwrap().to_string();
    let ip: IpAddr = out["ip"]["value"].as_str().unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = rt
        .block_on(ha_ops::endpoint::probe(
            &ca,
            ip,
            ip,
            port,
            Duration::from_secs(5),
        ))
        .unwrap_or_else(|e| panic!("[{client}] https://{ip}:{port}/healthz: {e}"));
    assert_eq!(answer.status, 200, "[{client}] /healthz on the static IP");
    assert!(
        answer
            .replica
            .as_ref()
            .is_some_and(|r| replicas.contains(r)),
        "[{client}] answered by {:?}",
        answer.replica
    );
}

/// The load balancer exists exactly with two or more replicas, its pool holding exactly the replica VMs; nothing
/// in the sim that state does not know.
fn check_load_balancer(client: Client, sim: &Sim, replicas: &BTreeSet<String>, expected: usize) {
    let rules = sim.names("forwardingRules");
    assert_eq!(
        rules,
        if expected >= 2 {
            vec!["walk".to_string()]
        } else {
            vec![]
        },
        "[{client}] forwarding rules"
    );
    let state = sim.admin("state");
    let pools: BTreeMap<String, BTreeSet<String>> = state["targetPools"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, p)| {
            let members = p["instances"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str()?.rsplit('/').next().map(str::to_string))
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), members)
        })
        .collect();
    let want_pools: BTreeMap<String, BTreeSet<String>> = if expected >= 2 {
        [("walk".to_string(), replicas.clone())].into()
    } else {
        BTreeMap::new()
    };
    assert_eq!(
        pools, want_pools,
        "[{client}] target pools and their members"
    );
    let health_checks: Vec<String> = state["httpHealthChecks"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, h)| h["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        health_checks.len(),
        usize::from(expected >= 2),
        "[{client}] health checks: {health_checks:?}"
    );
    let instances: BTreeSet<String> = sim.names("instances").into_iter().collect();
    assert_eq!(&instances, replicas, "[{client}] instances in the sim");
    let mut addresses: BTreeSet<String> = replicas.iter().map(|r| format!("{r}-int")).collect();
    addresses.insert("walk-ip".into());
    assert_eq!(
        sim.names("addresses").into_iter().collect::<BTreeSet<_>>(),
        addresses,
        "[{client}] addresses in the sim"
    );
}

/// The provider's lock labels on a cluster's static address (`domain::lock`).
const LOCK_LABELS: &str =
    "ha-lock-token,ha-lock-holder,ha-lock-doing,ha-lock-since,ha-lock-renewed";

/// `gcloud beta compute addresses update walk-ip --region <region>` with `more` arguments.
fn update_walk_address(sim: &Sim, region: &str, more: &[&str]) {
    let address = [
        "beta",
        "compute",
        "addresses",
        "update",
        "walk-ip",
        "--region",
        region,
    ];
    sim.gcloud(&[&address[..], more].concat())
        .unwrap_or_else(|e| panic!("gcloud addresses update: {e}"));
}

/// The walk-through cluster's lock as another apply holds it: its labels on the static address (`walk-ip` in
/// `region`), written with gcloud. `renewed` is when that holder last renewed it (seconds since the epoch): now
/// for a live one, which a provider waits for, or long ago for one that died, which it takes over after
/// `lock_ttl`.
pub fn hold_walk_lock(sim: &Sim, region: &str, holder: &str, doing: &str, renewed: u64) {
    let labels = format!(
        "ha-lock-token=other,ha-lock-holder={holder},ha-lock-doing={doing},ha-lock-since={renewed},\
         ha-lock-renewed={renewed}"
    );
    update_walk_address(sim, region, &["--update-labels", &labels]);
}

/// The lock [`hold_walk_lock`] wrote, released.
pub fn release_walk_lock(sim: &Sim, region: &str) {
    update_walk_address(sim, region, &["--remove-labels", LOCK_LABELS]);
}

/// The replica VMs that are not RUNNING, with their status.
pub fn not_running(sim: &Sim) -> Vec<(String, String)> {
    sim.vm_field("status")
        .into_iter()
        .filter(|(_, status)| status != "RUNNING")
        .collect()
}

/// After a destroy: the sim holds nothing of any kind the provider makes (VMs, addresses, firewall rules, health
/// checks, target pools, forwarding rules, the replicas' key secrets).
pub fn assert_sim_empty(client: Client, sim: &Sim) {
    let state = sim.admin("state");
    for kind in [
        "instances",
        "addresses",
        "firewalls",
        "httpHealthChecks",
        "targetPools",
        "forwardingRules",
        "secrets",
    ] {
        let left: Vec<&String> = state[kind]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
            .collect();
        assert!(left.is_empty(), "[{client}] destroy left {kind}: {left:?}");
    }
}

/// `config` (the walk-through's) with the provider pointed at the emulator and the cluster's `block` (a `backup`
/// block, with a `restore` block after it if the scenario needs one), as the scenarios against Cloud Storage
/// write it.
pub fn with_storage(config: String, gcs: &crate::FakeGcs, block: &str) -> String {
    with_storage_at(config, &gcs.endpoint(), block)
}

/// `with_storage` with the provider's storage calls sent to `endpoint` (a proxy in front of the emulator).
pub fn with_storage_at(config: String, endpoint: &str, block: &str) -> String {
    edit_config(
        config,
        &[
            (
                "  access_token            = \"sim-token\"\n",
                &format!(
                    "  access_token            = \"sim-token\"\n  storage_custom_endpoint = \"{endpoint}\"\n"
                ),
            ),
            (
                "  kubernetes_version        = var.kubernetes_version\n",
                &format!("  kubernetes_version        = var.kubernetes_version\n{block}"),
            ),
        ],
    )
}

/// The walk cluster's keys secret as `gcloud secrets versions access latest` reads it back from ha-sim, after an
/// apply that had to write it again (deleted by hand): the payload, asserted to be there.
pub fn cluster_keys_secret_written(client: Client, sim: &Sim) -> String {
    let secret = sim
        .gcloud(&[
            "secrets",
            "versions",
            "access",
            "latest",
            "--secret",
            "walk-cluster-keys",
        ])
        .unwrap_or_else(|e| panic!("[{client}] the keys secret is back: {e}"));
    let payload = secret.to_string();
    assert!(
        payload.contains("data"),
        "[{client}] the keys secret has a payload ({} bytes)",
        payload.len()
    );
    payload
}

/// The walk cluster's private keys as its keys secret holds them (JSON, `ops::cluster_keys::ClusterKeys`), read
/// with `gcloud secrets versions access` against ha-sim as the provider's credentials may.
pub fn cluster_keys(sim: &Sim) -> Value {
    use base64::Engine as _;
    let access = sim
        .gcloud(&[
            "secrets",
            "versions",
            "access",
            "latest",
            "--secret",
            "walk-cluster-keys",
        ])
        .unwrap();
    let data = access["payload"]["data"].as_str().unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
    )
    .unwrap()
}

/// PEM private keys in `text` (PKCS#8, PKCS#1 and SEC 1 alike), counted by their BEGIN lines' labels.
pub fn private_keys_in(text: &str) -> usize {
    let begin = "-----BEGIN ";
    text.match_indices(begin)
        .filter(|(at, _)| {
            text[at + begin.len()..]
                .split_once("-----")
                .is_some_and(|(label, _)| label.ends_with("PRIVATE KEY"))
        })
        .count()
}

/// The state holds `want` private keys in all, every one in the cluster's `private_keys` and none in any
/// replica's (docs/guides/secrets.md, "Where every secret lives").
pub fn assert_private_keys_only_in_the_cluster(client: Client, ws: &Workspace, want: usize) {
    let text = ws.read_file("terraform.tfstate");
    assert_eq!(
        private_keys_in(&text),
        want,
        "[{client}] private keys in the state"
    );
    let state: Value = serde_json::from_str(&text).expect("the state is JSON");
    for resource in state["resources"].as_array().into_iter().flatten() {
        for instance in resource["instances"].as_array().into_iter().flatten() {
            let mut attributes = instance["attributes"].clone();
            if resource["type"] == "ha_master_cluster" {
                attributes["private_keys"] = Value::Null;
            }
            assert_eq!(
                private_keys_in(&attributes.to_string()),
                0,
                "[{client}] {} {} holds private keys outside the cluster's `private_keys`",
                resource["type"],
                attributes["name"]
            );
        }
    }
}
