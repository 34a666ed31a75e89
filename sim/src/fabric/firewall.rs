//! GCE's VPC firewall for ingress, as a pure function of the stored cloud: which source may open a TCP connection to
//! which VM on which port. The data path (`net::firewall::Ingress`) asks; this answers.
//!
//! GCE's semantics, as the sim applies them:
//! - Only enabled INGRESS rules of the destination VM's network count (egress is allowed, as GCE's implied rule).
//! - A rule applies to a VM when it has no `targetTags` or shares one with the VM.
//! - A rule matches a source when `sourceRanges` contains its address, or (for traffic from a VM of the same
//!   network) `sourceTags` share a tag with that VM; a rule with both matches either.
//! - `allowed`/`denied` entries match TCP when `IPProtocol` is `tcp`, `6` or `all`, and the port is in `ports`
//!   (single ports or `N-M`; none listed = every port).
//! - Of the matching rules the lowest `priority` number wins; at equal priority a deny beats an allow. Nothing
//!   matching = GCE's implied "deny all ingress" (priority 65535).
//! - On a network named `default`, GCE's auto-mode default network, the sim adds `default-allow-internal` as an
//!   implied rule: priority 65534, every TCP port from the VPC's internal range. GCE's range is 10.128.0.0/9; the
//!   sim's internal addresses are `net::IpPool::internal()`'s /16, which stands for it. On GCE it is a real rule a
//!   user can delete; the sim has no networks resource to create it with, so it is always there.
//! - Not modelled: service accounts in rules (a rule naming them matches nothing), the other pre-populated rules of
//!   the default network (ssh, rdp, icmp: the sim carries none of that traffic), IPv6 ranges, UDP and ICMP.
//! - Traffic from a VM to its own addresses is never filtered (it does not leave the VM).

use crate::state::{Cloud, links};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

/// The Terraform host's address as the VMs see it, unless `ha-sim fault client-ip` says otherwise: the source address
/// every loopback connection really has, so the repository's `127.0.0.0/8` source ranges admit it.
pub const DEFAULT_CLIENT_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

/// The name, priority and range of the implied rule of the `default` network.
pub const DEFAULT_ALLOW_INTERNAL: &str = "default-allow-internal";
const DEFAULT_ALLOW_INTERNAL_PRIORITY: i64 = 65534;

pub use crate::net::Cidr;

/// The widest port range of a rule that a NAT listens on port by port ([`Policy::named_allow_ports`]).
pub const MAX_RANGE_CARRIED: usize = 64;

/// One ingress rule, reduced to what decides TCP traffic.
#[derive(Clone, Debug, PartialEq)]
struct Rule {
    name: String,
    /// Relative path of the network (`projects/p/global/networks/n`).
    network: String,
    priority: i64,
    allow: bool,
    /// TCP port ranges the rule covers; None = it covers no TCP at all (e.g. a UDP-only rule).
    tcp_ports: Option<Vec<(u16, u16)>>,
    source_ranges: Vec<Cidr>,
    source_tags: BTreeSet<String>,
    target_tags: BTreeSet<String>,
    /// A rule naming service accounts (not modelled) applies to nothing.
    names_service_accounts: bool,
}

impl Rule {
    fn covers_port(&self, port: u16) -> bool {
        self.tcp_ports
            .as_ref()
            .is_some_and(|r| r.iter().any(|(lo, hi)| (*lo..=*hi).contains(&port)))
    }
}

/// What the firewall needs to know of a VM: its network and tags.
#[derive(Clone, Debug, PartialEq)]
struct VmNet {
    network: String,
    tags: BTreeSet<String>,
}

/// Every rule and VM of the cloud that matters to ingress, and the client address.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    client: Ipv4Addr,
    /// By internal IP (each instance's first interface).
    vms: BTreeMap<Ipv4Addr, VmNet>,
    rules: Vec<Rule>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            client: DEFAULT_CLIENT_IP,
            vms: BTreeMap::new(),
            rules: Vec::new(),
        }
    }
}

/// Why a connection is admitted or not: the rule that decided, or GCE's implied deny.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub admitted: bool,
    /// The deciding rule's name; None = the implied deny (nothing matched), or an unknown destination.
    pub rule: Option<String>,
}

impl Policy {
    /// The address connections from the sim's host come from.
    pub fn client(&self) -> Ipv4Addr {
        self.client
    }

    /// Whether `from` (an address, and the VM it belongs to if any) may reach `to` (a VM's internal IP) on TCP `port`.
    pub fn verdict(&self, from: Ipv4Addr, to: Ipv4Addr, port: u16) -> Verdict {
        let deny = |rule: Option<String>| Verdict {
            admitted: false,
            rule,
        };
        // A destination that is no VM (an instance deleted while a proxy still runs) has nothing to deliver to.
        let Some(dst) = self.vms.get(&to) else {
            return deny(None);
        };
        if from == to {
            return Verdict {
                admitted: true,
                rule: None,
            };
        }
        // Source tags only name VMs of the destination's network.
        let src_tags = self
            .vms
            .get(&from)
            .filter(|v| v.network == dst.network)
            .map(|v| &v.tags);
        let applies = |r: &&Rule| {
            r.network == dst.network
                && !r.names_service_accounts
                && (r.target_tags.is_empty() || !r.target_tags.is_disjoint(&dst.tags))
                && r.covers_port(port)
                && (r.source_ranges.iter().any(|c| c.contains(from))
                    || src_tags.is_some_and(|t| !r.source_tags.is_disjoint(t)))
        };
        // Lowest priority number first; at equal priority a deny first.
        let winner = self
            .rules
            .iter()
            .filter(applies)
            .min_by_key(|r| (r.priority, r.allow));
        match winner {
            Some(r) => Verdict {
                admitted: r.allow,
                rule: Some(r.name.clone()),
            },
            None => deny(None),
        }
    }

    /// Every TCP port an enabled allow rule names, in ranges of at most [`MAX_RANGE_CARRIED`] ports. Real 1:1 NAT
    /// carries every port; a userspace NAT needs a listener per port, so it listens on the ports a rule can admit
    /// (a port no allow rule names is dropped by the implied deny anyway). Rules that name no port (all ports)
    /// and wide ranges add nothing: the fixed ports (`SimConfig::nat_ports`) cover what a master serves.
    pub fn named_allow_ports(&self) -> BTreeSet<u16> {
        self.rules
            .iter()
            .filter(|r| r.allow && !r.names_service_accounts)
            .flat_map(|r| r.tcp_ports.iter().flatten())
            .filter(|(lo, hi)| lo <= hi && usize::from(hi - lo) < MAX_RANGE_CARRIED)
            .flat_map(|&(lo, hi)| lo..=hi)
            .collect()
    }

    /// [`Policy::verdict`] for a connection from the sim's host.
    pub fn verdict_for_client(&self, to: Ipv4Addr, port: u16) -> Verdict {
        self.verdict(self.client, to, port)
    }
}

/// The policy of `cloud`: its enabled ingress rules, the implied `default-allow-internal` of every `default`
/// network a VM is on, every instance's network and tags, and the client address.
pub fn policy(cloud: &Cloud) -> Policy {
    let mut vms = BTreeMap::new();
    for i in cloud.instances.values() {
        let Some(nic0) = i.network_interfaces.first() else {
            continue;
        };
        let Some(ip) = nic0.network_ip.as_deref().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let vm = VmNet {
            network: network_key(&nic0.network),
            tags: i.tags.items.iter().cloned().collect(),
        };
        vms.insert(ip, vm);
    }
    let mut rules: Vec<Rule> = cloud
        .firewalls
        .values()
        .filter(|f| !f.disabled && f.direction != "EGRESS")
        .map(|f| {
            let list = |k: &str| strings(f.extra.get(k));
            // The API refuses a rule with both lists, so a non-empty `denied` makes a deny rule.
            let entries = |k: &str| {
                f.extra
                    .get(k)
                    .and_then(Value::as_array)
                    .filter(|a| !a.is_empty())
            };
            let denied = entries("denied");
            Rule {
                name: f.name.clone(),
                network: network_key(&f.network),
                priority: f.priority,
                allow: denied.is_none(),
                tcp_ports: tcp_ports(
                    denied
                        .or(entries("allowed"))
                        .map(Vec::as_slice)
                        .unwrap_or_default(),
                ),
                source_ranges: list("sourceRanges")
                    .iter()
                    .filter_map(|s| Cidr::parse(s))
                    .collect(),
                source_tags: list("sourceTags").into_iter().collect(),
                target_tags: list("targetTags").into_iter().collect(),
                names_service_accounts: !list("sourceServiceAccounts").is_empty()
                    || !list("targetServiceAccounts").is_empty(),
            }
        })
        .collect();
    let default_networks: BTreeSet<&String> = vms
        .values()
        .map(|v| &v.network)
        .filter(|n| links::name_of(n) == "default")
        .collect();
    let internal = crate::net::IpPool::internal_cidr();
    for network in default_networks {
        rules.push(Rule {
            name: DEFAULT_ALLOW_INTERNAL.to_string(),
            network: network.clone(),
            priority: DEFAULT_ALLOW_INTERNAL_PRIORITY,
            allow: true,
            tcp_ports: Some(vec![(0, u16::MAX)]),
            source_ranges: vec![internal],
            source_tags: BTreeSet::new(),
            target_tags: BTreeSet::new(),
            names_service_accounts: false,
        });
    }
    Policy {
        client: cloud.client_ip.unwrap_or(DEFAULT_CLIENT_IP),
        vms,
        rules,
    }
}

/// A network link in any accepted form → its relative path, so rules and NICs compare equal.
fn network_key(link: &str) -> String {
    let network = if link.is_empty() {
        "global/networks/default"
    } else {
        link
    };
    links::rel_of(network).unwrap_or(network).to_string()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The TCP ports of a rule's `allowed` or `denied` entries; None when no entry covers TCP.
fn tcp_ports(entries: &[Value]) -> Option<Vec<(u16, u16)>> {
    let mut out: Option<Vec<(u16, u16)>> = None;
    for e in entries {
        let proto = e["IPProtocol"].as_str().unwrap_or_default();
        if !matches!(proto.to_ascii_lowercase().as_str(), "tcp" | "6" | "all") {
            continue;
        }
        let ports = strings(e.get("ports"));
        let ranges = out.get_or_insert_with(Vec::new);
        if ports.is_empty() {
            ranges.push((0, u16::MAX));
        }
        ranges.extend(ports.iter().filter_map(|p| port_range(p)));
    }
    out
}

fn port_range(p: &str) -> Option<(u16, u16)> {
    match p.split_once('-') {
        Some((lo, hi)) => Some((lo.trim().parse().ok()?, hi.trim().parse().ok()?)),
        None => {
            let n = p.trim().parse().ok()?;
            Some((n, n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::resources::{Firewall, Instance, NetworkInterface, Tags};
    use serde_json::json;

    const NET: &str = "https://sim/compute/v1/projects/p/global/networks/prod";
    const DEFAULT: &str = "https://sim/compute/v1/projects/p/global/networks/default";

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn vm(cloud: &mut Cloud, name: &str, at: &str, network: &str, tags: &[&str]) {
        cloud.instances.insert(
            format!("projects/p/zones/z/instances/{name}"),
            Instance {
                name: name.into(),
                network_interfaces: vec![NetworkInterface {
                    network: network.into(),
                    network_ip: Some(at.into()),
                    ..Default::default()
                }],
                tags: Tags {
                    items: tags.iter().map(|t| t.to_string()).collect(),
                    fingerprint: String::new(),
                },
                ..Default::default()
            },
        );
    }

    fn rule(cloud: &mut Cloud, name: &str, network: &str, priority: i64, body: Value) {
        let Value::Object(extra) = body else {
            panic!("rule body must be an object")
        };
        cloud.firewalls.insert(
            format!("projects/p/global/firewalls/{name}"),
            Firewall {
                name: name.into(),
                network: network.into(),
                priority,
                direction: "INGRESS".into(),
                extra,
                ..Default::default()
            },
        );
    }

    /// Two masters and a node on `prod`, the provider's four rules, a master on `default` with no rule at all.
    fn cloud() -> Cloud {
        let mut c = Cloud::new("https://sim/");
        vm(&mut c, "m1", "127.10.0.2", NET, &["c-master"]);
        vm(&mut c, "m2", "127.10.0.3", NET, &["c-master"]);
        vm(&mut c, "node", "127.10.0.4", NET, &["c-node"]);
        vm(&mut c, "d1", "127.10.0.5", DEFAULT, &["c-master"]);
        vm(&mut c, "d2", "127.10.0.6", "global/networks/default", &[]);
        let master = json!(["c-master"]);
        rule(
            &mut c,
            "c-etcd-peer",
            NET,
            1000,
            json!({"allowed": [{"IPProtocol": "tcp", "ports": ["2380"]}], "sourceTags": master, "targetTags": master}),
        );
        rule(
            &mut c,
            "c-https",
            NET,
            1000,
            json!({"allowed": [{"IPProtocol": "tcp", "ports": ["443"]}], "sourceRanges": ["0.0.0.0/0"], "targetTags": master}),
        );
        rule(
            &mut c,
            "c-etcd-client",
            NET,
            1000,
            json!({"allowed": [{"IPProtocol": "tcp", "ports": ["2379"]}], "sourceRanges": ["127.0.0.0/8"], "targetTags": master}),
        );
        rule(
            &mut c,
            "c-healthz",
            NET,
            1000,
            json!({"allowed": [{"IPProtocol": "tcp", "ports": ["3990"]}], "sourceRanges": ["35.191.0.0/16", "209.85.152.0/22", "209.85.204.0/22"], "targetTags": master}),
        );
        c
    }

    #[test]
    fn nats_carry_every_port_an_allow_rule_names() {
        let mut c = cloud();
        // An API port the fixed NAT ports do not include, a narrow range, a wide range, a deny and an all-ports rule.
        let api = json!({"allowed": [{"IPProtocol": "tcp", "ports": ["6443", "8000-8002"]}], "sourceRanges": ["0.0.0.0/0"]});
        rule(&mut c, "api-6443", NET, 1000, api);
        let wide = json!({"allowed": [{"IPProtocol": "tcp", "ports": ["10000-20000"]}], "sourceRanges": ["0.0.0.0/0"]});
        rule(&mut c, "wide", NET, 1000, wide);
        let deny = json!({"denied": [{"IPProtocol": "tcp", "ports": ["7000"]}], "sourceRanges": ["0.0.0.0/0"]});
        rule(&mut c, "deny", NET, 1000, deny);
        rule(
            &mut c,
            "all",
            NET,
            1000,
            json!({"allowed": [{"IPProtocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]}),
        );
        let ports = policy(&c).named_allow_ports();
        let expected: BTreeSet<u16> = [443, 2379, 2380, 3990, 6443, 8000, 8001, 8002].into();
        assert_eq!(ports, expected);
    }

    #[test]
    fn the_providers_rules_on_a_custom_network() {
        let mut c = cloud();
        let outside = "198.51.100.7";
        // (from, to, port, admitted, deciding rule)
        let table: &[(&str, &str, u16, bool, Option<&str>)] = &[
            ("127.0.0.1", "127.10.0.2", 2379, true, Some("c-etcd-client")),
            ("127.0.0.1", "127.10.0.2", 443, true, Some("c-https")),
            (outside, "127.10.0.2", 443, true, Some("c-https")),
            (outside, "127.10.0.2", 2379, false, None),
            // The peer port is for masters only: not the host, not a node of the same network.
            ("127.0.0.1", "127.10.0.2", 2380, false, None),
            ("127.10.0.3", "127.10.0.2", 2380, true, Some("c-etcd-peer")),
            ("127.10.0.4", "127.10.0.2", 2380, false, None),
            // A master on another network carries the tag, but source tags name only VMs of the rule's network.
            ("127.10.0.5", "127.10.0.2", 2380, false, None),
            // Health checkers reach the sidecar, nobody else does.
            ("35.191.3.4", "127.10.0.2", 3990, true, Some("c-healthz")),
            ("209.85.155.1", "127.10.0.2", 3990, true, Some("c-healthz")),
            ("127.0.0.1", "127.10.0.2", 3990, false, None),
            // Target tags: the node is no master, so no rule applies to it.
            ("127.0.0.1", "127.10.0.4", 443, false, None),
            // Traffic to itself is not filtered; an address that is no VM receives nothing.
            ("127.10.0.2", "127.10.0.2", 2380, true, None),
            ("127.0.0.1", "127.10.9.9", 443, false, None),
        ];
        for (from, to, port, admitted, rule) in table {
            let v = policy(&c).verdict(ip(from), ip(to), *port);
            assert_eq!(
                (v.admitted, v.rule.as_deref()),
                (*admitted, *rule),
                "{from} -> {to}:{port}"
            );
        }

        // The client address is the sim's setting.
        c.client_ip = Some(ip(outside));
        let p = policy(&c);
        assert_eq!(p.client(), ip(outside));
        assert!(!p.verdict_for_client(ip("127.10.0.2"), 2379).admitted);
        assert!(p.verdict_for_client(ip("127.10.0.2"), 443).admitted);
    }

    #[test]
    fn the_default_network_admits_everything_internal_so_the_peer_rule_restricts_nothing() {
        let c = cloud();
        let p = policy(&c);
        // d2 has no master tag and no rule names the default network; default-allow-internal admits it anyway.
        let v = p.verdict(ip("127.10.0.6"), ip("127.10.0.5"), 2380);
        assert_eq!(
            (v.admitted, v.rule.as_deref()),
            (true, Some(DEFAULT_ALLOW_INTERNAL))
        );
        assert!(p.verdict(ip("127.10.0.6"), ip("127.10.0.5"), 2379).admitted);
        // It admits the VPC's range only: the host is outside it, and `prod` has no such rule.
        assert!(!p.verdict(ip("127.0.0.1"), ip("127.10.0.5"), 2379).admitted);
        assert!(p.verdict(ip("127.10.0.6"), ip("127.10.0.5"), 8080).admitted);
        assert!(!p.verdict(ip("127.10.0.4"), ip("127.10.0.3"), 8080).admitted);
    }

    /// A subnetwork added to the default network lies outside `default-allow-internal`'s range, as on GCE (an
    /// auto-mode network's own subnets take 10.128.0.0/9; one added by hand lies outside it): a master moved there
    /// reaches its peers only through a rule that names it, by tag or by range.
    #[test]
    fn a_subnetwork_added_to_the_default_network_is_outside_default_allow_internal() {
        let mut c = cloud();
        vm(&mut c, "b1", "127.11.0.2", DEFAULT, &["c-master"]);
        let v = policy(&c).verdict(ip("127.11.0.2"), ip("127.10.0.5"), 2380);
        assert_eq!((v.admitted, v.rule.as_deref()), (false, None));
        // The other way the sender is in the rule's range.
        assert!(
            policy(&c)
                .verdict(ip("127.10.0.6"), ip("127.11.0.2"), 2380)
                .admitted
        );
        let master = json!(["c-master"]);
        rule(
            &mut c,
            "d-etcd-peer",
            DEFAULT,
            1000,
            json!({"allowed": [{"IPProtocol": "tcp", "ports": ["2380"]}], "sourceTags": master, "targetTags": master}),
        );
        let v = policy(&c).verdict(ip("127.11.0.2"), ip("127.10.0.5"), 2380);
        assert_eq!((v.admitted, v.rule.as_deref()), (true, Some("d-etcd-peer")));
    }

    #[test]
    fn priority_then_deny_decides_and_disabled_egress_and_other_protocols_do_not_count() {
        let mut c = cloud();
        let ssh_only = json!({"allowed": [{"IPProtocol": "udp"}, {"IPProtocol": "tcp", "ports": ["22", "8000-8100"]}], "sourceRanges": ["0.0.0.0/0"]});
        rule(&mut c, "ports", NET, 500, ssh_only);
        let p = policy(&c);
        assert!(p.verdict(ip("1.2.3.4"), ip("127.10.0.4"), 8050).admitted);
        assert!(p.verdict(ip("1.2.3.4"), ip("127.10.0.4"), 22).admitted);
        assert!(!p.verdict(ip("1.2.3.4"), ip("127.10.0.4"), 8101).admitted);

        // A deny at a lower number beats the allow; at the same number too; at a higher number it loses.
        let deny = |to: &str| json!({"denied": [{"IPProtocol": "all"}], "sourceRanges": [to]});
        for (priority, admitted) in [(999, false), (1000, false), (1001, true)] {
            let mut c = cloud();
            rule(&mut c, "deny", NET, priority, deny("127.0.0.0/24"));
            let v = policy(&c).verdict(ip("127.0.0.1"), ip("127.10.0.2"), 2379);
            assert_eq!(v.admitted, admitted, "deny at {priority}: {v:?}");
        }

        // Disabled rules, egress rules and rules naming service accounts admit nothing.
        for name in ["disabled", "egress", "sa"] {
            let mut c = cloud();
            let mut body =
                json!({"allowed": [{"IPProtocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]});
            if name == "sa" {
                body["targetServiceAccounts"] = json!(["x@p.iam.gserviceaccount.com"]);
            }
            rule(&mut c, name, NET, 1, body);
            let f = c
                .firewalls
                .get_mut(&format!("projects/p/global/firewalls/{name}"))
                .unwrap();
            f.disabled = name == "disabled";
            if name == "egress" {
                f.direction = "EGRESS".into();
            }
            let v = policy(&c).verdict(ip("1.2.3.4"), ip("127.10.0.4"), 9999);
            assert!(!v.admitted, "{name}: {v:?}");
        }
    }
}
