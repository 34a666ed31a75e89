//! The real fabric: VMs running etcd (`vm::Vm::boot_with`), 1:1 NATs (`net::forward`) and load balancers
//! (`net::LoadBalancer`), reconciled on a dedicated thread so slow boots never block the API.
//!
//! Calls into the VM/net layer (their signatures, as used here):
//! - `vm::Vm::boot_with(dir: &Path, name: &str, internal_ip: Ipv4Addr, metadata: &BTreeMap<String, String>,
//!   etcd_bin: &Path, opts: &vm::VmOptions) -> Result<vm::VmHandle, vm::VmError>`; dropping the handle powers off.
//! - `net::forward(listen_ip: Ipv4Addr, target_ip: Ipv4Addr, ports: &[u16], map: net::PortMap)
//!   -> Result<net::Forward, net::NetError>`; dropping it removes the NAT.
//! - `net::LoadBalancer::start(net::LbConfig) -> Result<LoadBalancer, NetError>`, `.set_backends(&[Ipv4Addr])`,
//!   `.backends() -> Vec<net::Backend{ip, healthy}>`, `.is_serving()`; dropping it removes the rule.

use super::firewall::Policy;
use super::{Desired, Fabric, LbHealth, LbSpec};
use crate::config::SimConfig;
use crate::net::{self, Forward, Ingress, LbConfig, LoadBalancer, PortMap, SharedIngress, Source};
use crate::vm::{Vm, VmHandle, VmOptions};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often failed starts are retried (a port still held by a dying process, an etcd binary that appeared).
const RETRY: Duration = Duration::from_secs(2);

type Lbs = Arc<Mutex<BTreeMap<String, (LbSpec, Arc<LoadBalancer>)>>>;
type Vms = Arc<Mutex<BTreeMap<String, VmHandle>>>;
type Problems = Arc<Mutex<BTreeMap<String, String>>>;

/// The firewall the running proxies consult. `sync` swaps in the newest policy under the state lock, so a changed
/// rule or client address applies to the next connection, before the reconciler even wakes.
#[derive(Default)]
struct LiveIngress(Mutex<Arc<Policy>>);

impl Ingress for LiveIngress {
    fn admits(&self, from: Source, to: Ipv4Addr, guest_port: u16) -> bool {
        let policy = lock(&self.0).clone();
        let (from, v) = match from {
            Source::Client => (policy.client(), policy.verdict_for_client(to, guest_port)),
            Source::Ip(ip) => (ip, policy.verdict(ip, to, guest_port)),
        };
        if !v.admitted {
            // What a user debugging "connection timed out" wants to know (HA_SIM_LOG=debug).
            let why = v
                .rule
                .map_or("no rule admits it (implied deny)".to_string(), |r| {
                    format!("denied by rule {r}")
                });
            tracing::debug!("firewall drops {from} -> {to}:{guest_port}: {why}");
        }
        v.admitted
    }
}

/// How far the reconciler got: the number of the last state handed to `sync`, and of the last one converged to.
#[derive(Default)]
struct Progress {
    sent: std::sync::atomic::AtomicU64,
    applied: Mutex<u64>,
    converged: std::sync::Condvar,
}

pub struct LiveFabric {
    tx: Mutex<Option<mpsc::Sender<(u64, Desired)>>>,
    progress: Arc<Progress>,
    ingress: Arc<LiveIngress>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    vms: Vms,
    lbs: Lbs,
    problems: Problems,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the reconciler owns: everything that is running.
struct Actual {
    cfg: SimConfig,
    opts: VmOptions,
    vms: Vms,
    nats: BTreeMap<(Ipv4Addr, Ipv4Addr), Forward>,
    /// The guest ports the running NATs carry: the configured ones less the blocked ones.
    nat_ports: Vec<u16>,
    lbs: Lbs,
    problems: Problems,
    firewall: SharedIngress,
}

/// Which VM opened a connection to a peer port: the VM whose etcd process holds its client end (`/proc`), else the
/// sim's host (a NAT splicing a connection from outside, a user's etcdctl).
fn identify_vm(vms: Vms) -> net::Identify {
    Arc::new(move |client, reached| {
        let etcds: Vec<(u32, Ipv4Addr)> = lock(&vms)
            .values()
            .filter_map(|h| Some((h.status().etcd_pid?, h.internal_ip())))
            .collect();
        let pids: Vec<u32> = etcds.iter().map(|(pid, _)| *pid).collect();
        net::socket_owner(client, reached, &pids)
            .and_then(|owner| etcds.iter().find(|(pid, _)| *pid == owner))
            .map_or(Source::Client, |(_, ip)| Source::Ip(*ip))
    })
}

impl LiveFabric {
    pub fn start(cfg: &SimConfig) -> Result<Self, String> {
        let (tx, rx) = mpsc::channel::<(u64, Desired)>();
        let progress: Arc<Progress> = Arc::default();
        let reported = progress.clone();
        let lbs: Lbs = Arc::default();
        let vms: Vms = Arc::default();
        let problems: Problems = Arc::default();
        let ingress: Arc<LiveIngress> = Arc::default();
        let mut actual = Actual {
            cfg: cfg.clone(),
            opts: VmOptions {
                port_map: PortMap {
                    privileged_offset: cfg.privileged_port_offset,
                },
                peer_firewall: ingress.clone(),
                identify: identify_vm(vms.clone()),
                addon_delay: cfg.latency.addon_delay,
                ..VmOptions::default()
            },
            vms: vms.clone(),
            nats: BTreeMap::new(),
            nat_ports: cfg.nat_ports.clone(),
            lbs: lbs.clone(),
            problems: problems.clone(),
            firewall: ingress.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("fabric".into())
            .spawn(move || {
                let (mut n, mut last) = (0, Desired::default());
                loop {
                    match rx.recv_timeout(RETRY) {
                        Ok(d) => (n, last) = d,
                        Err(RecvTimeoutError::Timeout) if lock(&actual.problems).is_empty() => {
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                    // Only the newest state matters; skip intermediate ones.
                    while let Ok(d) = rx.try_recv() {
                        (n, last) = d;
                    }
                    actual.reconcile(&last);
                    *lock(&reported.applied) = n;
                    reported.converged.notify_all();
                }
                actual.stop_all();
            })
            .map_err(|e| format!("starting the fabric thread: {e}"))?;
        Ok(LiveFabric {
            tx: Mutex::new(Some(tx)),
            progress,
            ingress,
            thread: Mutex::new(Some(thread)),
            vms,
            lbs,
            problems,
        })
    }
}

impl Fabric for LiveFabric {
    fn sync(&self, desired: &Desired) {
        *lock(&self.ingress.0) = Arc::new(desired.firewall.clone());
        if let Some(tx) = lock(&self.tx).as_ref() {
            // Numbered under the sender's lock, so numbers reach the reconciler in order.
            let n = self
                .progress
                .sent
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                + 1;
            let _ = tx.send((n, desired.clone()));
        }
    }

    fn settle(&self, timeout: Duration) -> bool {
        let target = self.progress.sent.load(std::sync::atomic::Ordering::SeqCst);
        let applied = lock(&self.progress.applied);
        let (applied, _) = self
            .progress
            .converged
            .wait_timeout_while(applied, timeout, |a| *a < target)
            .unwrap_or_else(|e| e.into_inner());
        *applied >= target
    }

    fn lb_health(&self, fr_key: &str) -> Option<LbHealth> {
        let lb = lock(&self.lbs).get(fr_key).map(|(_, lb)| lb.clone())?;
        Some(LbHealth {
            serving: lb.is_serving(),
            backends: lb.backends().iter().map(|b| (b.ip, b.healthy)).collect(),
        })
    }

    fn problems(&self) -> BTreeMap<String, String> {
        lock(&self.problems).clone()
    }

    fn vm_status(&self, vm_key: &str) -> Option<serde_json::Value> {
        lock(&self.vms)
            .get(vm_key)
            .and_then(|h| serde_json::to_value(h.status()).ok())
    }

    /// Closes the channel; the thread then stops everything (killing every etcd) and exits.
    fn shutdown(&self) {
        drop(lock(&self.tx).take());
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Actual {
    fn problem(&self, key: &str, what: Option<String>) {
        let mut p = lock(&self.problems);
        match what {
            Some(w) => {
                tracing::warn!(%key, problem = %w, "fabric");
                p.insert(key.to_string(), w);
            }
            None => drop(p.remove(key)),
        }
    }

    /// Removals first, so an IP moving from a NAT to a load balancer finds its ports free. Handles are dropped
    /// outside the locks: stopping one waits for its processes and threads.
    fn reconcile(&mut self, d: &Desired) {
        let dead_vms: Vec<VmHandle> = take_where(&self.vms, |k, _| !d.vms.contains_key(k));
        drop(dead_vms);
        let nat_ports = d.nat_ports.clone();
        if nat_ports != self.nat_ports {
            // A NAT listens per port: carrying another set of ports means starting it again.
            self.nats.clear();
            self.nat_ports = nat_ports;
        }
        self.nats.retain(|k, _| d.nats.contains(k));
        let dead_lbs = take_where(&self.lbs, |k, (spec, _)| {
            d.lbs.get(k).is_none_or(|s| !same_rule(s, spec))
        });
        drop(dead_lbs);
        lock(&self.problems)
            .retain(|k, _| d.vms.contains_key(k) || d.lbs.contains_key(k) || k.starts_with("nat "));
        self.remove_deleted_disks(d);
        for (key, spec) in &d.vms {
            if lock(&self.vms).contains_key(key) {
                continue;
            }
            let booted = std::fs::create_dir_all(&spec.dir)
                .map_err(|e| format!("creating {}: {e}", spec.dir.display()))
                .and_then(|_| {
                    Vm::boot_attached(
                        &spec.dir,
                        &spec.name,
                        spec.internal_ip,
                        &spec.metadata,
                        &self.cfg.etcd_bins,
                        &self.opts,
                        &spec.attached,
                    )
                    .map_err(|e| format!("booting {}: {e}", spec.name))
                });
            match booted {
                Ok(h) => {
                    self.problem(key, None);
                    lock(&self.vms).insert(key.clone(), h);
                }
                Err(e) => self.problem(key, Some(e)),
            }
        }
        for &(ext, int) in &d.nats {
            let key = format!("nat {ext}->{int}");
            if self.nats.contains_key(&(ext, int)) {
                continue;
            }
            let nat = net::forward(
                ext,
                int,
                &self.nat_ports,
                self.opts.port_map,
                self.firewall.clone(),
            );
            match nat {
                Ok(f) => {
                    self.problem(&key, None);
                    self.nats.insert((ext, int), f);
                }
                Err(e) => self.problem(&key, Some(format!("NAT {ext} -> {int}: {e}"))),
            }
        }
        lock(&self.problems).retain(|k, _| {
            !k.starts_with("nat ") || d.nats.iter().any(|(e, i)| *k == format!("nat {e}->{i}"))
        });
        for (key, spec) in &d.lbs {
            let existing = lock(&self.lbs).get(key).map(|(_, lb)| lb.clone());
            if let Some(lb) = existing {
                lb.set_backends(&spec.backends);
                continue;
            }
            let ports = if spec.ports.is_empty() {
                self.cfg.nat_ports.clone()
            } else {
                spec.ports.clone()
            };
            let config = LbConfig {
                ip: spec.ip,
                ports,
                backends: spec.backends.clone(),
                health_check: spec.health_check.clone(),
                propagation_delay: self.cfg.latency.lb_propagation,
                port_map: self.opts.port_map,
                firewall: self.firewall.clone(),
            };
            match LoadBalancer::start(config) {
                Ok(lb) => {
                    self.problem(key, None);
                    lock(&self.lbs).insert(key.clone(), (spec.clone(), Arc::new(lb)));
                }
                Err(e) => self.problem(key, Some(format!("load balancer {}: {e}", spec.ip))),
            }
        }
    }

    /// Stops everything but keeps every disk: the sim is shutting down, not deleting instances.
    fn stop_all(&mut self) {
        drop(take_where(&self.lbs, |_, _| true));
        self.nats.clear();
        drop(take_where(&self.vms, |_, _| true));
    }

    /// A deleted instance's directory (its boot disk) goes with it; so does a deleted disk's. Every disk
    /// resource has its directory (made before any VM boots on it).
    fn remove_deleted_disks(&self, d: &Desired) {
        for (sub, live) in [("vms", &d.live_dirs), ("disks", &d.disk_dirs)] {
            let dead = subdirs(&self.cfg.state_dir.join(sub))
                .into_iter()
                .filter(|dir| !live.contains(dir));
            for dir in dead {
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!(
                        "removing the disk {} of a deleted resource: {e}",
                        dir.display()
                    );
                }
            }
        }
        for dir in &d.disk_dirs {
            if let Err(e) = std::fs::create_dir_all(dir) {
                self.problem(
                    &dir.display().to_string(),
                    Some(format!("creating disk {}: {e}", dir.display())),
                );
            }
        }
    }
}

/// `root/<zone>/<resource>` directories.
fn subdirs(root: &std::path::Path) -> Vec<PathBuf> {
    let Ok(zones) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    zones
        .flatten()
        .filter_map(|z| std::fs::read_dir(z.path()).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .collect()
}

/// Removes and returns the entries matching `pred`, so they can be dropped after the lock is released.
fn take_where<V>(map: &Mutex<BTreeMap<String, V>>, pred: impl Fn(&String, &V) -> bool) -> Vec<V> {
    let mut m = lock(map);
    let keys: Vec<String> = m
        .iter()
        .filter(|(k, v)| pred(k, v))
        .map(|(k, _)| k.clone())
        .collect();
    keys.iter().filter_map(|k| m.remove(k)).collect()
}

/// A rule keeps its balancer while IP, ports and health check are unchanged (backends are updated in place).
fn same_rule(a: &LbSpec, b: &LbSpec) -> bool {
    a.ip == b.ip && a.ports == b.ports && a.health_check == b.health_check
}
