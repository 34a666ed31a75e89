//! A forwarding rule + target pool: a TCP load balancer on the rule's IP that round-robins new connections over the
//! pool's instances which pass the (legacy) HTTP health check, or over all of them when none does (GCE's rule).
//! Connections keep the client's address, so the backends' firewall judges the client, not the balancer; health
//! probes come from GCE's prober ranges and pass the same firewall.

use super::background::Background;
use super::firewall::{SharedIngress, Source};
use super::proxy::{Chooser, Route, bind_all, serve};
use super::{NetError, PortMap, http};
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// A legacy `HttpHealthCheck`. [`Default`] is GCE's defaults: port 80, path "/", every 5 s, 5 s timeout, 2 to flip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheckSpec {
    /// Guest port (mapped through the balancer's [`PortMap`]).
    pub port: u16,
    pub request_path: String,
    pub check_interval: Duration,
    pub timeout: Duration,
    /// Consecutive successes that make an unhealthy backend healthy.
    pub healthy_threshold: u32,
    /// Consecutive failures that make a healthy backend unhealthy.
    pub unhealthy_threshold: u32,
}

impl Default for HealthCheckSpec {
    fn default() -> Self {
        HealthCheckSpec {
            port: 80,
            request_path: "/".to_string(),
            check_interval: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
            healthy_threshold: 2,
            unhealthy_threshold: 2,
        }
    }
}

impl HealthCheckSpec {
    /// The same check with its interval and timeout multiplied by `factor` (the sim's time scale; 0.01 makes GCE's 5 s
    /// into 50 ms). Thresholds are counts and stay as they are.
    pub fn scaled(mut self, factor: f64) -> Self {
        let factor = factor.max(0.0);
        self.check_interval = self
            .check_interval
            .mul_f64(factor)
            .max(Duration::from_millis(1));
        self.timeout = self.timeout.mul_f64(factor).max(Duration::from_millis(1));
        self
    }
}

/// Where legacy health checks of a target pool come from: one address from each of GCE's documented prober ranges
/// for target-pool-based network load balancers (35.191.0.0/16, 209.85.152.0/22, 209.85.204.0/22). Probes take
/// them in turn, so a firewall that admits only some ranges makes a backend flap, as on GCE.
pub const PROBER_SOURCES: [Ipv4Addr; 3] = [
    Ipv4Addr::new(35, 191, 0, 1),
    Ipv4Addr::new(209, 85, 152, 1),
    Ipv4Addr::new(209, 85, 204, 1),
];

/// Everything a forwarding rule pointing at a target pool decides.
#[derive(Clone)]
pub struct LbConfig {
    /// The rule's IP address (usually the cluster's reserved static IP).
    pub ip: Ipv4Addr,
    /// Guest ports from the rule's portRange (e.g. `[443]`); each is mapped through `port_map`.
    pub ports: Vec<u16>,
    /// Internal IPs of the pool's instances.
    pub backends: Vec<Ipv4Addr>,
    /// The pool's health check. None = every backend counts as healthy, as for a target pool without one.
    pub health_check: Option<HealthCheckSpec>,
    /// Time from creation until the rule carries traffic (GCE: "can take up to 20 min"); until then connections to
    /// `ip` are accepted and closed at once.
    pub propagation_delay: Duration,
    pub port_map: PortMap,
    /// The backends' VPC firewall: client connections and health probes reach a backend only if it admits them.
    pub firewall: SharedIngress,
}

impl std::fmt::Debug for LbConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LbConfig")
            .field("ip", &self.ip)
            .field("ports", &self.ports)
            .field("backends", &self.backends)
            .field("health_check", &self.health_check)
            .field("propagation_delay", &self.propagation_delay)
            .field("port_map", &self.port_map)
            .finish_non_exhaustive()
    }
}

/// A backend and whether the balancer currently sends it traffic (targetPools.getHealth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backend {
    pub ip: Ipv4Addr,
    pub healthy: bool,
}

#[derive(Debug)]
struct BackendState {
    ip: Ipv4Addr,
    healthy: bool,
    successes: u32,
    failures: u32,
}

#[derive(Debug)]
struct Shared {
    backends: Mutex<Vec<BackendState>>,
    next: std::sync::atomic::AtomicUsize,
    serving_from: Instant,
    checked: bool,
}

impl Shared {
    fn new_backend(&self, ip: Ipv4Addr) -> BackendState {
        // With a health check a new instance must first prove itself; without one the pool trusts it blindly.
        BackendState {
            ip,
            healthy: !self.checked,
            successes: 0,
            failures: 0,
        }
    }

    /// The backend of a new connection: the next healthy one, or, when no backend is healthy, the next of all of
    /// them. GCE's TargetPool reference (field `backupPool`): without a backup pool, traffic is spread "to the healthy
    /// instances with the best effort, or to all instances when no instance is healthy". None before propagation or
    /// with an empty pool.
    fn choose(&self) -> Option<Ipv4Addr> {
        if Instant::now() < self.serving_from {
            return None;
        }
        let backends = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        let healthy: Vec<Ipv4Addr> = backends
            .iter()
            .filter(|b| b.healthy)
            .map(|b| b.ip)
            .collect();
        let candidates = if healthy.is_empty() {
            backends.iter().map(|b| b.ip).collect()
        } else {
            healthy
        };
        if candidates.is_empty() {
            return None;
        }
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(candidates[n % candidates.len()])
    }

    fn record(&self, ip: Ipv4Addr, ok: bool, spec: &HealthCheckSpec) {
        let mut backends = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        // The backend may have been removed while the probe ran; then there is nothing to record.
        let Some(b) = backends.iter_mut().find(|b| b.ip == ip) else {
            return;
        };
        if ok {
            b.successes += 1;
            b.failures = 0;
            if b.successes >= spec.healthy_threshold {
                b.healthy = true;
            }
        } else {
            b.failures += 1;
            b.successes = 0;
            if b.failures >= spec.unhealthy_threshold {
                b.healthy = false;
            }
        }
    }
}

/// A running forwarding rule. Dropping it (or [`LoadBalancer::stop`]) removes the rule and cuts its connections.
pub struct LoadBalancer {
    ip: Ipv4Addr,
    ports: Vec<u16>,
    shared: Arc<Shared>,
    background: Background,
}

impl LoadBalancer {
    /// Binds the rule's ports now (so conflicts are reported here) and starts health checking at once; traffic flows
    /// after `propagation_delay`.
    pub fn start(config: LbConfig) -> Result<LoadBalancer, NetError> {
        let listeners = bind_all(config.ip, &config.ports, config.port_map)?;
        let shared = Arc::new(Shared {
            backends: Mutex::new(Vec::new()),
            next: Default::default(),
            serving_from: Instant::now() + config.propagation_delay,
            checked: config.health_check.is_some(),
        });
        set_backends(&shared, &config.backends);

        let for_proxy = shared.clone();
        let (map, firewall) = (config.port_map, config.firewall.clone());
        let choose: Chooser = Arc::new(move |guest, _| match for_proxy.choose() {
            // The pool passes the client's address through: the backend's firewall must admit the client.
            Some(ip) if firewall.admits(Source::Client, ip, guest) => {
                Route::To(SocketAddr::V4(SocketAddrV4::new(ip, map.host_port(guest))))
            }
            Some(_) => Route::Drop,
            None => Route::Close,
        });
        let for_checks = shared.clone();
        let check = config.health_check.clone();
        let firewall = config.firewall.clone();
        let background = Background::spawn(&format!("lb-{}", config.ip), move || async move {
            match check {
                Some(spec) => {
                    tokio::join!(
                        serve(listeners, choose),
                        health_loop(for_checks, spec, map, firewall)
                    );
                }
                None => serve(listeners, choose).await,
            }
        })
        .map_err(NetError::io(format!(
            "start load balancer on {}",
            config.ip
        )))?;
        Ok(LoadBalancer {
            ip: config.ip,
            ports: config.ports,
            shared,
            background,
        })
    }

    /// Replaces the pool's instances (targetPools.addInstance/removeInstance). Backends that stay keep their health.
    pub fn set_backends(&self, ips: &[Ipv4Addr]) {
        set_backends(&self.shared, ips);
    }

    /// Each backend with its current health, in pool order.
    pub fn backends(&self) -> Vec<Backend> {
        let backends = self
            .shared
            .backends
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        backends
            .iter()
            .map(|b| Backend {
                ip: b.ip,
                healthy: b.healthy,
            })
            .collect()
    }

    /// Whether the propagation delay has passed (the rule carries traffic to healthy backends).
    pub fn is_serving(&self) -> bool {
        Instant::now() >= self.shared.serving_from
    }

    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The guest ports of the rule.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Deletes the rule; on return its ports are free and its connections closed.
    pub fn stop(mut self) {
        self.background.stop();
    }
}

impl std::fmt::Debug for LoadBalancer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadBalancer")
            .field("ip", &self.ip)
            .field("ports", &self.ports)
            .field("backends", &self.backends())
            .finish()
    }
}

fn set_backends(shared: &Shared, ips: &[Ipv4Addr]) {
    let mut backends = shared.backends.lock().unwrap_or_else(|e| e.into_inner());
    let mut old: Vec<BackendState> = std::mem::take(&mut *backends);
    for ip in dedup(ips) {
        match old.iter().position(|b| b.ip == ip) {
            Some(i) => backends.push(old.swap_remove(i)),
            None => backends.push(shared.new_backend(ip)),
        }
    }
}

fn dedup(ips: &[Ipv4Addr]) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = Vec::with_capacity(ips.len());
    for ip in ips {
        if !out.contains(ip) {
            out.push(*ip);
        }
    }
    out
}

/// Probes every backend each interval, all in parallel, like GCE's prober fleet does. A probe the backend's firewall
/// drops fails, as it would time out.
async fn health_loop(
    shared: Arc<Shared>,
    spec: HealthCheckSpec,
    map: PortMap,
    firewall: SharedIngress,
) {
    let mut ticker = tokio::time::interval(spec.check_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round = 0usize;
    loop {
        ticker.tick().await;
        let ips: Vec<Ipv4Addr> = {
            let backends = shared.backends.lock().unwrap_or_else(|e| e.into_inner());
            backends.iter().map(|b| b.ip).collect()
        };
        let from = PROBER_SOURCES[round % PROBER_SOURCES.len()];
        round = round.wrapping_add(1);
        let mut probes = tokio::task::JoinSet::new();
        for ip in ips {
            let (path, port, timeout) = (
                spec.request_path.clone(),
                map.host_port(spec.port),
                spec.timeout,
            );
            let admitted = firewall.admits(Source::Ip(from), ip, spec.port);
            probes.spawn(async move {
                let ok = admitted && probe(ip, port, &path, timeout).await;
                (ip, ok)
            });
        }
        while let Some(Ok((ip, ok))) = probes.join_next().await {
            shared.record(ip, ok, &spec);
        }
    }
}

/// A legacy HTTP health check passes only on HTTP 200 within the timeout.
async fn probe(ip: Ipv4Addr, port: u16, path: &str, timeout: Duration) -> bool {
    let attempt = async {
        let stream = TcpStream::connect(SocketAddr::V4(SocketAddrV4::new(ip, port))).await?;
        http::get(stream, &ip.to_string(), path).await
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Ok(resp)) if resp.status == 200)
}
