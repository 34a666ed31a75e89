//! End to end through the real fabric: instances inserted over HTTP boot real etcd from their metadata, a
//! forwarding rule balances TLS connections over healthy masters, a crash shows up in health, and stopping
//! the sim leaves no etcd process behind.

use crate::config::SimConfig;
use crate::fabric::live::LiveFabric;
use crate::vm::testkit::{self, ClusterPki};
use serde_json::{Value, json};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Api {
    http: reqwest::Client,
    endpoint: String,
}

impl Api {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}compute/v1/projects/p/{path}", self.endpoint);
        let mut rb = self.http.request(method, url).bearer_auth("t");
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb.send().await.expect("request");
        let v: Value = resp.json().await.expect("json");
        assert!(
            v.get("error").is_none() || v["kind"] == "compute#operation",
            "{path}: {v}"
        );
        v
    }

    /// A mutation, polled to DONE.
    async fn ok(&self, path: &str, body: Value) -> Value {
        let op = self.call(reqwest::Method::POST, path, Some(body)).await;
        let link = op["selfLink"]
            .as_str()
            .expect("operation")
            .replace("http://", "");
        let rel = link
            .split("/compute/v1/projects/p/")
            .nth(1)
            .expect("op path")
            .to_string();
        for _ in 0..600 {
            let now = self.call(reqwest::Method::GET, &rel, None).await;
            if now["status"] == "DONE" {
                assert!(now.get("error").is_none(), "{now}");
                return now;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("operation on {path} never finished");
    }

    async fn admin(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut rb = self
            .http
            .request(method, format!("{}_sim/{path}", self.endpoint));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        rb.send()
            .await
            .expect("admin")
            .json()
            .await
            .expect("admin json")
    }
}

/// Kills every VM even when the test panics, so no etcd outlives it.
struct StopOnDrop(Arc<LiveFabric>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        use crate::fabric::Fabric;
        self.0.shutdown();
    }
}

async fn eventually(timeout: Duration, what: &str, mut f: impl AsyncFnMut() -> bool) {
    let until = Instant::now() + timeout;
    while !f().await {
        assert!(
            Instant::now() < until,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct Live {
    running: crate::server::Running,
    api: Api,
    _guard: StopOnDrop,
}

/// A sim with the live fabric on `dir`, in-process on 127.0.0.1:0.
async fn start_live(dir: &std::path::Path) -> Live {
    let mut cfg = SimConfig::for_tests(dir.to_path_buf());
    cfg.fabric = true;
    cfg.etcd_bins = crate::etcd_bins::EtcdBins::single(testkit::etcd_bin());
    cfg.latency.lb_propagation = Duration::from_millis(200);
    let fabric = Arc::new(LiveFabric::start(&cfg).expect("fabric"));
    let guard = StopOnDrop(fabric.clone());
    let running = crate::server::start(cfg, fabric).await.expect("sim");
    let api = Api {
        http: crate::http::http_client(),
        endpoint: format!("http://{}/", running.addr),
    };
    Live {
        running,
        api,
        _guard: guard,
    }
}

const ZONES: [&str; 3] = ["us-central1-a", "us-central1-b", "us-central1-c"];

/// Connections to `ip:port` are dropped: the TCP handshake completes (a userspace proxy), then nothing answers, as
/// a GCE VM behind a firewall never answers. A refusal or a reset would be a different failure.
async fn assert_dropped(ip: Ipv4Addr, port: u16, why: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect((ip, port))
        .await
        .unwrap_or_else(|e| panic!("{ip}:{port} must not refuse ({why}): {e}"));
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n").await;
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(800), s.read(&mut buf)).await;
    assert!(read.is_err(), "{ip}:{port} answered ({why}): {read:?}");
}

/// Inserts three masters m0..m2 on 127.10.`net`.2-4 with the static IP 127.20.`net`.10 reserved.
/// Each test uses its own `net` so test binaries running at the same time do not collide.
async fn boot_cluster(api: &Api, net: u8) -> (ClusterPki, Vec<testkit::Member>, Ipv4Addr) {
    let static_ip = Ipv4Addr::new(127, 20, net, 10);
    let members: Vec<testkit::Member> = (0..3u8)
        .map(|n| testkit::member(&format!("m{n}"), Ipv4Addr::new(127, 10, net, 2 + n)))
        .collect();
    api.ok(
        "regions/us-central1/addresses",
        json!({"name": "api", "address": static_ip.to_string()}),
    )
    .await;
    let pki = ClusterPki::new();
    for (m, zone) in members.iter().zip(ZONES) {
        let md = testkit::master_metadata(&pki, m, &members, "new", static_ip);
        let items: Vec<Value> = md
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        let body = json!({"name": m.name, "machineType": format!("zones/{zone}/machineTypes/e2-standard-2"),
            "networkInterfaces": [{"networkIP": m.ip.to_string()}], "metadata": {"items": items}});
        api.ok(&format!("zones/{zone}/instances"), body).await;
    }
    (pki, members, static_ip)
}

/// Every VM's etcd sees the three-member cluster (asked with etcdctl in the VM's ssh environment).
async fn wait_for_three_members(api: &Api) {
    eventually(
        Duration::from_secs(60),
        "a 3-member etcd cluster",
        async || {
            let s = api.admin(reqwest::Method::GET, "status", None).await;
            s["instances"].as_array().is_some_and(|is| {
                is.len() == 3
                    && is.iter().all(|i| {
                        i["vm"]["etcdMembers"]
                            .as_array()
                            .is_some_and(|m| m.len() == 3)
                    })
            })
        },
    )
    .await;
}

/// etcd pids per VM, from the status.
async fn etcd_pids(api: &Api) -> Vec<u64> {
    let s = api.admin(reqwest::Method::GET, "status", None).await;
    s["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["vm"]["etcd_pid"].as_u64())
        .collect()
}

/// `ha-sim ssh <vm> -- etcdctl endpoint health`: its exit code.
async fn etcd_health_via_ssh(state_dir: &std::path::Path, vm: &'static str) -> Result<i32, String> {
    let target = crate::cli::Target {
        state_dir: Some(state_dir.to_path_buf()),
        url: None,
    };
    let cmd = ["etcdctl", "--command-timeout=5s", "endpoint", "health"].map(String::from);
    crate::cli::show::ssh(&target, vm, &cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_boot_balance_crash_and_stop_cleanly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Live {
        running,
        api,
        _guard,
    } = start_live(dir.path()).await;
    let (pki, members, static_ip) = boot_cluster(&api, 77).await;
    let zones = ZONES;
    wait_for_three_members(&api).await;

    // A forwarding rule on the static IP, health-checked on the masters' /healthz. No firewall rule admits the
    // probers or this host yet (the masters reached each other through the default network's implied
    // default-allow-internal).
    api.ok("global/httpHealthChecks", json!({"name": "hc", "port": 3990, "requestPath": "/healthz", "checkIntervalSec": 1, "timeoutSec": 1})).await;
    let links: Vec<String> = members
        .iter()
        .zip(zones)
        .map(|(m, z)| format!("zones/{z}/instances/{}", m.name))
        .collect();
    let pool =
        json!({"name": "pool", "healthChecks": ["global/httpHealthChecks/hc"], "instances": links});
    api.ok("regions/us-central1/targetPools", pool).await;
    let rule = json!({"name": "fr", "IPAddress": static_ip.to_string(), "portRange": "443", "target": "regions/us-central1/targetPools/pool"});
    api.ok("regions/us-central1/forwardingRules", rule).await;
    let health = async |link: &str| {
        let h = api
            .call(
                reqwest::Method::POST,
                "regions/us-central1/targetPools/pool/getHealth",
                Some(json!({"instance": link})),
            )
            .await;
        h["healthStatus"][0]["healthState"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    eventually(
        Duration::from_secs(10),
        "the rule to carry traffic",
        async || {
            let s = api.admin(reqwest::Method::GET, "status", None).await;
            s["forwardingRules"][0]["serving"] == true
        },
    )
    .await;
    let port = crate::net::PortMap::default().host_port(443);
    // Dozens of probe intervals: the firewall drops every probe, so no master turns healthy.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for link in &links {
        assert_eq!(
            health(link).await,
            "UNHEALTHY",
            "{link}: probes are dropped"
        );
    }
    assert_dropped(static_ip, port, "no rule admits this host to 443").await;

    // The API rule admits this host (127.0.0.1 by default). With no healthy backend the pool sends to all of them.
    api.ok("global/firewalls", json!({"name": "api", "allowed": [{"IPProtocol": "tcp", "ports": ["443"]}], "sourceRanges": ["127.0.0.0/8"]})).await;
    let mut replicas = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let (status, replica) =
            testkit::https_get(static_ip, port, &pki.cluster.ca_pem, "/healthz")
                .await
                .expect("through the LB to unhealthy backends");
        assert_eq!(status, 200);
        replicas.insert(replica);
    }
    assert!(
        replicas.len() > 1,
        "no healthy backend: every backend gets connections: {replicas:?}"
    );
    assert!(health(&links[0]).await == "UNHEALTHY");

    // The health-check rule admits GCE's probers to the sidecar: every master turns healthy.
    api.ok("global/firewalls", json!({"name": "hc", "allowed": [{"IPProtocol": "tcp", "ports": ["3990"]}], "sourceRanges": ["35.191.0.0/16", "209.85.152.0/22", "209.85.204.0/22"]})).await;
    for link in &links {
        eventually(
            Duration::from_secs(30),
            &format!("{link} HEALTHY"),
            async || health(link).await == "HEALTHY",
        )
        .await;
    }
    // Mutual TLS between the members, checked from inside each VM as `gcloud compute ssh` would.
    for vm in ["m0", "m1", "m2"] {
        assert_eq!(etcd_health_via_ssh(dir.path(), vm).await, Ok(0), "{vm}");
    }
    let mut replicas = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let (status, replica) =
            testkit::https_get(static_ip, port, &pki.cluster.ca_pem, "/healthz")
                .await
                .expect("through the LB");
        assert_eq!(status, 200);
        replicas.insert(replica);
    }
    assert!(replicas.len() > 1, "connections are spread: {replicas:?}");

    // The host moves outside the API rule's range: its connections are dropped; back home, they are answered.
    let client_ip = async |ip: Option<&str>| {
        api.admin(
            reqwest::Method::POST,
            "events",
            Some(json!({"event": "setClientIp", "ip": ip})),
        )
        .await
    };
    client_ip(Some("198.51.100.7")).await;
    assert_dropped(static_ip, port, "this host is outside 127.0.0.0/8 now").await;
    client_ip(None).await;
    assert!(matches!(
        testkit::https_get(static_ip, port, &pki.cluster.ca_pem, "/healthz").await,
        Ok((200, _))
    ));

    // A crashed VM turns unhealthy; the others keep serving.
    let pids = etcd_pids(&api).await;
    assert_eq!(pids.len(), 3);
    api.admin(
        reqwest::Method::POST,
        "events",
        Some(json!({"event": "crashVm", "instance": "m0"})),
    )
    .await;
    eventually(Duration::from_secs(30), "m0 UNHEALTHY", async || {
        health(&links[0]).await == "UNHEALTHY"
    })
    .await;
    // (If m0 led etcd, the survivors report unhealthy until they elect a new leader.)
    eventually(
        Duration::from_secs(30),
        "the survivors to serve /healthz",
        async || {
            let got = testkit::https_get(static_ip, port, &pki.cluster.ca_pem, "/healthz").await;
            matches!(got, Ok((200, _)))
        },
    )
    .await;

    // `ha-sim ssh mN -- etcdctl endpoint health` runs in each survivor's environment, with its certificates,
    // and its etcd answers healthy: the two remaining members still form a quorum.
    for survivor in ["m1", "m2"] {
        assert_eq!(
            etcd_health_via_ssh(dir.path(), survivor).await,
            Ok(0),
            "{survivor}"
        );
    }

    running.stop().await;
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "etcd {pid} outlived the sim"
        );
    }
}

/// On a network of their own (no `default-allow-internal`) two masters cannot form etcd until a rule admits their
/// peer port from each other: the firewall guards VM-to-VM traffic too, judging a connection by the VM whose etcd
/// opened it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_on_a_custom_network_reach_each_others_peer_port_only_through_a_rule() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Live {
        running,
        api,
        _guard,
    } = start_live(dir.path()).await;
    let members: Vec<testkit::Member> = (0..2u8)
        .map(|n| testkit::member(&format!("p{n}"), Ipv4Addr::new(127, 10, 76, 2 + n)))
        .collect();
    let pki = ClusterPki::new();
    for (m, zone) in members.iter().zip(ZONES) {
        let md = testkit::master_metadata(&pki, m, &members, "new", Ipv4Addr::new(127, 20, 76, 10));
        let items: Vec<Value> = md
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        let body = json!({"name": m.name, "machineType": format!("zones/{zone}/machineTypes/e2-standard-2"),
            "tags": {"items": ["master"]},
            "networkInterfaces": [{"network": "global/networks/prod", "networkIP": m.ip.to_string()}],
            "metadata": {"items": items}});
        api.ok(&format!("zones/{zone}/instances"), body).await;
    }
    let health = async |vm: &'static str| etcd_health_via_ssh(dir.path(), vm).await;
    // Long enough for two etcd members to elect a leader many times over, had they reached each other.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_ne!(health("p0").await, Ok(0), "no quorum without the peer rule");

    // A rule for another tag admits nothing; the masters' own peer rule makes the cluster.
    let peer = |name: &str, tag: &str| {
        json!({"name": name, "network": "global/networks/prod", "allowed": [{"IPProtocol": "tcp", "ports": ["2380"]}],
            "sourceTags": [tag], "targetTags": [tag]})
    };
    api.ok("global/firewalls", peer("nodes", "node")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_ne!(health("p0").await, Ok(0), "a rule for other tags");
    api.ok("global/firewalls", peer("peers", "master")).await;
    for vm in ["p0", "p1"] {
        eventually(
            Duration::from_secs(60),
            &format!("{vm} healthy once peers reach each other"),
            async || health(vm).await == Ok(0),
        )
        .await;
    }
    running.stop().await;
}

/// A master in a subnetwork added to the default network runs on an address of that range (127.11.x, outside the
/// sim's own /16s) and forms a cluster with a master of the `default` subnetwork. The masters' peer rule is what GCE
/// needs for that (`default-allow-internal` does not cover an added range: see `fabric::firewall`'s tests); etcd
/// alone would not show its absence, as a member reached one way only still joins (it pipelines the other way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_in_two_subnetworks_of_the_default_network_form_one_cluster() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Live {
        running,
        api,
        _guard,
    } = start_live(dir.path()).await;
    api.ok(
        "regions/us-central1/subnetworks",
        json!({"name": "masters-b", "network": "global/networks/default", "ipCidrRange": "127.11.79.0/24"}),
    )
    .await;
    let members = [
        testkit::member("s0", Ipv4Addr::new(127, 10, 79, 2)),
        testkit::member("s1", Ipv4Addr::new(127, 11, 79, 2)),
    ];
    let pki = ClusterPki::new();
    for (m, zone) in members.iter().zip(ZONES) {
        let md = testkit::master_metadata(&pki, m, &members, "new", Ipv4Addr::new(127, 20, 79, 10));
        let items: Vec<Value> = md
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        let subnetwork = if m.name == "s1" {
            "masters-b"
        } else {
            "default"
        };
        let body = json!({"name": m.name, "machineType": format!("zones/{zone}/machineTypes/e2-standard-2"),
            "tags": {"items": ["master"]},
            "networkInterfaces": [{"subnetwork": format!("regions/us-central1/subnetworks/{subnetwork}"),
                                   "networkIP": m.ip.to_string()}],
            "metadata": {"items": items}});
        api.ok(&format!("zones/{zone}/instances"), body).await;
    }
    let s1 = api
        .call(
            reqwest::Method::GET,
            "zones/us-central1-b/instances/s1",
            None,
        )
        .await;
    assert_eq!(
        s1["networkInterfaces"][0]["networkIP"], "127.11.79.2",
        "{s1}"
    );
    api.ok(
        "global/firewalls",
        json!({"name": "peers", "allowed": [{"IPProtocol": "tcp", "ports": ["2380"]}],
               "sourceTags": ["master"], "targetTags": ["master"]}),
    )
    .await;
    for vm in ["s0", "s1"] {
        eventually(
            Duration::from_secs(60),
            &format!("{vm} healthy across the two subnetworks"),
            async || etcd_health_via_ssh(dir.path(), vm).await == Ok(0),
        )
        .await;
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_sim_boots_its_vms_again_with_their_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Live {
        running,
        api,
        _guard,
    } = start_live(dir.path()).await;
    boot_cluster(&api, 78).await;
    wait_for_three_members(&api).await;
    let m1 = api
        .call(
            reqwest::Method::GET,
            "zones/us-central1-b/instances/m1",
            None,
        )
        .await;
    let cfg = SimConfig::for_tests(dir.path().to_path_buf());
    let m1_dir = crate::fabric::vm_dir(&cfg, "us-central1-b", "m1", m1["id"].as_str().expect("id"));
    let put = testkit::etcdctl(&m1_dir, &["put", "survives", "restart"]);
    assert!(put.0, "{}", put.1);
    let before = etcd_pids(&api).await;
    running.stop().await;
    drop(_guard);

    let Live {
        running,
        api,
        _guard,
    } = start_live(dir.path()).await;
    wait_for_three_members(&api).await;
    let after = etcd_pids(&api).await;
    assert!(
        after.iter().all(|p| !before.contains(p)),
        "new processes: {before:?} → {after:?}"
    );
    let got = testkit::etcdctl(&m1_dir, &["get", "survives", "--print-value-only"]);
    assert!(got.0 && got.1.trim() == "restart", "{}", got.1);
    running.stop().await;
}

/// One master whose etcd data is on the disk `pd` (device `master-pd`), through the API: the instance is deleted
/// and inserted again on the same disk, then stopped, its machine type changed and started; etcd keeps its
/// member id and data all along, and deleting the disk removes its directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_recreated_on_its_data_disk_keeps_its_etcd_member() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Live {
        running,
        api,
        _guard,
    } = start_live(dir.path()).await;
    let zone = "us-central1-a";
    let cfg = SimConfig::for_tests(dir.path().to_path_buf());
    let me = testkit::member("m0", Ipv4Addr::new(127, 10, 79, 2));
    let pki = ClusterPki::new();
    let md = testkit::master_metadata_on_disk(
        &pki,
        &me,
        std::slice::from_ref(&me),
        "new",
        Ipv4Addr::new(127, 20, 79, 10),
    );
    let items: Vec<Value> = md
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    let body = json!({"name": "m0", "machineType": format!("zones/{zone}/machineTypes/e2-standard-2"),
        "disks": [{"boot": true, "autoDelete": true, "initializeParams": {"diskSizeGb": "10"}},
                  {"source": format!("zones/{zone}/disks/pd"), "deviceName": "master-pd"}],
        "networkInterfaces": [{"networkIP": me.ip.to_string()}], "metadata": {"items": items}});
    let pd = api
        .ok(
            &format!("zones/{zone}/disks"),
            json!({"name": "pd", "sizeGb": "10", "type": format!("zones/{zone}/diskTypes/pd-ssd")}),
        )
        .await;
    assert_eq!(pd["status"], "DONE");
    let pd = api
        .call(
            reqwest::Method::GET,
            &format!("zones/{zone}/disks/pd"),
            None,
        )
        .await;
    let pd_dir = crate::fabric::disk_dir(&cfg, zone, "pd", pd["id"].as_str().expect("id"));
    let instance = format!("zones/{zone}/instances/m0");
    let vm_dir = async || {
        let i = api.call(reqwest::Method::GET, &instance, None).await;
        crate::fabric::vm_dir(&cfg, zone, "m0", i["id"].as_str().expect("id"))
    };
    let member_id = |dir: &std::path::Path| {
        let (ok, out) = testkit::etcdctl(dir, &["endpoint", "status", "-w", "json"]);
        assert!(ok, "{out}");
        let v: Value = serde_json::from_str(out.trim()).expect("json");
        v[0]["Status"]["header"]["member_id"].to_string()
    };
    let healthy = async |dir: std::path::PathBuf| {
        eventually(Duration::from_secs(60), "etcd healthy", async || {
            let d = dir.clone();
            tokio::task::spawn_blocking(move || testkit::etcdctl(&d, &["endpoint", "health"]).0)
                .await
                .unwrap_or(false)
        })
        .await;
    };

    api.ok(&format!("zones/{zone}/instances"), body.clone())
        .await;
    let first = vm_dir().await;
    healthy(first.clone()).await;
    let put = testkit::etcdctl(&first, &["put", "on-disk", "yes"]);
    assert!(put.0, "{}", put.1);
    let id = member_id(&first);
    assert!(
        pd_dir.join("var/etcd/member").is_dir(),
        "etcd's data is on the disk"
    );

    // Delete and recreate the instance on the same disk.
    api.call(reqwest::Method::DELETE, &instance, None).await;
    eventually(Duration::from_secs(30), "m0 deleted", async || {
        let s = api.admin(reqwest::Method::GET, "status", None).await;
        s["instances"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    api.ok(&format!("zones/{zone}/instances"), body).await;
    let second = vm_dir().await;
    assert_ne!(first, second);
    healthy(second.clone()).await;
    let got = testkit::etcdctl(&second, &["get", "on-disk", "--print-value-only"]);
    assert!(got.0 && got.1.trim() == "yes", "{}", got.1);
    assert_eq!(member_id(&second), id);
    eventually(
        Duration::from_secs(10),
        "old boot disk removed",
        async || !first.exists(),
    )
    .await;

    // Stop, change the machine type, start: same member, same data.
    api.ok(&format!("{instance}/stop"), json!({})).await;
    api.ok(
        &format!("{instance}/setMachineType"),
        json!({"machineType": format!("zones/{zone}/machineTypes/e2-standard-4")}),
    )
    .await;
    api.ok(&format!("{instance}/start"), json!({})).await;
    healthy(second.clone()).await;
    let got = testkit::etcdctl(&second, &["get", "on-disk", "--print-value-only"]);
    assert!(got.0 && got.1.trim() == "yes", "{}", got.1);
    assert_eq!(member_id(&second), id);

    // Delete the instance, then the disk: its directory goes.
    api.call(reqwest::Method::DELETE, &instance, None).await;
    eventually(Duration::from_secs(30), "m0 deleted", async || {
        let s = api.admin(reqwest::Method::GET, "status", None).await;
        s["instances"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    assert!(
        pd_dir.join("var/etcd/member").is_dir(),
        "the disk survives its instance"
    );
    api.call(
        reqwest::Method::DELETE,
        &format!("zones/{zone}/disks/pd"),
        None,
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the disk's directory removed",
        async || !pd_dir.exists(),
    )
    .await;
    running.stop().await;
}

/// Real 1:1 NAT carries every port, so an API server on a port the fixed NAT ports lack (`api_port = 6443`, with
/// the sim running as root or not) answers on the VM's external IP once a rule admits that port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nat_carries_an_api_port_outside_the_fixed_ports() {
    const API_PORT: u16 = 6443;
    let dir = tempfile::tempdir().expect("temp dir");
    let Live {
        running,
        api,
        _guard,
    } = start_live(dir.path()).await;
    let cfg = SimConfig::for_tests(dir.path().to_path_buf());
    assert!(
        !cfg.nat_ports.contains(&API_PORT),
        "the test needs a port the fixed NAT ports lack"
    );
    let external = Ipv4Addr::new(127, 20, 74, 10);
    let me = testkit::member("n0", Ipv4Addr::new(127, 10, 74, 2));
    api.ok(
        "regions/us-central1/addresses",
        json!({"name": "n0-ip", "address": external.to_string()}),
    )
    .await;
    let pki = ClusterPki::new();
    let md = testkit::master_metadata(&pki, &me, std::slice::from_ref(&me), "new", external);
    let items: Vec<Value> = md
        .iter()
        .map(|(k, v)| {
            let v = v.replace("--secure-port=443", &format!("--secure-port={API_PORT}"));
            json!({"key": k, "value": v})
        })
        .collect();
    assert!(
        items.iter().any(|i| i["value"]
            .as_str()
            .is_some_and(|v| v.contains("--secure-port=6443"))),
        "the API server must listen on {API_PORT}"
    );
    let body = json!({"name": "n0", "machineType": "zones/us-central1-a/machineTypes/e2-standard-2",
        "networkInterfaces": [{"networkIP": me.ip.to_string(),
            "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "natIP": external.to_string()}]}],
        "metadata": {"items": items}});
    api.ok("zones/us-central1-a/instances", body).await;
    api.ok("global/firewalls", json!({"name": "api", "allowed": [{"IPProtocol": "tcp", "ports": [API_PORT.to_string()]}], "sourceRanges": ["127.0.0.0/8"]})).await;

    let port = crate::net::PortMap::default().host_port(API_PORT);
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match testkit::https_get(external, port, &pki.cluster.ca_pem, "/healthz").await {
            Ok((200, replica)) => break replica,
            Ok(_) | Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => panic!("no 200 from {external}:{API_PORT} through the NAT: {other:?}"),
        }
    };
    assert_eq!(answer, "n0");
    running.stop().await;
}
