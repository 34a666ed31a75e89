//! The cluster's foundation: the objects it owns whether or not it has replicas (its static regional address, four
//! firewall rules, the secret that holds its CA keys) and what its delete sweeps. The rules are derived here from
//! the cluster's settings; which steps a create, an update or a delete takes is decided here from what was
//! observed, and `ops::execute::foundation` carries them out.
//!
//! The rules let etcd peers talk only between masters (by tag), the API port in from the allowed ranges, etcd's
//! client port in only from the admin ranges, and GCE's health checkers in to the plain-HTTP health port.

use std::collections::BTreeMap;

use crate::firewall_rule::FirewallRule;
use crate::names::DerivedNames;
use crate::step::FoundationStep;

/// The firewall port of etcd's client API.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// etcd's peer port, between masters only.
pub const ETCD_PEER_PORT: u16 = 2380;
/// The plain-HTTP health endpoint that reflects the API server (legacy HTTP health checks cannot speak HTTPS).
pub const HEALTH_PORT: u16 = 3990;
/// Where legacy HTTP health checks come from (GCE's documented prober ranges).
pub const HEALTH_CHECK_RANGES: [&str; 3] = ["35.191.0.0/16", "209.85.152.0/22", "209.85.204.0/22"];

/// What the cluster's firewall rules are made from.
pub struct ClusterNetwork<'a> {
    pub name: &'a str,
    pub region: &'a str,
    pub network: &'a str,
    pub api_port: u16,
    pub api_source_ranges: &'a [String],
    pub etcd_client_source_ranges: &'a [String],
}

/// The cluster's four firewall rules, derived from its settings.
pub fn firewall_rules(n: &ClusterNetwork<'_>) -> Vec<FirewallRule> {
    let names = DerivedNames::for_cluster(n.name);
    let rule = |name: &str, port: String, ranges: Vec<String>, tags: Vec<String>, why: &str| {
        FirewallRule {
            name: name.to_string(),
            network: n.network.to_string(),
            tcp_ports: vec![port],
            source_ranges: ranges,
            source_tags: tags,
            target_tags: vec![names.master_tag.clone()],
            description: format!("{why} ({})", n.name),
        }
    };
    vec![
        rule(
            &names.firewall_etcd_peer,
            ETCD_PEER_PORT.to_string(),
            vec![],
            vec![names.master_tag.clone()],
            "etcd peers, master to master",
        ),
        rule(
            &names.firewall_api,
            n.api_port.to_string(),
            n.api_source_ranges.to_vec(),
            vec![],
            "Kubernetes API",
        ),
        rule(
            &names.firewall_etcd_client,
            ETCD_CLIENT_PORT.to_string(),
            n.etcd_client_source_ranges.to_vec(),
            vec![],
            "etcd clients (mutual TLS) from admin ranges",
        ),
        rule(
            &names.firewall_health,
            HEALTH_PORT.to_string(),
            HEALTH_CHECK_RANGES.iter().map(|s| s.to_string()).collect(),
            vec![],
            "load balancer health checks",
        ),
    ]
}

/// The cluster's firewall rules as found, by name; a rule that does not exist is absent.
pub type FoundRules = BTreeMap<String, FirewallRule>;

/// A create: the static address (reserved, or found when a killed create is resumed), then each rule created, or
/// brought in line when an earlier attempt made it, then the keys' secret, before anything refers to it. A create
/// that fails after the secret leaves it as it leaves the address: the next create writes it again, with that
/// create's keys.
pub fn create_steps(want: &[FirewallRule], found: &FoundRules) -> Vec<FoundationStep> {
    let mut steps = vec![FoundationStep::ReserveStaticAddress];
    steps.extend(firewall_repairs(want, found));
    steps.push(FoundationStep::WriteKeysSecret);
    steps
}

/// An update: the keys' secret first when it does not hold the cluster's keys (replicas planned with the new spec
/// read them from it), then the rules brought in line.
pub fn update_steps(
    want: &[FirewallRule],
    found: &FoundRules,
    keys_stale: bool,
) -> Vec<FoundationStep> {
    let mut steps = Vec::new();
    if keys_stale {
        steps.push(FoundationStep::WriteKeysSecret);
    }
    steps.extend(firewall_repairs(want, found));
    steps
}

/// What an update or a create does to the firewall rules: creates each one missing and patches each one that
/// differs; nothing for a rule that already admits what it should.
pub fn firewall_repairs(want: &[FirewallRule], found: &FoundRules) -> Vec<FoundationStep> {
    want.iter()
        .filter_map(|rule| match found.get(&rule.name) {
            None => Some(FoundationStep::CreateFirewall { rule: rule.clone() }),
            Some(have) => rule
                .difference(have)
                .map(|_| FoundationStep::PatchFirewall { rule: rule.clone() }),
        })
        .collect()
}

/// What is wrong with the rules, one sentence each, for the cluster's `drift` (the plan shows it, the update
/// repairs it with `firewall_repairs`).
pub fn firewall_drift(want: &[FirewallRule], found: &FoundRules) -> Vec<String> {
    firewall_drift_saying(want, found, "puts it back")
}

/// [`firewall_drift`], with what the apply does to a rule that differs (`puts it back`, `widens it`).
pub fn firewall_drift_saying(
    want: &[FirewallRule],
    found: &FoundRules,
    repair: &str,
) -> Vec<String> {
    want.iter()
        .filter_map(|rule| match found.get(&rule.name) {
            None => Some(format!(
                "Firewall rule {} is missing; the apply creates it again.",
                rule.name
            )),
            Some(have) => rule
                .difference(have)
                .map(|d| format!("Firewall rule {} has {d}; the apply {repair}.", rule.name)),
        })
        .collect()
}

/// What a delete found left over, besides the cluster's own objects: what joins that died before their VM existed
/// left (their reserved internal addresses, their keys' secrets).
pub struct Leftovers {
    pub internal_addresses: Vec<String>,
    pub secrets: Vec<String>,
}

/// A delete, once no replica is left: the leftovers of dead joins and of an interrupted shrink, the firewall rules,
/// the keys' secret, and the static address last. Every step treats "not found" as done.
///
/// The keys' secret goes before the address, which is the cluster's identity: once the address is gone the next
/// refresh finds no cluster, so nothing after it would ever be retried. A delete that fails between the two leaves
/// the cluster in state with its keys in `private_keys`, and its refresh reports the secret missing.
pub fn delete_steps(cluster: &str, want: &[FirewallRule], left: &Leftovers) -> Vec<FoundationStep> {
    let keys = crate::names::cluster_keys_secret(cluster);
    let mut steps: Vec<FoundationStep> = left
        .internal_addresses
        .iter()
        .map(|name| FoundationStep::ReleaseAddress { name: name.clone() })
        .collect();
    steps.extend(
        left.secrets
            .iter()
            .filter(|id| **id != keys)
            .map(|id| FoundationStep::DeleteSecret { id: id.clone() }),
    );
    steps.extend([
        FoundationStep::DeleteForwardingRule,
        FoundationStep::DeletePool,
        FoundationStep::DeleteHealthCheck,
    ]);
    steps.extend(want.iter().map(|r| FoundationStep::DeleteFirewall {
        name: r.name.clone(),
    }));
    steps.push(FoundationStep::DeleteKeysSecret);
    steps.push(FoundationStep::ReleaseStaticAddress);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network<'a>(api: &'a [String], etcd: &'a [String]) -> ClusterNetwork<'a> {
        ClusterNetwork {
            name: "prod",
            region: "europe-west1",
            network: "default",
            api_port: 443,
            api_source_ranges: api,
            etcd_client_source_ranges: etcd,
        }
    }

    fn found(rules: &[FirewallRule]) -> FoundRules {
        rules.iter().map(|r| (r.name.clone(), r.clone())).collect()
    }

    #[test]
    fn the_rules_admit_peers_by_tag_the_api_and_etcd_from_their_ranges_and_the_health_checkers() {
        let api = vec!["0.0.0.0/0".to_string()];
        let etcd = vec!["10.0.0.0/8".to_string()];
        let rules = firewall_rules(&network(&api, &etcd));
        let by_name: BTreeMap<&str, &FirewallRule> =
            rules.iter().map(|r| (r.name.as_str(), r)).collect();
        assert_eq!(
            by_name.keys().copied().collect::<Vec<_>>(),
            [
                "prod-etcd",
                "prod-etcd-client",
                "prod-healthz",
                "prod-https"
            ]
        );
        let peer = by_name["prod-etcd"];
        assert_eq!(peer.tcp_ports, ["2380"]);
        assert!(peer.source_ranges.is_empty());
        assert_eq!(peer.source_tags, ["prod-master"]);
        assert_eq!(by_name["prod-https"].source_ranges, api);
        assert_eq!(by_name["prod-etcd-client"].source_ranges, etcd);
        assert_eq!(by_name["prod-etcd-client"].tcp_ports, ["2379"]);
        assert_eq!(by_name["prod-healthz"].tcp_ports, ["3990"]);
        assert!(rules.iter().all(|r| r.target_tags == ["prod-master"]));
    }

    #[test]
    fn rules_are_created_when_missing_patched_when_they_differ_and_left_alone_otherwise() {
        let api = vec!["0.0.0.0/0".to_string()];
        let etcd = vec!["10.0.0.0/8".to_string(), "192.168.0.0/16".to_string()];
        let want = firewall_rules(&network(&api, &etcd));
        // Everything as wanted, lists in another order and descriptions reworded: nothing to do.
        let mut same = want.clone();
        for r in &mut same {
            r.source_ranges.reverse();
            r.description = "made by hand".into();
            r.network =
                "https://www.googleapis.com/compute/v1/projects/p/global/networks/default".into();
        }
        assert!(firewall_repairs(&want, &found(&same)).is_empty());
        assert!(firewall_drift(&want, &found(&same)).is_empty());

        // One rule gone, one widened by hand.
        let mut changed: Vec<FirewallRule> = want
            .iter()
            .filter(|r| r.name != "prod-etcd")
            .cloned()
            .collect();
        let client = changed
            .iter_mut()
            .find(|r| r.name == "prod-etcd-client")
            .unwrap();
        client.source_ranges = vec!["0.0.0.0/0".into()];
        let steps = firewall_repairs(&want, &found(&changed));
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert!(
            matches!(&steps[0], FoundationStep::CreateFirewall { rule } if rule.name == "prod-etcd")
        );
        assert!(
            matches!(&steps[1], FoundationStep::PatchFirewall { rule } if rule.name == "prod-etcd-client")
        );
        assert_eq!(
            firewall_drift(&want, &found(&changed)),
            [
                "Firewall rule prod-etcd is missing; the apply creates it again.",
                "Firewall rule prod-etcd-client has source ranges 0.0.0.0/0, not 10.0.0.0/8, 192.168.0.0/16; the apply puts it back.",
            ]
        );
    }

    #[test]
    fn a_port_change_is_a_patch_and_a_create_reserves_the_address_first() {
        let api = vec!["0.0.0.0/0".to_string()];
        let want = firewall_rules(&network(&api, &[]));
        let mut old = want.clone();
        old.iter_mut()
            .find(|r| r.name == "prod-https")
            .unwrap()
            .tcp_ports = vec!["6443".into()];
        let steps = create_steps(&want, &found(&old));
        assert_eq!(steps[0], FoundationStep::ReserveStaticAddress);
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert_eq!(steps[2], FoundationStep::WriteKeysSecret);
        assert_eq!(
            firewall_drift(&want, &found(&old)),
            ["Firewall rule prod-https has ports 6443, not 443; the apply puts it back."]
        );
        // A new cluster: the address, then every rule, then the keys.
        assert_eq!(create_steps(&want, &FoundRules::new()).len(), 6);
        // An update writes the keys first, only when their secret does not hold them.
        assert_eq!(
            update_steps(&want, &found(&old), true),
            [
                FoundationStep::WriteKeysSecret,
                FoundationStep::PatchFirewall {
                    rule: want
                        .iter()
                        .find(|r| r.name == "prod-https")
                        .unwrap()
                        .clone()
                }
            ]
        );
        assert_eq!(update_steps(&want, &found(&want), false), []);
    }

    #[test]
    fn a_delete_sweeps_leftovers_first_and_ends_with_the_keys_then_the_address() {
        let want = firewall_rules(&network(&[], &[]));
        let steps = delete_steps(
            "prod",
            &want,
            &Leftovers {
                internal_addresses: vec!["prod-x-int".into()],
                secrets: vec!["prod-x-keys".into(), "prod-cluster-keys".into()],
            },
        );
        assert_eq!(
            steps[0],
            FoundationStep::ReleaseAddress {
                name: "prod-x-int".into()
            }
        );
        assert_eq!(
            steps[1],
            FoundationStep::DeleteSecret {
                id: "prod-x-keys".into()
            }
        );
        // The cluster's own keys are not a leftover: they go once, just before the address.
        assert!(!steps.contains(&FoundationStep::DeleteSecret {
            id: "prod-cluster-keys".into()
        }));
        let n = steps.len();
        assert_eq!(steps[n - 2], FoundationStep::DeleteKeysSecret);
        assert_eq!(steps[n - 1], FoundationStep::ReleaseStaticAddress);
        assert_eq!(
            steps
                .iter()
                .filter(|s| matches!(s, FoundationStep::DeleteFirewall { .. }))
                .count(),
            4
        );
    }
}
