//! The simulated cloud as plain data: every resource and operation, persisted as one JSON file.
//!
//! Architecture invariant: this module does no networking and starts no process. Handlers change a `Cloud`;
//! the fabric (`crate::fabric`) makes processes and proxies follow it.

pub mod catalog;
pub mod ids;
pub mod links;
pub mod resources;

use crate::net::Cidr;
use crate::ops::model::{Collection, OpRecord, Transition};
use resources::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// Maps are keyed by relative path (`projects/p/zones/z/instances/i`), so listing a scope is a prefix scan.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Cloud {
    /// The link root the stored URLs were built with; rewritten on load if the sim now listens elsewhere.
    pub base_url: String,
    #[serde(default)]
    pub instances: BTreeMap<String, Instance>,
    #[serde(default)]
    pub addresses: BTreeMap<String, Address>,
    #[serde(default)]
    pub firewalls: BTreeMap<String, Firewall>,
    #[serde(default)]
    pub http_health_checks: BTreeMap<String, HttpHealthCheck>,
    #[serde(default)]
    pub target_pools: BTreeMap<String, TargetPool>,
    #[serde(default)]
    pub forwarding_rules: BTreeMap<String, ForwardingRule>,
    #[serde(default)]
    pub disks: BTreeMap<String, Disk>,
    /// Subnetworks users created; the implicit `default` of every region is not stored (see `api::subnetworks`).
    #[serde(default)]
    pub subnetworks: BTreeMap<String, Subnetwork>,
    #[serde(default)]
    pub operations: BTreeMap<String, OpRecord>,
    /// `project/requestId` → operation key: a repeated mutation returns the first one's operation.
    #[serde(default)]
    pub request_ids: BTreeMap<String, String>,
    #[serde(default)]
    pub zones_down: BTreeSet<String>,
    /// Instances a zone outage stopped; they come back when the zone does (automatic restart).
    #[serde(default)]
    pub crashed_by_outage: BTreeSet<String>,
    /// Guest ports that no connection from outside the VPC reaches on any VM's external IP (`fault block-port`):
    /// what a Terraform host outside a firewall rule's source ranges sees. Traffic between VMs is not affected.
    #[serde(default)]
    pub blocked_external_ports: BTreeSet<u16>,
    /// The address connections from the sim's host (Terraform, tests) come from as the VMs' firewall sees it
    /// (`fault client-ip`); None = `fabric::firewall::DEFAULT_CLIENT_IP`, 127.0.0.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<Ipv4Addr>,
    /// Secret Manager's secrets, by `project/secret` (`crate::secrets`).
    #[serde(default)]
    pub secrets: BTreeMap<String, crate::secrets::model::Secret>,
}

/// Where an IP is allocated from. Internal addresses (instances' `networkIP`, INTERNAL addresses) come from a
/// subnetwork's primary range (`api::subnetworks::resolve`; the `default` subnetworks' is `net::IpPool::internal()`'s
/// 127.10.0.0/16); external ones (natIP, EXTERNAL addresses, forwarding rules) from `net::IpPool::external()`
/// (127.20.0.0/16). Distinct loopback addresses let every VM bind the same ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpRange {
    /// A subnetwork's primary range.
    Internal(Cidr),
    External,
}

impl IpRange {
    /// The addresses of the range that may be handed out; None for a range no pool can cover (never stored: a
    /// subnetwork's range is checked when it is created).
    fn pool(self) -> Option<crate::net::IpPool> {
        match self {
            IpRange::Internal(range) => crate::net::IpPool::in_subnet(range).ok(),
            IpRange::External => Some(crate::net::IpPool::external()),
        }
    }

    pub fn contains(self, ip: &str) -> bool {
        let Some(pool) = self.pool() else {
            return false;
        };
        ip.parse::<Ipv4Addr>().is_ok_and(|ip| pool.contains(ip))
    }
}

impl Cloud {
    pub fn new(base_url: &str) -> Self {
        Cloud {
            base_url: base_url.to_string(),
            ..Default::default()
        }
    }

    fn file(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }

    /// Loads `dir/state.json`, or a fresh cloud. Links stored under an old base URL are moved to `base_url`.
    pub fn load(dir: &Path, base_url: &str) -> Result<Self, String> {
        let path = Self::file(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Cloud::new(base_url)),
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        let old: Cloud =
            serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
        if old.base_url == base_url || old.base_url.is_empty() {
            return Ok(Cloud {
                base_url: base_url.to_string(),
                ..old
            });
        }
        // Base URLs are distinctive ("http://127.0.0.1:PORT/"), so a textual rewrite is exact.
        let moved = text.replace(&old.base_url, base_url);
        serde_json::from_str(&moved)
            .map_err(|e| format!("parsing rewritten {}: {e}", path.display()))
    }

    /// Writes atomically (temp file + rename) so a crash never leaves half a state file.
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        let path = Self::file(dir);
        let tmp = dir.join("state.json.tmp");
        let text = serde_json::to_vec_pretty(self).map_err(|e| format!("encoding state: {e}"))?;
        std::fs::write(&tmp, text).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("renaming to {}: {e}", path.display()))
    }

    /// Every IPv4 address some resource holds.
    pub fn ips_in_use(&self) -> BTreeSet<String> {
        let mut used = BTreeSet::new();
        for i in self.instances.values() {
            for nic in &i.network_interfaces {
                used.extend(nic.network_ip.clone());
                used.extend(nic.access_configs.iter().filter_map(|a| a.nat_ip.clone()));
            }
        }
        used.extend(self.addresses.values().map(|a| a.address.clone()));
        used.extend(self.forwarding_rules.values().map(|f| f.ip_address.clone()));
        used
    }

    /// The lowest free address of `range`, also avoiding `taken` (addresses chosen earlier in the same request).
    /// Allocation is derived from the state every time, so it can never disagree with what resources hold.
    /// Uses `net::IpPool`: `allocate_specific(&mut self, Ipv4Addr)` to mark what is held and
    /// `allocate(&mut self) -> Result<Ipv4Addr, NetError>` for the lowest free address.
    pub fn allocate_ip(&self, range: IpRange, taken: &BTreeSet<String>) -> Option<String> {
        let mut pool = range.pool()?;
        for ip in self.ips_in_use().iter().chain(taken) {
            if let Ok(ip) = ip.parse::<Ipv4Addr>() {
                // Addresses outside the pool's range are simply not its concern.
                let _ = pool.allocate_specific(ip);
            }
        }
        pool.allocate().ok().map(|ip| ip.to_string())
    }

    /// Relative paths of what uses subnetwork `rel`: instances with an interface in it and INTERNAL addresses
    /// reserved in it. Derived, so it follows out-of-band deletes.
    pub fn subnet_users(&self, rel: &str) -> Vec<String> {
        let is = |link: &str| links::rel_of(link) == Some(rel);
        let mut users: Vec<String> = self
            .instances
            .iter()
            .filter(|(_, i)| {
                i.network_interfaces
                    .iter()
                    .any(|n| n.subnetwork.as_deref().is_some_and(is))
            })
            .map(|(k, _)| k.clone())
            .collect();
        users.extend(
            self.addresses
                .iter()
                .filter(|(_, a)| a.subnetwork.as_deref().is_some_and(is))
                .map(|(k, _)| k.clone()),
        );
        users
    }

    /// Full selfLinks of what holds IP `ip` in `region`: instances (via access configs for external IPs, via
    /// `networkIP` for internal ones) and forwarding rules. Derived on demand, so an address's IN_USE/users
    /// always follow the truth.
    pub fn users_of_ip(&self, region: &str, ip: &str) -> Vec<String> {
        let mut users: Vec<String> = self
            .instances
            .values()
            .filter(|i| catalog::region_of(links::name_of(&i.zone)) == Some(region))
            .filter(|i| {
                i.network_interfaces.iter().any(|n| {
                    n.network_ip.as_deref() == Some(ip)
                        || n.access_configs
                            .iter()
                            .any(|a| a.nat_ip.as_deref() == Some(ip))
                })
            })
            .map(|i| i.self_link.clone())
            .collect();
        users.extend(
            self.forwarding_rules
                .values()
                .filter(|f| links::name_of(&f.region) == region && f.ip_address == ip)
                .map(|f| f.self_link.clone()),
        );
        users
    }

    /// Applies an operation's transition. Missing targets are fine: the resource may have been deleted out of
    /// band, which must not wedge the operation.
    pub fn apply(&mut self, t: &Transition) {
        match t {
            Transition::Nothing => {}
            Transition::InstanceStatus { key, status } => {
                if let Some(i) = self.instances.get_mut(key) {
                    // A STOPPING instance (being deleted or stopped) only moves on to TERMINATED or away: an
                    // insert or start finishing meanwhile must not bring it back to life.
                    if i.status == "STOPPING" && status != "TERMINATED" {
                        return;
                    }
                    if status == "RUNNING" && i.status != "RUNNING" {
                        i.last_start_timestamp = Some(ids::now_rfc3339());
                    }
                    if status == "TERMINATED" && i.status != "TERMINATED" {
                        i.last_stop_timestamp = Some(ids::now_rfc3339());
                    }
                    i.status = status.clone();
                }
            }
            Transition::AddressStatus { key, status } => {
                if let Some(a) = self.addresses.get_mut(key) {
                    a.status = status.clone();
                }
            }
            Transition::DiskStatus { key, status } => {
                if let Some(d) = self.disks.get_mut(key) {
                    d.status = status.clone();
                }
            }
            Transition::DiskSize { key, size_gb } => {
                if let Some(d) = self.disks.get_mut(key) {
                    d.size_gb = size_gb.clone();
                }
            }
            Transition::Remove { collection, key } => self.remove(*collection, key),
        }
    }

    /// What happens to a deleted instance's disks, as on GCE: `autoDelete` ones go with it, the others are
    /// detached and survive (their `users` is derived, so only the detach time is recorded).
    fn release_disks(&mut self, i: &Instance) {
        let now = ids::now_rfc3339();
        for d in &i.disks {
            let Some(rel) = d["source"].as_str().and_then(links::rel_of) else {
                continue;
            };
            if d["autoDelete"].as_bool().unwrap_or(false) {
                self.disks.remove(rel);
            } else if let Some(disk) = self.disks.get_mut(rel) {
                disk.last_detach_timestamp = Some(now.clone());
            }
        }
    }

    /// The instances a disk is attached to (full selfLinks) with the attachment's mode, derived from every
    /// instance's `disks[]`.
    pub fn disk_users(&self, disk_self_link: &str) -> Vec<(String, String)> {
        let rel = links::rel_of(disk_self_link);
        self.instances
            .values()
            .flat_map(|i| {
                i.disks
                    .iter()
                    .filter(|d| d["source"].as_str().and_then(links::rel_of) == rel)
                    .map(|d| {
                        let mode = d["mode"].as_str().unwrap_or("READ_WRITE").to_string();
                        (i.self_link.clone(), mode)
                    })
            })
            .collect()
    }

    pub fn remove(&mut self, collection: Collection, key: &str) {
        match collection {
            Collection::Instances => {
                if let Some(i) = self.instances.remove(key) {
                    self.release_disks(&i);
                }
                self.crashed_by_outage.remove(key);
            }
            Collection::Disks => drop(self.disks.remove(key)),
            Collection::Subnetworks => drop(self.subnetworks.remove(key)),
            Collection::Addresses => drop(self.addresses.remove(key)),
            Collection::Firewalls => drop(self.firewalls.remove(key)),
            Collection::HttpHealthChecks => drop(self.http_health_checks.remove(key)),
            Collection::TargetPools => drop(self.target_pools.remove(key)),
            Collection::ForwardingRules => drop(self.forwarding_rules.remove(key)),
        }
    }
}

/// Whether `rel` names the implicit `default` subnetwork of a catalog region (`projects/p/regions/r/subnetworks/default`),
/// which GCE's auto-mode `default` network has in every region.
pub fn is_implicit_subnet(rel: &str) -> bool {
    match links::segments(rel).as_slice() {
        ["projects", _, "regions", region, "subnetworks", "default"] => catalog::is_region(region),
        _ => false,
    }
}

/// Keys of map entries directly under `prefix` (`projects/p/zones/z/instances/`).
pub fn under<'a, T>(
    map: &'a BTreeMap<String, T>,
    prefix: &'a str,
) -> impl Iterator<Item = &'a T> + 'a {
    map.range(prefix.to_string()..)
        .take_while(move |(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_skips_used_addresses() {
        let mut c = Cloud::new("http://x/");
        let none = BTreeSet::new();
        assert_eq!(
            c.allocate_ip(IpRange::External, &none).as_deref(),
            Some("127.20.0.2")
        );
        c.addresses.insert(
            "a".into(),
            Address {
                address: "127.20.0.2".into(),
                ..Default::default()
            },
        );
        assert_eq!(
            c.allocate_ip(IpRange::External, &none).as_deref(),
            Some("127.20.0.3")
        );
        let taken = BTreeSet::from(["127.20.0.3".to_string()]);
        assert_eq!(
            c.allocate_ip(IpRange::External, &taken).as_deref(),
            Some("127.20.0.4")
        );
        let default = crate::net::IpPool::internal_cidr();
        assert_eq!(
            c.allocate_ip(IpRange::Internal(default), &none).as_deref(),
            Some("127.10.0.2")
        );
        assert!(
            IpRange::Internal(default).contains("127.10.3.4")
                && !IpRange::Internal(default).contains("10.0.0.1")
        );
        // A subnetwork's range: GCE keeps its first two and last two addresses.
        let small = Cidr::parse_network("127.11.0.8/29").unwrap();
        let range = IpRange::Internal(small);
        assert_eq!(c.allocate_ip(range, &none).as_deref(), Some("127.11.0.10"));
        assert!(range.contains("127.11.0.13") && !range.contains("127.11.0.14"));
        let full = BTreeSet::from(
            ["127.11.0.10", "127.11.0.11", "127.11.0.12", "127.11.0.13"].map(String::from),
        );
        assert_eq!(c.allocate_ip(range, &full), None);
    }

    #[test]
    fn state_survives_a_move_to_another_base_url() {
        let dir = std::env::temp_dir().join(format!("ha-sim-state-{}", ids::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Cloud::new("http://127.0.0.1:1111/");
        let link = "http://127.0.0.1:1111/compute/v1/projects/p/global/firewalls/f".to_string();
        c.firewalls.insert(
            "projects/p/global/firewalls/f".into(),
            Firewall {
                self_link: link,
                ..Default::default()
            },
        );
        c.save(&dir).unwrap();
        let back = Cloud::load(&dir, "http://127.0.0.1:2222/").unwrap();
        let f = &back.firewalls["projects/p/global/firewalls/f"];
        assert_eq!(
            f.self_link,
            "http://127.0.0.1:2222/compute/v1/projects/p/global/firewalls/f"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
