//! The hand-over of an imported cluster's firewall rules to the cluster's own network tag.
//!
//! kube-up tags its masters `<name>` (its `MASTER_TAG`, `${INSTANCE_PREFIX}-master`, which is also the
//! `MASTER_NAME` the cluster is imported under), and its rules target that tag; this provider tags masters
//! `<name>-master`. An imported kube-up master carries the old tag until it rolls: a rebuilt VM carries the
//! cluster's. Rules retargeted at once would cut such masters off from the API's clients, from their etcd peers
//! and from the provider's etcd client. So while a master of the cluster lacks its tag, the rules also admit what
//! the rules found admitted it by: the old tags, and the ports of each found rule that reaches it (kube-up's peer
//! rule also opens 2381, its events etcd's peer port). Once every master carries the cluster's tag (given by
//! hand, since an imported cluster without its CA keys cannot rebuild a master; or by a roll), the next refresh
//! reports the extra tags and ports as drift and the apply narrows the rules to the cluster's own.
//!
//! Only tags the found rules *target* on such a master are kept: a master's other tags (`http-server`, a user's)
//! may be carried by VMs that are no masters.

use std::collections::{BTreeMap, BTreeSet};

use crate::firewall_rule::FirewallRule;
use crate::foundation::{FoundRules, firewall_drift, firewall_drift_saying};

/// A master VM of the cluster: where it runs and the network tags it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Master {
    pub zone: String,
    pub tags: BTreeSet<String>,
}

/// Each master VM of the cluster, by name.
pub type MasterTags = BTreeMap<String, Master>;

/// What the rules keep while some masters lack the cluster's tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    /// The masters without the cluster's tag, by name, with their zones.
    pub masters: Vec<(String, String)>,
    /// The tags the found rules reach them by.
    pub tags: BTreeSet<String>,
}

/// Whether any found rule names a tag the wanted rules do not. Only then can the masters' tags change what the
/// rules should be, so only then does the caller list the masters (a refresh of a cluster this provider made
/// never does).
pub fn found_foreign_tags(want: &[FirewallRule], found: &FoundRules) -> bool {
    let ours: BTreeSet<&String> = want
        .iter()
        .flat_map(|r| r.target_tags.iter().chain(&r.source_tags))
        .collect();
    found
        .values()
        .flat_map(|r| r.target_tags.iter().chain(&r.source_tags))
        .any(|t| !ours.contains(t))
}

/// The rules to bring the found ones to, and what they keep for masters without the cluster's `tag` (`None` when
/// every master carries it, or no found rule reaches those without it: then the rules are `want` unchanged).
pub fn rules_during_handover(
    want: Vec<FirewallRule>,
    found: &FoundRules,
    masters: &MasterTags,
    tag: &str,
) -> (Vec<FirewallRule>, Option<Handover>) {
    let untagged: Vec<(&String, &Master)> = masters
        .iter()
        .filter(|(_, m)| !m.tags.contains(tag))
        .collect();
    let their_tags: BTreeSet<&String> = untagged.iter().flat_map(|(_, m)| &m.tags).collect();
    let kept: BTreeSet<String> = want
        .iter()
        .filter_map(|r| found.get(&r.name))
        .flat_map(|f| &f.target_tags)
        .filter(|t| their_tags.contains(t))
        .cloned()
        .collect();
    if kept.is_empty() {
        return (want, None);
    }
    let rules = want
        .into_iter()
        .map(|mut rule| {
            widen(&mut rule.target_tags, &kept);
            if !rule.source_tags.is_empty() {
                widen(&mut rule.source_tags, &kept);
            }
            if let Some(f) = found.get(&rule.name)
                && f.target_tags.iter().any(|t| kept.contains(t))
            {
                widen(&mut rule.tcp_ports, &f.tcp_ports);
            }
            rule
        })
        .collect();
    let handover = Handover {
        masters: untagged
            .iter()
            .map(|(name, m)| ((*name).clone(), m.zone.clone()))
            .collect(),
        tags: kept,
    };
    (rules, Some(handover))
}

/// Appends to `list` what `more` holds that it lacks, in `more`'s order.
fn widen<'a>(list: &mut Vec<String>, more: impl IntoIterator<Item = &'a String>) {
    for item in more {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
}

/// The rules' `drift` sentences (`rules` from [`rules_during_handover`]): while a hand-over lasts, a rule that
/// differs is widened rather than put back, and a last sentence says why. Only with a repair to make, so rules
/// already widened plan nothing.
pub fn drift(
    rules: &[FirewallRule],
    found: &FoundRules,
    handover: Option<&Handover>,
    tag: &str,
) -> Vec<String> {
    let Some(h) = handover else {
        return firewall_drift(rules, found);
    };
    let mut sentences = firewall_drift_saying(rules, found, "widens it");
    if !sentences.is_empty() {
        sentences.push(h.sentence(tag));
    }
    sentences
}

impl Handover {
    /// The `drift` sentence that explains why the rules the apply patches keep more than the cluster's own, with
    /// the command that tags each master.
    pub fn sentence(&self, tag: &str) -> String {
        let names: Vec<&str> = self.masters.iter().map(|(n, _)| n.as_str()).collect();
        let tags: Vec<&str> = self.tags.iter().map(String::as_str).collect();
        let commands: Vec<String> = self
            .masters
            .iter()
            .map(|(name, zone)| {
                format!("`gcloud compute instances add-tags {name} --zone={zone} --tags={tag}`")
            })
            .collect();
        format!(
            "Masters {} do not carry the network tag {tag} yet (an imported kube-up master carries {}), so the \
             firewall rules keep admitting them by that tag and the ports they were found with. Once every \
             master carries {tag} ({}; or a roll of a cluster that holds its CA keys), the next plan narrows the \
             rules to it.",
            names.join(", "),
            tags.join(", "),
            commands.join(", "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::foundation::{ClusterNetwork, firewall_repairs, firewall_rules};

    fn want() -> Vec<FirewallRule> {
        let api = ["0.0.0.0/0".to_string()];
        let etcd = ["127.0.0.0/8".to_string()];
        firewall_rules(&ClusterNetwork {
            name: "kubernetes-master",
            region: "europe-west1",
            network: "default",
            api_port: 443,
            api_source_ranges: &api,
            etcd_client_source_ranges: &etcd,
        })
    }

    /// The rules as kube-up made them (plus the etcd client rule a user adds before importing), targeting its
    /// masters' tag, with its peer rule's two ports and no health rule.
    fn kube_up() -> FoundRules {
        want()
            .into_iter()
            .filter(|r| r.name != "kubernetes-master-healthz")
            .map(|mut r| {
                r.target_tags = vec!["kubernetes-master".into()];
                if r.name == "kubernetes-master-etcd" {
                    r.source_tags = vec!["kubernetes-master".into()];
                    r.tcp_ports = vec!["2380".into(), "2381".into()];
                }
                (r.name.clone(), r)
            })
            .collect()
    }

    fn masters(tags: &[(&str, &[&str])]) -> MasterTags {
        tags.iter()
            .map(|(n, t)| {
                let master = Master {
                    zone: "europe-west1-b".into(),
                    tags: t.iter().map(|s| s.to_string()).collect(),
                };
                (n.to_string(), master)
            })
            .collect()
    }

    const OURS: &str = "kubernetes-master-master";

    #[test]
    fn a_cluster_of_our_own_never_lists_its_masters() {
        let want = want();
        let same: FoundRules = want.iter().map(|r| (r.name.clone(), r.clone())).collect();
        assert!(!found_foreign_tags(&want, &same));
        assert!(found_foreign_tags(&want, &kube_up()));
    }

    #[test]
    fn while_a_master_lacks_our_tag_the_rules_are_widened_never_narrowed() {
        let found = kube_up();
        let vms = masters(&[
            ("kubernetes-master", &["kubernetes-master", "http-server"]),
            ("kubernetes-master-a1f", &[OURS, "kubernetes-master"]),
        ]);
        let (rules, handover) = rules_during_handover(want(), &found, &vms, OURS);
        let handover = handover.expect("one master lacks our tag");
        assert_eq!(
            handover.masters,
            [(
                "kubernetes-master".to_string(),
                "europe-west1-b".to_string()
            )]
        );
        // The master's other tag is not one the rules reached it by.
        assert_eq!(
            handover.tags.iter().collect::<Vec<_>>(),
            ["kubernetes-master"]
        );
        for rule in &rules {
            assert_eq!(rule.target_tags, [OURS, "kubernetes-master"], "{rule:?}");
        }
        let peer = rules
            .iter()
            .find(|r| r.name == "kubernetes-master-etcd")
            .unwrap();
        assert_eq!(peer.source_tags, [OURS, "kubernetes-master"]);
        assert_eq!(peer.tcp_ports, ["2380", "2381"]);
        // Every found rule gains our tag (a patch), the missing health rule is created for both tags, and no rule
        // loses what the old masters need.
        let steps = firewall_repairs(&rules, &found);
        assert_eq!(steps.len(), 4, "{steps:?}");
        for (name, have) in &found {
            let after = rules.iter().find(|r| &r.name == name).unwrap();
            for t in &have.target_tags {
                assert!(after.target_tags.contains(t), "{name} lost {t}");
            }
            for p in &have.tcp_ports {
                assert!(after.tcp_ports.contains(p), "{name} lost port {p}");
            }
        }
        let said = drift(&rules, &found, Some(&handover), OURS);
        assert_eq!(said.len(), 5, "{said:?}");
        assert_eq!(
            said[0],
            "Firewall rule kubernetes-master-etcd has source tags kubernetes-master, not kubernetes-master-master, \
             kubernetes-master; target tags kubernetes-master, not kubernetes-master-master, kubernetes-master; the \
             apply widens it."
        );
        assert!(said[4].starts_with(
            "Masters kubernetes-master do not carry the network tag kubernetes-master-master"
        ));
        assert!(
            said[4].contains(
                "(`gcloud compute instances add-tags kubernetes-master --zone=europe-west1-b \
                 --tags=kubernetes-master-master`; or a roll"
            ),
            "{}",
            said[4]
        );
        // Once patched, the rules need nothing more while the old master lives: the plan is empty.
        let patched: FoundRules = rules.iter().map(|r| (r.name.clone(), r.clone())).collect();
        let (again, kept) = rules_during_handover(want(), &patched, &vms, OURS);
        assert!(drift(&again, &patched, kept.as_ref(), OURS).is_empty());
    }

    #[test]
    fn once_every_master_carries_our_tag_the_rules_narrow_to_it() {
        let found = kube_up();
        let vms = masters(&[
            ("kubernetes-master", &[OURS]),
            ("kubernetes-master-a1f", &[OURS, "kubernetes-master"]),
        ]);
        let (rules, handover) = rules_during_handover(want(), &found, &vms, OURS);
        assert_eq!(handover, None);
        assert_eq!(rules, want());
        let drift = firewall_drift(&rules, &found);
        assert!(
            drift.iter().any(|s| s.starts_with(
                "Firewall rule kubernetes-master-etcd has ports 2380, 2381, not 2380"
            )),
            "{drift:?}"
        );
    }

    #[test]
    fn a_tag_added_by_hand_to_a_rule_of_a_fully_tagged_cluster_is_drift() {
        let mut found: FoundRules = want().into_iter().map(|r| (r.name.clone(), r)).collect();
        found
            .get_mut("kubernetes-master-https")
            .unwrap()
            .target_tags
            .push("bastion".into());
        let vms = masters(&[("kubernetes-master", &[OURS])]);
        let (rules, handover) = rules_during_handover(want(), &found, &vms, OURS);
        assert_eq!(handover, None);
        assert_eq!(
            firewall_drift(&rules, &found),
            [
                "Firewall rule kubernetes-master-https has target tags kubernetes-master-master, bastion, not kubernetes-master-master; the apply puts it back."
            ]
        );
    }
}
