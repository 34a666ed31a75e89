//! How one simulator instance is configured: where it listens, what links it emits, how slow it is.

use crate::etcd_bins::EtcdBins;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Everything `serve` needs; tests build one with [`SimConfig::for_tests`].
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Where state.json, VM directories and the port/pid file live. Persisted so separate terraform runs see one cloud.
    pub state_dir: PathBuf,
    /// Address to bind; port 0 picks a free one.
    pub listen: std::net::SocketAddr,
    /// Root of emitted links (`{base}compute/v1/projects/...`). `None` = `http://{bound address}/`.
    /// Never derived from the Host header: the Rust SDK sends Host without the port.
    pub base_url: Option<String>,
    /// `None` accepts any bearer token; `Some(t)` only `Bearer t`.
    pub require_token: Option<String>,
    pub latency: LatencyProfile,
    /// The etcd binaries VMs run, picked by the minor version of each VM's etcd image.
    pub etcd_bins: EtcdBins,
    /// Whether VMs and the network fabric are really started (false in API-only tests).
    pub fabric: bool,
    /// Guest ports a 1:1 NAT carries (a userspace proxy needs one listener per port): the API server (443),
    /// etcd client and peer (2379, 2380) and the health-check sidecar (3990, fixed in kops'
    /// kube-apiserver-healthcheck). Also the ports of an all-ports rule.
    pub nat_ports: Vec<u16>,
    /// Added to guest ports below 1024 on the host (so the API's 443 is served on 6443 without root). `serve`
    /// uses 0 when running as root, so `https://<static-ip>` works exactly as on GCE.
    pub privileged_port_offset: u16,
}

impl SimConfig {
    /// API-only, near-zero latencies, ephemeral port: what HTTP-level tests use.
    pub fn for_tests(state_dir: PathBuf) -> Self {
        SimConfig {
            state_dir,
            listen: "127.0.0.1:0".parse().expect("literal socket address"),
            base_url: None,
            require_token: None,
            latency: LatencyProfile::test(),
            etcd_bins: EtcdBins::single("etcd"),
            fabric: false,
            nat_ports: vec![443, 2379, 2380, 3990],
            privileged_port_offset: 6000,
        }
    }
}

/// When a real master's addon manager first applies its directory after boot, about: its pod starts with the
/// kubelet's other static pods, waits for the API server, then applies.
const ADDON_MANAGER_START: Duration = Duration::from_secs(30);

/// How long operations take, per kind (`instances.insert`, `addresses.delete`, ...), and how long `wait` may block.
#[derive(Clone, Debug)]
pub struct LatencyProfile {
    /// Latency of kinds not listed in `per_kind`.
    pub default: Duration,
    pub per_kind: BTreeMap<String, Duration>,
    /// How long `operations/{op}/wait` long-polls before returning a not-yet-DONE operation.
    /// The real API uses "approaching the 2 minute deadline".
    pub wait_deadline: Duration,
    /// Time a load balancer needs before a new forwarding rule carries traffic (passed to the net layer).
    pub lb_propagation: Duration,
    /// Multiplies health-check intervals and timeouts (GCE's 5 s becomes 250 ms at 0.05).
    pub time_scale: f64,
    /// How long after a master boots its addon manager first makes the addons' bindings (`vm::addon_manager`):
    /// on a real master the addon manager's pod starts with the kubelet and applies on start, some 30 s in.
    pub addon_delay: Duration,
}

impl LatencyProfile {
    /// Near zero so a test suite with hundreds of operations stays fast, but still asynchronous:
    /// the first response is PENDING, so clients must poll as they would against Google.
    pub fn test() -> Self {
        LatencyProfile {
            default: Duration::from_millis(20),
            per_kind: BTreeMap::new(),
            wait_deadline: Duration::from_secs(2),
            lb_propagation: Duration::from_millis(100),
            // GCE's 5 s health check every 250 ms. At 0.01 (every 50 ms) the load balancer's probes were a quarter
            // of the sim's CPU in the scenarios, for a backend change noticed 0.4 s sooner (docs/benchmarks.md).
            time_scale: 0.05,
            addon_delay: ADDON_MANAGER_START.mul_f64(0.01),
        }
    }

    /// Seconds, in the proportions seen on real GCE, so a demo shows waiting and progress.
    pub fn demo() -> Self {
        let per_kind = [
            ("instances.insert", 8_000),
            ("instances.delete", 6_000),
            ("instances.start", 5_000),
            ("instances.stop", 4_000),
            ("instances.setMetadata", 1_500),
            ("instances.setLabels", 1_500),
            ("instances.setTags", 1_500),
            ("instances.addAccessConfig", 2_000),
            ("instances.deleteAccessConfig", 2_000),
            ("addresses.insert", 1_500),
            ("addresses.delete", 1_500),
            ("addresses.setLabels", 500),
            ("subnetworks.insert", 3_000),
            ("subnetworks.delete", 3_000),
            ("forwardingRules.insert", 3_000),
            ("forwardingRules.delete", 3_000),
            ("targetPools.insert", 2_000),
            ("targetPools.addInstance", 2_000),
            ("targetPools.removeInstance", 2_000),
        ];
        LatencyProfile {
            default: Duration::from_millis(1_500),
            per_kind: per_kind
                .iter()
                .map(|(k, ms)| (k.to_string(), Duration::from_millis(*ms)))
                .collect(),
            wait_deadline: Duration::from_secs(120),
            lb_propagation: Duration::from_secs(5),
            time_scale: 0.2,
            addon_delay: ADDON_MANAGER_START.mul_f64(0.2),
        }
    }

    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "test" => Some(Self::test()),
            "demo" => Some(Self::demo()),
            _ => None,
        }
    }

    /// Latency of one operation kind, e.g. `instances.insert`.
    pub fn of(&self, kind: &str) -> Duration {
        self.per_kind.get(kind).copied().unwrap_or(self.default)
    }
}
