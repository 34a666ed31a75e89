//! A firewall rule of the cluster as data, and how a rule found in the project differs from the one wanted. Its own
//! file because both the foundation's decisions (`foundation`) and the steps that carry them out (`step`) name it.

use std::collections::BTreeSet;

/// A firewall rule as the cluster wants it, or as it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirewallRule {
    pub name: String,
    /// As configured (`default`); a rule read back names its network by URL, which is not compared.
    pub network: String,
    pub tcp_ports: Vec<String>,
    pub source_ranges: Vec<String>,
    pub source_tags: Vec<String>,
    pub target_tags: Vec<String>,
    pub description: String,
}

impl FirewallRule {
    /// How the rule found differs from this one, as a phrase (`source ranges 10.0.0.0/8, not 0.0.0.0/0`); `None`
    /// when it admits the same traffic. Lists are compared as sets: GCE may return them in another order. The
    /// description and the network's spelling are not compared: neither changes what the rule admits, and a rule
    /// made by an earlier release may word its description otherwise.
    pub fn difference(&self, found: &FirewallRule) -> Option<String> {
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        let fields: [(&str, &[String], &[String]); 4] = [
            ("ports", &self.tcp_ports, &found.tcp_ports),
            ("source ranges", &self.source_ranges, &found.source_ranges),
            ("source tags", &self.source_tags, &found.source_tags),
            ("target tags", &self.target_tags, &found.target_tags),
        ];
        let phrases: Vec<String> = fields
            .iter()
            .filter(|(_, want, have)| set(want) != set(have))
            .map(|(what, want, have)| {
                let show = |v: &[String]| {
                    if v.is_empty() {
                        "none".to_string()
                    } else {
                        v.join(", ")
                    }
                };
                format!("{what} {}, not {}", show(have), show(want))
            })
            .collect();
        (!phrases.is_empty()).then(|| phrases.join("; "))
    }
}
