//! The fabric: VMs, NATs and load balancers that follow the `Cloud`.
//!
//! Handlers only change data. After each change the sim computes [`Desired`] (a pure function of the cloud)
//! and hands it to the fabric, which converges in the background: boots VMs that should run, kills those
//! that should not, opens and closes NATs and forwarding rules. So an out-of-band event, a restart of the sim
//! or an operation completing all go through the same path.

#[cfg(test)]
mod e2e_tests;
pub mod firewall;
pub mod live;

use crate::config::SimConfig;
use crate::state::{Cloud, links};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// A VM that should be running.
#[derive(Clone, Debug, PartialEq)]
pub struct VmSpec {
    pub name: String,
    pub zone: String,
    /// Persistent per-instance directory (its "boot disk"): survives stop/start, removed on delete.
    pub dir: PathBuf,
    pub internal_ip: Ipv4Addr,
    pub metadata: BTreeMap<String, String>,
    /// Attached non-boot disks (device name → the disk's host directory, see [`disk_dir`]) and the service
    /// account.
    pub attached: crate::vm::Attached,
}

/// A forwarding rule's balancer.
#[derive(Clone, Debug, PartialEq)]
pub struct LbSpec {
    pub ip: Ipv4Addr,
    pub ports: Vec<u16>,
    /// Internal IPs of the pool's RUNNING instances.
    pub backends: Vec<Ipv4Addr>,
    pub health_check: Option<crate::net::HealthCheckSpec>,
}

/// What should exist, keyed so that a change of identity (instance recreated with the same name: new id)
/// replaces the process rather than keeping the old one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    /// Key: instance relative path + `#` + id.
    pub vms: BTreeMap<String, VmSpec>,
    /// (external, internal) 1:1 NATs from access configs.
    pub nats: BTreeSet<(Ipv4Addr, Ipv4Addr)>,
    /// Key: forwarding rule relative path.
    pub lbs: BTreeMap<String, LbSpec>,
    /// Directories of instances that no longer exist (deleted): their disks go too.
    pub live_dirs: BTreeSet<PathBuf>,
    /// Guest ports the NATs do not carry: connections from outside to them are refused.
    pub blocked_external_ports: BTreeSet<u16>,
    /// Guest ports every NAT carries: the fixed ones (`SimConfig::nat_ports`) and every port a firewall rule names
    /// (an `api_port` of 6443 included), less the blocked ones.
    pub nat_ports: Vec<u16>,
    /// Host directories of every disk resource: made if missing; others under `state_dir/disks` are removed.
    pub disk_dirs: BTreeSet<PathBuf>,
    /// The VPC firewall every NAT, balancer, health check and peer port applies to the next connection.
    pub firewall: firewall::Policy,
}

/// What `ha-sim status` and `targetPools.getHealth` learn from the fabric.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LbHealth {
    pub serving: bool,
    /// (backend internal IP, healthy)
    pub backends: Vec<(Ipv4Addr, bool)>,
}

/// The interface the sim needs from the machines and the network.
pub trait Fabric: Send + Sync {
    /// Converge towards `desired` (asynchronously; must return quickly, it is called under the state lock).
    fn sync(&self, desired: &Desired);
    /// Health of a forwarding rule's balancer; `None` if it is not running (no fabric, or not yet started).
    fn lb_health(&self, fr_key: &str) -> Option<LbHealth>;
    /// Problems starting things, per resource key (shown by `ha-sim status`).
    fn problems(&self) -> BTreeMap<String, String>;
    /// What runs in a VM (`Desired::vms` key: instance path `#` id), e.g. etcd's pid and health.
    fn vm_status(&self, vm_key: &str) -> Option<serde_json::Value>;
    /// Stop everything, waiting until every child process is gone.
    fn shutdown(&self);
    /// Blocks until every state handed to `sync` so far has been converged to, or `timeout` passes; whether it
    /// converged. An out-of-band event (a crashed VM) is only over once its processes are gone: a caller that
    /// looks right after must not find the VM's etcd still answering.
    fn settle(&self, timeout: std::time::Duration) -> bool;
}

/// For API-only tests: nothing runs; health is derived from instance status by the caller.
pub struct NoFabric;

impl Fabric for NoFabric {
    fn sync(&self, _: &Desired) {}
    fn lb_health(&self, _: &str) -> Option<LbHealth> {
        None
    }
    fn problems(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn vm_status(&self, _: &str) -> Option<serde_json::Value> {
        None
    }
    fn shutdown(&self) {}
    fn settle(&self, _: std::time::Duration) -> bool {
        true
    }
}

/// Where an instance's VM keeps its files: `state_dir/vms/{zone}/{name}-{id}`.
pub fn vm_dir(cfg: &SimConfig, zone: &str, name: &str, id: &str) -> PathBuf {
    cfg.state_dir
        .join("vms")
        .join(zone)
        .join(format!("{name}-{id}"))
}

/// Where a disk's data lives: `state_dir/disks/{zone}/{name}-{id}` (a recreated disk of the same name starts
/// empty). Boot disks have one too, unused: the VM's own directory plays its boot disk.
pub fn disk_dir(cfg: &SimConfig, zone: &str, name: &str, id: &str) -> PathBuf {
    cfg.state_dir
        .join("disks")
        .join(zone)
        .join(format!("{name}-{id}"))
}

fn ip(s: Option<&str>) -> Option<Ipv4Addr> {
    s.and_then(|s| s.parse().ok())
}

/// The pure mapping from cloud state to running things.
/// What a NAT carries: real 1:1 NAT carries every port, a userspace one listens per port, so it listens on the
/// fixed ports and on every port a rule could admit (`Policy::named_allow_ports`), but never on a blocked one.
fn nat_ports(fixed: &[u16], firewall: &firewall::Policy, blocked: &BTreeSet<u16>) -> Vec<u16> {
    let mut ports: BTreeSet<u16> = fixed.iter().copied().collect();
    ports.extend(firewall.named_allow_ports());
    ports.retain(|p| !blocked.contains(p));
    ports.into_iter().collect()
}

pub fn desired(cloud: &Cloud, cfg: &SimConfig) -> Desired {
    let mut d = Desired {
        blocked_external_ports: cloud.blocked_external_ports.clone(),
        firewall: firewall::policy(cloud),
        ..Desired::default()
    };
    d.nat_ports = nat_ports(&cfg.nat_ports, &d.firewall, &d.blocked_external_ports);
    let mut internal_of = BTreeMap::new();
    for disk in cloud.disks.values() {
        let dir = disk_dir(cfg, links::name_of(&disk.zone), &disk.name, &disk.id);
        d.disk_dirs.insert(dir);
    }
    for (key, i) in &cloud.instances {
        let zone = links::name_of(&i.zone).to_string();
        let dir = vm_dir(cfg, &zone, &i.name, &i.id);
        d.live_dirs.insert(dir.clone());
        let Some(nic0) = i.network_interfaces.first() else {
            continue;
        };
        let Some(internal) = ip(nic0.network_ip.as_deref()) else {
            continue;
        };
        if i.status == "RUNNING" {
            internal_of.insert(i.self_link.clone(), internal);
            let spec = VmSpec {
                name: i.name.clone(),
                zone,
                dir,
                internal_ip: internal,
                metadata: i.metadata.to_map(),
                attached: crate::vm::Attached {
                    disks: attached_disks(cloud, cfg, i),
                    service_account: i
                        .extra
                        .get("serviceAccounts")
                        .and_then(|a| a.get(0)?.get("email")?.as_str().map(str::to_string)),
                    scopes: i
                        .extra
                        .get("serviceAccounts")
                        .and_then(|a| a.get(0)?.get("scopes")?.as_array().cloned())
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect(),
                },
            };
            d.vms.insert(format!("{key}#{}", i.id), spec);
        }
        for nic in &i.network_interfaces {
            let Some(int) = ip(nic.network_ip.as_deref()) else {
                continue;
            };
            for ac in &nic.access_configs {
                if let Some(ext) = ip(ac.nat_ip.as_deref()) {
                    d.nats.insert((ext, int));
                }
            }
        }
    }
    for (key, fr) in &cloud.forwarding_rules {
        let Some(frip) = ip(Some(&fr.ip_address)) else {
            continue;
        };
        let pool = cfg_pool(cloud, &fr.target);
        let backends = pool.map(|p| {
            p.instances
                .iter()
                .filter_map(|u| internal_of.get(u).copied())
                .collect()
        });
        let health_check = pool.and_then(|p| p.health_checks.first()).and_then(|hc| {
            let rel = hc.find("projects/").map(|i| &hc[i..])?;
            let h = cloud.http_health_checks.get(rel)?;
            let spec = crate::net::HealthCheckSpec {
                port: u16::try_from(h.port).unwrap_or(80),
                request_path: h.request_path.clone(),
                check_interval: std::time::Duration::from_secs(
                    u64::try_from(h.check_interval_sec).unwrap_or(5),
                ),
                timeout: std::time::Duration::from_secs(u64::try_from(h.timeout_sec).unwrap_or(5)),
                healthy_threshold: u32::try_from(h.healthy_threshold).unwrap_or(2),
                unhealthy_threshold: u32::try_from(h.unhealthy_threshold).unwrap_or(2),
            };
            // Intervals scale with the profile, but a probe keeps at least 1 s (or the configured timeout, if
            // shorter) so a busy machine does not flap every backend to UNHEALTHY.
            let floor = spec.timeout.min(std::time::Duration::from_secs(1));
            let mut scaled = spec.scaled(cfg.latency.time_scale);
            scaled.timeout = scaled.timeout.max(floor);
            Some(scaled)
        });
        let spec = LbSpec {
            ip: frip,
            ports: fr.port_list(),
            backends: backends.unwrap_or_default(),
            health_check,
        };
        d.lbs.insert(key.clone(), spec);
    }
    d
}

/// An instance's non-boot disks that exist, by device name → host directory.
fn attached_disks(
    cloud: &Cloud,
    cfg: &SimConfig,
    i: &crate::state::resources::Instance,
) -> BTreeMap<String, PathBuf> {
    i.disks
        .iter()
        .filter(|a| !a["boot"].as_bool().unwrap_or(false))
        .filter_map(|a| {
            let disk = cloud
                .disks
                .get(a["source"].as_str().and_then(links::rel_of)?)?;
            let dev = a["deviceName"].as_str()?.to_string();
            Some((
                dev,
                disk_dir(cfg, links::name_of(&disk.zone), &disk.name, &disk.id),
            ))
        })
        .collect()
}

fn cfg_pool<'a>(cloud: &'a Cloud, target: &str) -> Option<&'a crate::state::resources::TargetPool> {
    let rel = target.find("projects/").map(|i| &target[i..])?;
    cloud.target_pools.get(rel)
}

#[cfg(test)]
mod nat_port_tests {
    use super::*;
    use crate::state::resources::Firewall;
    use serde_json::json;

    fn with_rule(ports: &[&str]) -> Cloud {
        let mut c = Cloud::new("https://sim/");
        let serde_json::Value::Object(extra) = json!({"allowed": [{"IPProtocol": "tcp", "ports": ports}], "sourceRanges": ["0.0.0.0/0"]})
        else {
            unreachable!("a literal object")
        };
        c.firewalls.insert(
            "projects/p/global/firewalls/api".into(),
            Firewall {
                name: "api".into(),
                network: "global/networks/default".into(),
                priority: 1000,
                direction: "INGRESS".into(),
                extra,
                ..Default::default()
            },
        );
        c
    }

    #[test]
    fn a_nat_carries_the_api_port_its_rule_names_and_never_a_blocked_port() {
        let cfg = SimConfig::for_tests(PathBuf::from("/nonexistent"));
        let mut c = with_rule(&["6443"]);
        assert_eq!(desired(&c, &cfg).nat_ports, [443, 2379, 2380, 3990, 6443]);
        c.blocked_external_ports.insert(2379);
        c.blocked_external_ports.insert(6443);
        assert_eq!(desired(&c, &cfg).nat_ports, [443, 2380, 3990]);
        assert_eq!(
            desired(&Cloud::new("https://sim/"), &cfg).nat_ports,
            cfg.nat_ports
        );
    }
}
