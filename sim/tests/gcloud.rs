//! gcloud pointed at ha-sim (issue #12): the operator's read commands and the provider's calls work.
//!
//! Each test lists the API methods its gcloud commands must have called successfully, and checks the request
//! log for them at the end; `gcloud_covers_every_provider_method` checks that together these lists hold every
//! method the provider calls (the table in docs/guides/gce.md), so a method the provider starts calling needs a
//! gcloud command here too.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Command, Stdio};

const Z: &str = "europe-west1-b";
const R: &str = "europe-west1";

/// What `gcloud_reads_and_writes` makes gcloud call.
const READS_AND_WRITES: &[&str] = &[
    "compute.projects.get",
    "compute.zones.list",
    "compute.zones.get",
    "compute.regions.get",
    "compute.machineTypes.get",
    "compute.machineTypes.list",
    "compute.machineTypes.aggregatedList",
    "compute.images.get",
    "compute.images.getFromFamily",
    "compute.images.list",
    "compute.addresses.insert",
    "compute.regionOperations.wait",
    "compute.addresses.aggregatedList",
    "compute.addresses.list",
    "compute.addresses.get",
    "compute.addresses.setLabels",
    "compute.addresses.delete",
];

/// How many zones the sim's catalogue has (`sim/src/state/catalog.rs`).
fn catalog_zones() -> usize {
    ha_sim::state::catalog::zones().count()
}

/// What `gcloud_firewall_rules` makes gcloud call.
const FIREWALL_RULES: &[&str] = &[
    "compute.firewalls.insert",
    "compute.globalOperations.wait",
    "compute.firewalls.patch",
    "compute.firewalls.get",
    "compute.firewalls.list",
    "compute.firewalls.delete",
];

/// What `gcloud_instances` makes gcloud call; `batch` is the batch endpoint itself.
const INSTANCES: &[&str] = &[
    "compute.instances.insert",
    "compute.zoneOperations.wait",
    "compute.instances.aggregatedList",
    "compute.instances.list",
    "compute.instances.get",
    "compute.disks.aggregatedList",
    "compute.instances.stop",
    "compute.instances.setMachineType",
    "compute.instances.start",
    "compute.instances.setMetadata",
    "compute.instances.setLabels",
    "compute.instances.setTags",
    "compute.instances.deleteAccessConfig",
    "compute.instances.addAccessConfig",
    "compute.globalOperations.aggregatedList",
    "compute.zoneOperations.get",
    "batch",
    "compute.instances.delete",
];

/// What `gcloud_disks` makes gcloud call.
const DISKS: &[&str] = &[
    "compute.disks.insert",
    "compute.disks.get",
    "compute.instances.attachDisk",
    "compute.disks.resize",
    "compute.instances.detachDisk",
    "compute.disks.delete",
];

/// What `gcloud_load_balancing` makes gcloud call.
const LOAD_BALANCING: &[&str] = &[
    "compute.httpHealthChecks.insert",
    "compute.httpHealthChecks.get",
    "compute.targetPools.insert",
    "compute.targetPools.addInstance",
    "compute.targetPools.getHealth",
    "compute.targetPools.get",
    "compute.forwardingRules.insert",
    "compute.forwardingRules.aggregatedList",
    "compute.forwardingRules.get",
    "compute.forwardingRules.delete",
    "compute.targetPools.removeInstance",
    "compute.targetPools.delete",
    "compute.httpHealthChecks.delete",
];

/// What `gcloud_subnetworks` makes gcloud call.
const SUBNETWORKS: &[&str] = &[
    "compute.subnetworks.insert",
    "compute.regionOperations.wait",
    "compute.subnetworks.get",
    "compute.subnetworks.aggregatedList",
    "compute.subnetworks.list",
    "compute.addresses.insert",
    "compute.instances.insert",
    "compute.subnetworks.delete",
];

/// Fails unless gcloud (its User-Agent names `google-cloud-sdk`, inside a batch too) called each of `methods`
/// with a 2xx answer on this sim.
async fn assert_gcloud_called(sim: &Sim, methods: &[&str]) {
    let log = sim.admin("GET", "requests", None).await;
    let called: BTreeSet<&str> = log["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| {
            e["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s))
                && e["userAgent"]
                    .as_str()
                    .is_some_and(|ua| ua.contains("google-cloud-sdk"))
        })
        .filter_map(|e| e["api"].as_str())
        .collect();
    let missing: Vec<&&str> = methods.iter().filter(|m| !called.contains(**m)).collect();
    assert!(
        missing.is_empty(),
        "gcloud never called {missing:?} successfully; it called {called:?}"
    );
}

/// Runs gcloud against the sim in a blocking thread (the sim serves on this runtime).
async fn gcloud(sim: &Sim, args: &[&str]) -> Result<Value, String> {
    gcloud_as(sim, "sim-token", args).await
}

/// Runs gcloud with the access token `token` (`sim-sa:<email>` is a service account to the sim's IAM).
async fn gcloud_as(sim: &Sim, token: &str, args: &[&str]) -> Result<Value, String> {
    let dir = sim.dir.path().join("gcloud");
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join(format!("token-{}", token.replace([':', '@', '.'], "_")));
    std::fs::write(&token_file, token).unwrap();
    let token = token_file;
    let endpoint = format!("{}compute/v1/", sim.endpoint);
    let secrets_endpoint = sim.endpoint.clone();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = Command::new("gcloud")
            .args(&args)
            .arg("--format=json")
            .env("CLOUDSDK_CONFIG", dir.join("config"))
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", endpoint)
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER",
                secrets_endpoint,
            )
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token)
            .env("CLOUDSDK_CORE_PROJECT", PROJECT)
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            // Nothing to report, update or probe in a test; each saves part of gcloud's start-up.
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "1")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "1")
            .env("CLOUDSDK_CORE_CHECK_GCE_METADATA", "false")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running gcloud: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "gcloud {args:?}: {}\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = if stdout.trim().is_empty() {
            "null"
        } else {
            &stdout
        };
        serde_json::from_str(text)
            .map_err(|e| format!("gcloud {args:?} is not JSON ({e}): {stdout}"))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_reads_and_writes() {
    let sim = start().await;
    let project = gcloud(&sim, &["compute", "project-info", "describe"])
        .await
        .unwrap();
    assert!(
        project["defaultServiceAccount"]
            .as_str()
            .is_some_and(|e| e.ends_with("-compute@developer.gserviceaccount.com")),
        "{project}"
    );
    let zones = gcloud(&sim, &["compute", "zones", "list"]).await.unwrap();
    assert!(zones.as_array().unwrap().iter().any(|z| z["name"] == Z));
    let zone = gcloud(&sim, &["compute", "zones", "describe", Z])
        .await
        .unwrap();
    assert_eq!(zone["name"], Z);
    let region = gcloud(&sim, &["compute", "regions", "describe", R])
        .await
        .unwrap();
    assert_eq!(region["name"], R);
    // The machine-type catalogue, as a user checks a type before naming it.
    let e2 = gcloud(
        &sim,
        &[
            "compute",
            "machine-types",
            "describe",
            "e2-standard-4",
            "--zone",
            Z,
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        (e2["guestCpus"].as_u64(), e2["memoryMb"].as_u64()),
        (Some(4), Some(16384)),
        "{e2}"
    );
    let types = gcloud(&sim, &["compute", "machine-types", "list", "--zones", Z])
        .await
        .unwrap();
    let names: Vec<&str> = types
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"e2-standard-2") && names.contains(&"n2-highmem-8"),
        "{names:?}"
    );
    assert!(!names.contains(&"e2-standard-3"), "{names:?}");
    // Without --zones gcloud asks every zone at once.
    let everywhere = gcloud(
        &sim,
        &[
            "compute",
            "machine-types",
            "list",
            "--filter=name=e2-medium",
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        everywhere.as_array().map(Vec::len),
        Some(catalog_zones()),
        "one e2-medium per zone: {everywhere}"
    );
    gcloud(
        &sim,
        &[
            "compute",
            "machine-types",
            "describe",
            "e2-standard-3",
            "--zone",
            Z,
        ],
    )
    .await
    .expect_err("a type no zone offers is not found");
    // The public image catalogue, as a user checks an image family before naming it.
    let family = gcloud(
        &sim,
        &[
            "compute",
            "images",
            "describe-from-family",
            "ubuntu-2404-lts-amd64",
            "--project",
            "ubuntu-os-cloud",
        ],
    )
    .await
    .unwrap();
    let newest = family["name"].as_str().unwrap().to_string();
    assert!(newest.starts_with("ubuntu-2404-noble-amd64-"), "{family}");
    let image = gcloud(
        &sim,
        &[
            "compute",
            "images",
            "describe",
            &newest,
            "--project",
            "ubuntu-os-cloud",
        ],
    )
    .await
    .unwrap();
    assert_eq!(image["family"], "ubuntu-2404-lts-amd64", "{image}");
    let cos = gcloud(
        &sim,
        &[
            "compute",
            "images",
            "list",
            "--project",
            "cos-cloud",
            "--no-standard-images",
        ],
    )
    .await
    .unwrap();
    let families: Vec<&str> = cos
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["family"].as_str())
        .collect();
    assert!(families.contains(&"cos-stable"), "{cos}");
    gcloud(
        &sim,
        &[
            "compute",
            "images",
            "describe-from-family",
            "ubuntu-2404-lts",
            "--project",
            "ubuntu-os-cloud",
        ],
    )
    .await
    .expect_err("a family nobody publishes is not found");

    gcloud(
        &sim,
        &["compute", "addresses", "create", "ip1", "--region", R],
    )
    .await
    .unwrap();
    let list = gcloud(&sim, &["compute", "addresses", "list"])
        .await
        .unwrap();
    assert_eq!(list[0]["name"], "ip1", "{list}");
    // With --regions gcloud lists each region (addresses.list) instead of aggregating.
    let list = gcloud(&sim, &["compute", "addresses", "list", "--regions", R])
        .await
        .unwrap();
    assert_eq!(list[0]["name"], "ip1", "{list}");
    // Labels on addresses are a beta command in gcloud 528; it sends the v1 setLabels with the fingerprint.
    gcloud(
        &sim,
        &[
            "beta",
            "compute",
            "addresses",
            "update",
            "ip1",
            "--region",
            R,
            "--update-labels",
            "cluster=c1",
        ],
    )
    .await
    .unwrap();
    let ip = gcloud(
        &sim,
        &["compute", "addresses", "describe", "ip1", "--region", R],
    )
    .await
    .unwrap();
    assert_eq!(ip["status"], "RESERVED");
    assert_eq!(ip["labels"]["cluster"], "c1", "{ip}");

    gcloud(
        &sim,
        &["compute", "addresses", "delete", "ip1", "--region", R],
    )
    .await
    .unwrap();
    let list = sim.get(&format!("regions/{R}/addresses")).await.body;
    assert!(list.get("items").is_none(), "{list}");
    assert_gcloud_called(&sim, READS_AND_WRITES).await;
}

/// Each step is a separate test so one unfaithful answer does not hide the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_firewall_rules() {
    let sim = start().await;
    gcloud(
        &sim,
        &[
            "compute",
            "firewall-rules",
            "create",
            "fw1",
            "--allow",
            "tcp:443",
            "--source-ranges",
            "10.0.0.0/8",
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "firewall-rules",
            "update",
            "fw1",
            "--allow",
            "tcp:6443",
        ],
    )
    .await
    .unwrap();
    let fw = gcloud(&sim, &["compute", "firewall-rules", "describe", "fw1"])
        .await
        .unwrap();
    assert_eq!(fw["allowed"][0]["ports"][0], "6443", "{fw}");
    let list = gcloud(&sim, &["compute", "firewall-rules", "list"])
        .await
        .unwrap();
    assert_eq!(list[0]["name"], "fw1", "{list}");
    gcloud(&sim, &["compute", "firewall-rules", "delete", "fw1"])
        .await
        .unwrap();
    assert_gcloud_called(&sim, FIREWALL_RULES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_instances() {
    let sim = start().await;
    for name in ["vm1", "vm2"] {
        gcloud(
            &sim,
            &[
                "compute",
                "instances",
                "create",
                name,
                "--zone",
                Z,
                "--machine-type",
                "e2-small",
                "--image-family",
                "debian-12",
                "--image-project",
                "debian-cloud",
                "--metadata",
                "k=v",
            ],
        )
        .await
        .unwrap();
    }
    let list = gcloud(&sim, &["compute", "instances", "list"])
        .await
        .unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    // With --zones gcloud lists each zone (instances.list) instead of aggregating.
    let list = gcloud(&sim, &["compute", "instances", "list", "--zones", Z])
        .await
        .unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    let vm = gcloud(
        &sim,
        &["compute", "instances", "describe", "vm1", "--zone", Z],
    )
    .await
    .unwrap();
    assert_eq!(vm["status"], "RUNNING", "{vm}");
    let disks = gcloud(&sim, &["compute", "disks", "list"]).await.unwrap();
    assert_eq!(disks.as_array().unwrap().len(), 2, "{disks}");
    gcloud(&sim, &["compute", "instances", "stop", "vm1", "--zone", Z])
        .await
        .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "set-machine-type",
            "vm1",
            "--zone",
            Z,
            "--machine-type",
            "e2-medium",
        ],
    )
    .await
    .unwrap();
    gcloud(&sim, &["compute", "instances", "start", "vm1", "--zone", Z])
        .await
        .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "add-metadata",
            "vm1",
            "--zone",
            Z,
            "--metadata",
            "a=b",
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "add-labels",
            "vm1",
            "--zone",
            Z,
            "--labels",
            "role=master",
        ],
    )
    .await
    .unwrap();
    // Each a read for the tags' fingerprint, then setTags.
    for (verb, tags) in [
        ("add-tags", "kubernetes-master,old"),
        ("remove-tags", "old"),
    ] {
        gcloud(
            &sim,
            &[
                "compute",
                "instances",
                verb,
                "vm1",
                "--zone",
                Z,
                "--tags",
                tags,
            ],
        )
        .await
        .unwrap();
    }
    // Checked through the API: `instances describe` ran above, and each gcloud run costs a second of CPU.
    let vm = sim.get(&format!("zones/{Z}/instances/vm1")).await.body;
    assert!(
        vm["machineType"].as_str().unwrap().ends_with("/e2-medium"),
        "{vm}"
    );
    assert_eq!(vm["labels"]["role"], "master", "{vm}");
    assert_eq!(
        vm["tags"]["items"],
        serde_json::json!(["kubernetes-master"]),
        "{vm}"
    );
    assert_eq!(vm["status"], "RUNNING", "{vm}");
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "delete-access-config",
            "vm1",
            "--zone",
            Z,
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "add-access-config",
            "vm1",
            "--zone",
            Z,
        ],
    )
    .await
    .unwrap();
    // globalOperations.aggregatedList: every operation above, flattened over its scopes by gcloud.
    let ops = gcloud(&sim, &["compute", "operations", "list"])
        .await
        .unwrap();
    let ops = ops.as_array().unwrap();
    let insert_vm1 = ops
        .iter()
        .find(|o| {
            o["operationType"] == "insert"
                && o["targetLink"]
                    .as_str()
                    .unwrap()
                    .ends_with("/instances/vm1")
        })
        .unwrap_or_else(|| panic!("no insert of vm1 in {ops:?}"));
    assert_eq!(insert_vm1["status"], "DONE", "{insert_vm1}");
    assert!(
        ops.iter().any(|o| o["operationType"] == "setMachineType"),
        "{ops:?}"
    );
    let op = insert_vm1["name"].as_str().unwrap();
    let one = gcloud(
        &sim,
        &["compute", "operations", "describe", op, "--zone", Z],
    )
    .await
    .unwrap();
    assert_eq!(one["status"], "DONE", "{one}");
    // Two names in one delete: gcloud sends both deletes, then the polling of both operations, as batches.
    gcloud(
        &sim,
        &["compute", "instances", "delete", "vm1", "vm2", "--zone", Z],
    )
    .await
    .unwrap();
    let list = sim.get(&format!("zones/{Z}/instances")).await.body;
    assert!(list.get("items").is_none(), "{list}");
    // A batch with a call that fails: gcloud reports GCE's error and the other call still happens. (vm3 comes
    // from the API.)
    instance(&sim, "vm3", Z, None).await;
    let err = gcloud(
        &sim,
        &["compute", "instances", "delete", "nope", "vm3", "--zone", Z],
    )
    .await
    .unwrap_err();
    assert!(
        err.contains(&format!(
            "The resource 'projects/{PROJECT}/zones/{Z}/instances/nope' was not found"
        )),
        "{err}"
    );
    let list = sim.get(&format!("zones/{Z}/instances")).await.body;
    assert!(list.get("items").is_none(), "vm3 deleted: {list}");
    let log = sim.admin("GET", "requests", None).await;
    assert!(
        log["byMethod"]["batch"].as_u64().unwrap_or_default() >= 2,
        "the deletes went through the batch endpoint: {log}"
    );
    assert_gcloud_called(&sim, INSTANCES).await;
}

/// The provider's data-disk calls and what an operator does with a disk by hand, including GCE's refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_disks() {
    let sim = start().await;
    // What is not under test goes straight to the API: each gcloud run costs a second of CPU.
    instance(&sim, "m1", Z, None).await;
    gcloud(
        &sim,
        &[
            "compute", "disks", "create", "d1", "--zone", Z, "--size", "10GB", "--type", "pd-ssd",
        ],
    )
    .await
    .unwrap();
    let d1 = gcloud(&sim, &["compute", "disks", "describe", "d1", "--zone", Z])
        .await
        .unwrap();
    assert_eq!(
        (&d1["sizeGb"], &d1["status"]),
        (&"10".into(), &"READY".into()),
        "{d1}"
    );
    assert!(
        d1["type"].as_str().unwrap().ends_with("/diskTypes/pd-ssd"),
        "{d1}"
    );
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "attach-disk",
            "m1",
            "--zone",
            Z,
            "--disk",
            "d1",
            "--device-name",
            "data",
        ],
    )
    .await
    .unwrap();
    let d1 = sim.get(&format!("zones/{Z}/disks/d1")).await.body;
    assert!(
        d1["users"][0].as_str().unwrap().ends_with("/instances/m1"),
        "{d1}"
    );
    // GCE refuses to delete a disk an instance holds, naming the instance.
    let err = gcloud(&sim, &["compute", "disks", "delete", "d1", "--zone", Z])
        .await
        .unwrap_err();
    assert!(
        err.contains(&format!(
            "The disk resource 'projects/{PROJECT}/zones/{Z}/disks/d1' is already being used by \
             'projects/{PROJECT}/zones/{Z}/instances/m1'"
        )),
        "{err}"
    );
    // Growing works while attached; shrinking is refused.
    gcloud(
        &sim,
        &[
            "compute", "disks", "resize", "d1", "--zone", Z, "--size", "20GB",
        ],
    )
    .await
    .unwrap();
    let err = gcloud(
        &sim,
        &[
            "compute", "disks", "resize", "d1", "--zone", Z, "--size", "15GB",
        ],
    )
    .await
    .unwrap_err();
    assert!(
        err.contains(
            "Invalid value for field 'sizeGb': '15'. New disk size '15' GiB must be larger than existing \
             size '20' GiB."
        ),
        "{err}"
    );
    let d1 = sim.get(&format!("zones/{Z}/disks/d1")).await.body;
    assert_eq!(d1["sizeGb"], "20", "{d1}");
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "detach-disk",
            "m1",
            "--zone",
            Z,
            "--device-name",
            "data",
        ],
    )
    .await
    .unwrap();
    let vm = sim.get(&format!("zones/{Z}/instances/m1")).await.body;
    assert_eq!(
        vm["disks"].as_array().unwrap().len(),
        1,
        "only the boot disk: {vm}"
    );
    gcloud(&sim, &["compute", "disks", "delete", "d1", "--zone", Z])
        .await
        .unwrap();
    let disks = sim.get(&format!("zones/{Z}/disks")).await.body;
    let names: Vec<&str> = disks["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["m1"], "the boot disk is left: {disks}");
    assert_gcloud_called(&sim, DISKS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_load_balancing() {
    let sim = start().await;
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "create",
            "m1",
            "--zone",
            Z,
            "--machine-type",
            "e2-small",
            "--image-family",
            "debian-12",
            "--image-project",
            "debian-cloud",
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "http-health-checks",
            "create",
            "hc1",
            "--port",
            "8080",
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "target-pools",
            "create",
            "tp1",
            "--region",
            R,
            "--http-health-check",
            "hc1",
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "target-pools",
            "add-instances",
            "tp1",
            "--region",
            R,
            "--instances",
            "m1",
            "--instances-zone",
            Z,
        ],
    )
    .await
    .unwrap();
    let health = gcloud(
        &sim,
        &[
            "compute",
            "target-pools",
            "get-health",
            "tp1",
            "--region",
            R,
        ],
    )
    .await
    .unwrap();
    assert!(health.as_array().is_some_and(|h| !h.is_empty()), "{health}");
    let hc = gcloud(&sim, &["compute", "http-health-checks", "describe", "hc1"])
        .await
        .unwrap();
    assert_eq!(hc["port"], 8080, "{hc}");
    let tp = gcloud(
        &sim,
        &["compute", "target-pools", "describe", "tp1", "--region", R],
    )
    .await
    .unwrap();
    assert!(
        tp["instances"][0]
            .as_str()
            .unwrap()
            .ends_with("/instances/m1"),
        "{tp}"
    );
    gcloud(
        &sim,
        &[
            "compute",
            "forwarding-rules",
            "create",
            "fr1",
            "--region",
            R,
            "--target-pool",
            "tp1",
            "--ports",
            "443",
        ],
    )
    .await
    .unwrap();
    let frs = gcloud(&sim, &["compute", "forwarding-rules", "list"])
        .await
        .unwrap();
    assert_eq!(frs[0]["name"], "fr1", "{frs}");
    let fr = gcloud(
        &sim,
        &[
            "compute",
            "forwarding-rules",
            "describe",
            "fr1",
            "--region",
            R,
        ],
    )
    .await
    .unwrap();
    assert_eq!(fr["portRange"], "443-443", "{fr}");
    gcloud(
        &sim,
        &[
            "compute",
            "forwarding-rules",
            "delete",
            "fr1",
            "--region",
            R,
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &[
            "compute",
            "target-pools",
            "remove-instances",
            "tp1",
            "--region",
            R,
            "--instances",
            "m1",
            "--instances-zone",
            Z,
        ],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &["compute", "target-pools", "delete", "tp1", "--region", R],
    )
    .await
    .unwrap();
    gcloud(&sim, &["compute", "http-health-checks", "delete", "hc1"])
        .await
        .unwrap();
    assert_gcloud_called(&sim, LOAD_BALANCING).await;
}

/// A second subnetwork of the default network, an internal address and a VM in it, as an operator moving a master
/// there would make them; then GCE's refusal to delete it while they use it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_subnetworks() {
    let sim = start().await;
    gcloud(
        &sim,
        &[
            "compute",
            "networks",
            "subnets",
            "create",
            "masters-b",
            "--network",
            "default",
            "--region",
            R,
            "--range",
            "127.11.0.0/24",
        ],
    )
    .await
    .unwrap();
    let sn = gcloud(
        &sim,
        &[
            "compute",
            "networks",
            "subnets",
            "describe",
            "masters-b",
            "--region",
            R,
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        (&sn["ipCidrRange"], &sn["gatewayAddress"]),
        (&"127.11.0.0/24".into(), &"127.11.0.1".into()),
        "{sn}"
    );
    assert!(
        sn["network"]
            .as_str()
            .unwrap()
            .ends_with("/global/networks/default"),
        "{sn}"
    );
    // Every region's default and the new one (subnetworks.aggregatedList); then one region (subnetworks.list).
    let list = gcloud(&sim, &["compute", "networks", "subnets", "list"])
        .await
        .unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["region"].as_str().unwrap().ends_with(R))
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "masters-b"], "{list}");
    let list = gcloud(
        &sim,
        &["compute", "networks", "subnets", "list", "--regions", R],
    )
    .await
    .unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    gcloud(
        &sim,
        &[
            "compute",
            "addresses",
            "create",
            "m-b-ip",
            "--region",
            R,
            "--subnet",
            "masters-b",
        ],
    )
    .await
    .unwrap();
    let ip = sim.get(&format!("regions/{R}/addresses/m-b-ip")).await.body;
    assert!(
        ip["address"].as_str().unwrap().starts_with("127.11.0."),
        "{ip}"
    );
    assert_eq!(ip["addressType"], "INTERNAL", "{ip}");
    assert_eq!(ip["subnetwork"], sn["selfLink"], "{ip}");
    gcloud(
        &sim,
        &[
            "compute",
            "instances",
            "create",
            "m-b",
            "--zone",
            Z,
            "--machine-type",
            "e2-small",
            "--image-family",
            "debian-12",
            "--image-project",
            "debian-cloud",
            "--subnet",
            "masters-b",
            "--private-network-ip",
            ip["address"].as_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    let vm = sim.get(&format!("zones/{Z}/instances/m-b")).await.body;
    let nic = &vm["networkInterfaces"][0];
    assert_eq!(nic["subnetwork"], sn["selfLink"], "{vm}");
    assert_eq!(nic["networkIP"], ip["address"], "{vm}");
    // GCE refuses to delete a subnetwork something uses, naming it.
    let err = gcloud(
        &sim,
        &[
            "compute",
            "networks",
            "subnets",
            "delete",
            "masters-b",
            "--region",
            R,
        ],
    )
    .await
    .unwrap_err();
    assert!(
        err.contains(&format!(
            "The subnetwork resource 'projects/{PROJECT}/regions/{R}/subnetworks/masters-b' is already being \
             used by 'projects/{PROJECT}/zones/{Z}/instances/m-b'"
        )),
        "{err}"
    );
    // What is not under test goes straight to the API: each gcloud run costs a second of CPU.
    sim.ok("DELETE", &format!("zones/{Z}/instances/m-b"), None)
        .await;
    sim.ok("DELETE", &format!("regions/{R}/addresses/m-b-ip"), None)
        .await;
    gcloud(
        &sim,
        &[
            "compute",
            "networks",
            "subnets",
            "delete",
            "masters-b",
            "--region",
            R,
        ],
    )
    .await
    .unwrap();
    let state = sim.admin("GET", "state", None).await;
    assert_eq!(state["subnetworks"], serde_json::json!({}), "{state}");
    assert_gcloud_called(&sim, SUBNETWORKS).await;
}

/// Every Compute and Secret Manager method the provider calls (the permission tables of docs/guides/gce.md,
/// which scripts/check-iam-permissions keeps equal to what the provider's tests call) is called by gcloud here.
#[test]
fn gcloud_covers_every_provider_method() {
    let guide = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/guides/gce.md"
    ))
    .expect("docs/guides/gce.md");
    let provider: BTreeSet<&str> = guide
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .filter(|m| m.starts_with("compute.") || m.starts_with("secretmanager."))
        .collect();
    assert!(
        provider.len() > 30,
        "the guide's table was not found: {provider:?}"
    );
    let tested: BTreeSet<&str> = [
        READS_AND_WRITES,
        FIREWALL_RULES,
        INSTANCES,
        DISKS,
        LOAD_BALANCING,
        SUBNETWORKS,
        SECRETS,
    ]
    .concat()
    .into_iter()
    .collect();
    let untested: Vec<&&str> = provider.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "the provider calls {untested:?}, which no gcloud test here makes gcloud call"
    );
}

/// What `gcloud_secrets` makes gcloud call.
const SECRETS: &[&str] = &[
    "secretmanager.secrets.create",
    "secretmanager.secrets.get",
    "secretmanager.secrets.list",
    "secretmanager.secrets.patch",
    "secretmanager.secrets.addVersion",
    "secretmanager.secrets.versions.access",
    "secretmanager.secrets.versions.list",
    "secretmanager.secrets.versions.get",
    "secretmanager.secrets.versions.disable",
    "secretmanager.secrets.versions.enable",
    "secretmanager.secrets.versions.destroy",
    "secretmanager.secrets.getIamPolicy",
    "secretmanager.secrets.setIamPolicy",
    "secretmanager.secrets.delete",
];

/// The bytes of a `versions access` answer.
fn payload(answer: &Value) -> Vec<u8> {
    use base64::Engine as _;
    let data = answer["payload"]["data"].as_str().expect("payload.data");
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64")
}

/// `gcloud secrets` against the sim's Secret Manager: a secret's life from creation to deletion, its payload
/// checked by gcloud's own CRC32C both ways, and IAM on the secret deciding which service account reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_secrets() {
    let sim = start().await;
    let masters = "sim-sa:masters@proj.iam.gserviceaccount.com";
    let other = "sim-sa:other@proj.iam.gserviceaccount.com";
    let file = sim.dir.path().join("keys.pem");
    let key = b"-----BEGIN EC PRIVATE KEY-----\nnot a real key\n-----END EC PRIVATE KEY-----\n";
    std::fs::write(&file, key).unwrap();
    let file = file.to_str().unwrap().to_string();

    gcloud(
        &sim,
        &[
            "secrets",
            "create",
            "m-keys",
            "--replication-policy=automatic",
            "--labels=ha-master=prod",
        ],
    )
    .await
    .unwrap();
    let err = gcloud(
        &sim,
        &[
            "secrets",
            "create",
            "m-keys",
            "--replication-policy=automatic",
        ],
    )
    .await
    .unwrap_err();
    assert!(err.contains("already exists"), "{err}");
    let described = gcloud(&sim, &["secrets", "describe", "m-keys"])
        .await
        .unwrap();
    assert_eq!(described["name"], "projects/proj/secrets/m-keys");
    assert_eq!(described["labels"]["ha-master"], "prod");
    gcloud(
        &sim,
        &["secrets", "update", "m-keys", "--update-labels=team=infra"],
    )
    .await
    .unwrap();
    let listed = gcloud(&sim, &["secrets", "list"]).await.unwrap();
    assert_eq!(listed[0]["labels"]["team"], "infra", "{listed}");

    gcloud(
        &sim,
        &[
            "secrets",
            "versions",
            "add",
            "m-keys",
            &format!("--data-file={file}"),
        ],
    )
    .await
    .unwrap();
    let read = gcloud(
        &sim,
        &["secrets", "versions", "access", "latest", "--secret=m-keys"],
    )
    .await
    .unwrap();
    assert_eq!(payload(&read), key);

    // No binding yet: no service account reads it, and the answer does not say whether it exists.
    let denied = gcloud_as(
        &sim,
        masters,
        &["secrets", "versions", "access", "latest", "--secret=m-keys"],
    )
    .await
    .unwrap_err();
    assert!(
        denied.contains("PERMISSION_DENIED") || denied.contains("denied"),
        "{denied}"
    );
    gcloud(
        &sim,
        &[
            "secrets",
            "add-iam-policy-binding",
            "m-keys",
            "--member=serviceAccount:masters@proj.iam.gserviceaccount.com",
            "--role=roles/secretmanager.secretAccessor",
        ],
    )
    .await
    .unwrap();
    let policy = gcloud(&sim, &["secrets", "get-iam-policy", "m-keys"])
        .await
        .unwrap();
    assert_eq!(
        policy["bindings"][0]["role"], "roles/secretmanager.secretAccessor",
        "{policy}"
    );
    let read = gcloud_as(
        &sim,
        masters,
        &["secrets", "versions", "access", "1", "--secret=m-keys"],
    )
    .await
    .unwrap();
    assert_eq!(payload(&read), key);
    for (who, args) in [
        (
            other,
            vec!["secrets", "versions", "access", "latest", "--secret=m-keys"],
        ),
        (
            masters,
            vec![
                "secrets",
                "versions",
                "add",
                "m-keys",
                "--data-file",
                file.as_str(),
            ],
        ),
        (masters, vec!["secrets", "get-iam-policy", "m-keys"]),
    ] {
        let err = gcloud_as(&sim, who, &args).await.unwrap_err();
        assert!(err.contains("denied"), "{who} {args:?}: {err}");
    }

    // A disabled version is not read, an enabled one again is, a destroyed one never again.
    gcloud(
        &sim,
        &["secrets", "versions", "disable", "1", "--secret=m-keys"],
    )
    .await
    .unwrap();
    let err = gcloud(
        &sim,
        &["secrets", "versions", "access", "1", "--secret=m-keys"],
    )
    .await
    .unwrap_err();
    assert!(err.contains("DISABLED"), "{err}");
    gcloud(
        &sim,
        &["secrets", "versions", "enable", "1", "--secret=m-keys"],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &["secrets", "versions", "access", "1", "--secret=m-keys"],
    )
    .await
    .unwrap();
    gcloud(
        &sim,
        &["secrets", "versions", "destroy", "1", "--secret=m-keys"],
    )
    .await
    .unwrap();
    let version = gcloud(
        &sim,
        &["secrets", "versions", "describe", "1", "--secret=m-keys"],
    )
    .await
    .unwrap();
    assert_eq!(version["state"], "DESTROYED");
    let versions = gcloud(&sim, &["secrets", "versions", "list", "m-keys"])
        .await
        .unwrap();
    assert_eq!(versions.as_array().map(Vec::len), Some(1), "{versions}");
    let err = gcloud(
        &sim,
        &["secrets", "versions", "access", "latest", "--secret=m-keys"],
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("no versions") || err.contains("NOT_FOUND"),
        "{err}"
    );

    gcloud(&sim, &["secrets", "delete", "m-keys"])
        .await
        .unwrap();
    let err = gcloud(&sim, &["secrets", "describe", "m-keys"])
        .await
        .unwrap_err();
    assert!(
        err.contains("not found") || err.contains("NOT_FOUND"),
        "{err}"
    );
    assert_gcloud_called(&sim, SECRETS).await;
}
