//! What a cluster's network lets in, judged at plan: source ranges open to the whole Internet, and a network whose
//! own rules make the masters-only etcd peer rule moot. Warnings, never refusals: each can be what the user means,
//! and none breaks the cluster. They show when a plan sets the value (a create, or a change of that attribute), not on
//! every plan of a steady configuration, so a warning is news rather than noise the user learns to skip.

use super::names::DerivedNames;

/// The network settings of a cluster as planned; None = not known at plan (a value computed elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exposure<'a> {
    pub name: &'a str,
    pub network: Option<&'a str>,
    pub api_port: Option<i64>,
    pub api_source_ranges: Option<&'a [String]>,
    pub etcd_client_source_ranges: Option<&'a [String]>,
}

/// A plan warning on one attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub attribute: &'static str,
    pub summary: String,
    pub detail: String,
}

/// A range of prefix length 0 (`0.0.0.0/0`, `::/0`): every address of its family.
pub fn is_everywhere(range: &str) -> bool {
    range
        .split_once('/')
        .is_some_and(|(_, len)| len.trim() == "0")
}

/// Whether `network` (a name, or a link ending in it) is the project's `default` network. GCE creates it in
/// auto mode with the rule `default-allow-internal`: every TCP and UDP port from 10.128.0.0/9, the whole VPC.
pub fn is_default_network(network: &str) -> bool {
    network.trim_end_matches('/').rsplit('/').next() == Some("default")
}

/// The warnings of a plan from `prior` (None at create) to `planned`: for each attribute that this plan sets.
pub fn exposure_warnings(prior: Option<&Exposure<'_>>, planned: &Exposure<'_>) -> Vec<Warning> {
    let names = DerivedNames::for_cluster(planned.name);
    let changed =
        |get: fn(&Exposure<'_>) -> Option<String>| prior.is_none_or(|p| get(p) != get(planned));
    let mut out = Vec::new();
    if let Some(ranges) = planned.api_source_ranges
        && ranges.iter().any(|r| is_everywhere(r))
        && changed(|e| e.api_source_ranges.map(|r| r.join(",")))
    {
        let port = planned.api_port.unwrap_or(443);
        out.push(Warning {
            attribute: "api_source_ranges",
            summary: format!("Cluster {}'s Kubernetes API is open to the whole Internet", planned.name),
            detail: format!(
                "`api_source_ranges` contains {} (its default), so the firewall rule `{}` admits any address to port {port} on the static IP and on every replica's external IP. kube-apiserver authenticates every request, but the port is open to scans and to any flaw found in it. To narrow it, list the ranges that need the API: the machine Terraform runs on (the provider checks `/healthz` on the static IP after creating or deleting a replica), your users and CI, and your nodes' external addresses or their Cloud NAT ranges, like `[\"203.0.113.0/24\", \"198.51.100.7/32\"]`. GCE's health checkers do not need it: they reach the masters on port 3990 through the rule `{}-healthz`. See docs/guides/network.md.",
                everywhere(ranges),
                names.firewall_api,
                planned.name,
            ),
        });
    }
    if let Some(ranges) = planned.etcd_client_source_ranges
        && ranges.iter().any(|r| is_everywhere(r))
        && changed(|e| e.etcd_client_source_ranges.map(|r| r.join(",")))
    {
        out.push(Warning {
            attribute: "etcd_client_source_ranges",
            summary: format!("Cluster {}'s etcd client port is open to the whole Internet", planned.name),
            detail: format!(
                "`etcd_client_source_ranges` contains {}, so the firewall rule `{}` admits any address to etcd's client port 2379 on every replica's external IP. etcd holds every Secret of the cluster; it checks client certificates (mutual TLS), so a stranger needs a certificate from the cluster's etcd client CA, but the port is open to scans and to any flaw found in etcd's TLS. Only the provider needs this port from outside the VPC, from where Terraform runs: list that address or range instead, like `[\"203.0.113.7/32\"]` or your CI runners' range. See docs/guides/network.md.",
                everywhere(ranges),
                names.firewall_etcd_client,
            ),
        });
    }
    if let Some(network) = planned.network
        && is_default_network(network)
        && changed(|e| e.network.map(str::to_string))
    {
        out.push(Warning {
            attribute: "network",
            summary: format!(
                "On the default network, cluster {}'s etcd ports are open to every VM of the VPC",
                planned.name
            ),
            detail: format!(
                "GCE creates the `default` network with the rule `default-allow-internal`, which admits every TCP port from 10.128.0.0/9, the whole VPC, to every VM. The provider's rule `{}` admits etcd's peer port 2380 from masters only (tag `{}`), but with `default-allow-internal` in place any VM of the network reaches the masters' etcd peer port 2380 and client port 2379, so the peer rule restricts nothing. etcd still checks certificates (mutual TLS) on both ports. To let only masters in, put the cluster on a network of its own (`network`, and `subnetwork` for a custom-mode network; the cluster is replaced, so choose it before the cluster holds data), or delete or narrow `default-allow-internal` if nothing else needs it (`gcloud compute firewall-rules delete default-allow-internal`). If you already did, this warning does not apply. See docs/guides/network.md.",
                names.firewall_etcd_peer, names.master_tag,
            ),
        });
    }
    out
}

/// The ranges of `ranges` that cover every address, for the message.
fn everywhere(ranges: &[String]) -> String {
    ranges
        .iter()
        .filter(|r| is_everywhere(r))
        .map(|r| format!("`{r}`"))
        .collect::<Vec<_>>()
        .join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ranges: &[&str]) -> Vec<String> {
        ranges.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ranges_and_networks() {
        for (range, all) in [
            ("0.0.0.0/0", true),
            ("::/0", true),
            ("10.0.0.0/8", false),
            ("203.0.113.0/24", false),
            ("0.0.0.0/1", false),
            ("10.0.0.0/10", false),
        ] {
            assert_eq!(is_everywhere(range), all, "{range}");
        }
        for (network, default) in [
            ("default", true),
            ("projects/p/global/networks/default", true),
            (
                "https://www.googleapis.com/compute/v1/projects/p/global/networks/default",
                true,
            ),
            ("prod", false),
            ("projects/p/global/networks/default-2", false),
            ("my-default", false),
        ] {
            assert_eq!(is_default_network(network), default, "{network}");
        }
    }

    fn e<'a>(network: &'a str, api: &'a [String], etcd: &'a [String]) -> Exposure<'a> {
        Exposure {
            name: "prod",
            network: Some(network),
            api_port: Some(443),
            api_source_ranges: Some(api),
            etcd_client_source_ranges: Some(etcd),
        }
    }

    #[test]
    fn what_a_plan_warns_about() {
        let (open, narrow) = (&v(&["0.0.0.0/0"]), &v(&["203.0.113.7/32"]));
        let mixed = &v(&["10.0.0.0/8", "::/0"]);
        let attrs = |w: Vec<Warning>| w.iter().map(|w| w.attribute).collect::<Vec<_>>();

        // (prior, planned, attributes warned about)
        let table: Vec<(Option<Exposure<'_>>, Exposure<'_>, Vec<&str>)> = vec![
            // A create with the defaults: API open, default network.
            (
                None,
                e("default", open, narrow),
                vec!["api_source_ranges", "network"],
            ),
            (None, e("prod", narrow, narrow), vec![]),
            (
                None,
                e("prod", narrow, open),
                vec!["etcd_client_source_ranges"],
            ),
            (
                None,
                e("prod", narrow, mixed),
                vec!["etcd_client_source_ranges"],
            ),
            // A steady configuration plans clean, whatever it exposes.
            (
                Some(e("default", open, open)),
                e("default", open, open),
                vec![],
            ),
            // Opening a range warns; narrowing one does not.
            (
                Some(e("prod", narrow, narrow)),
                e("prod", open, narrow),
                vec!["api_source_ranges"],
            ),
            (
                Some(e("prod", open, open)),
                e("prod", narrow, narrow),
                vec![],
            ),
            // Moving onto the default network warns.
            (
                Some(e("prod", narrow, narrow)),
                e("default", narrow, narrow),
                vec!["network"],
            ),
        ];
        for (prior, planned, want) in table {
            assert_eq!(
                attrs(exposure_warnings(prior.as_ref(), &planned)),
                want,
                "{prior:?} -> {planned:?}"
            );
        }

        // Values not known at plan are not judged.
        let unknown = Exposure {
            name: "prod",
            network: None,
            api_port: None,
            api_source_ranges: None,
            etcd_client_source_ranges: None,
        };
        assert!(exposure_warnings(None, &unknown).is_empty());
    }

    #[test]
    fn the_messages_name_the_rule_the_port_and_the_way_out() {
        let (open, narrow) = (v(&["0.0.0.0/0", "10.0.0.0/8"]), v(&["203.0.113.7/32"]));
        let planned = Exposure {
            name: "prod",
            network: Some("default"),
            api_port: Some(6443),
            api_source_ranges: Some(&open),
            etcd_client_source_ranges: Some(&open),
        };
        let w = exposure_warnings(None, &planned);
        let api = &w[0];
        assert!(api.summary.contains("prod") && api.summary.contains("Kubernetes API"));
        for needle in [
            "`0.0.0.0/0`",
            "`prod-https`",
            "port 6443",
            "Terraform runs",
            "prod-healthz",
        ] {
            assert!(api.detail.contains(needle), "{needle}: {}", api.detail);
        }
        assert!(
            !api.detail.contains("10.0.0.0/8"),
            "only the open range is named"
        );
        let etcd = &w[1];
        for needle in ["2379", "mutual TLS", "where Terraform runs", "/32"] {
            assert!(etcd.detail.contains(needle), "{needle}: {}", etcd.detail);
        }
        let moot = &w[2];
        for needle in [
            "default-allow-internal",
            "10.128.0.0/9",
            "`prod-etcd`",
            "`prod-master`",
            "2380",
            "network of its own",
        ] {
            assert!(moot.detail.contains(needle), "{needle}: {}", moot.detail);
        }
        let quiet = Exposure {
            api_source_ranges: Some(&narrow),
            etcd_client_source_ranges: Some(&narrow),
            network: Some("prod"),
            ..planned
        };
        assert!(exposure_warnings(None, &quiet).is_empty());
    }
}
