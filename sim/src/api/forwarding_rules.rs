//! forwardingRules (regional, EXTERNAL scheme, target pools): insert, get, list, delete. The fabric runs a
//! load balancer on the rule's IP that spreads connections over the pool's healthy instances after a
//! propagation delay.

use super::addresses::rel_of;
use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::ForwardingRule;
use crate::state::{Cloud, IpRange, ids, links, under};
use serde_json::Value;
use std::collections::BTreeSet;

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "regions/{region}/forwardingRules",
        api: "forwardingRules.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/forwardingRules",
        api: "forwardingRules.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/forwardingRules/{rule}",
        api: "forwardingRules.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "regions/{region}/forwardingRules/{rule}",
        api: "forwardingRules.delete",
        handler: Handler::Mutate(delete),
    },
    Route {
        method: "GET",
        pattern: "aggregated/forwardingRules",
        api: "forwardingRules.aggregatedList",
        handler: Handler::Read(aggregated_list),
    },
];

fn key(req: &Req, name: &str) -> String {
    format!(
        "projects/{}/regions/{}/forwardingRules/{name}",
        req.project,
        req.p("region")
    )
}

/// `"80"` → `"80-80"` (what GCE stores and returns); validates `N` or `N-M` within 1..=65535.
pub fn normalise_port_range(given: &str) -> ApiResult<String> {
    let bad = || {
        ApiError::invalid_field(
            "resource.portRange",
            given,
            "Must be a port or a range of ports (e.g. '80' or '80-90').",
        )
    };
    let (a, b) = given.split_once('-').unwrap_or((given, given));
    let a: u16 = a.trim().parse().map_err(|_| bad())?;
    let b: u16 = b.trim().parse().map_err(|_| bad())?;
    if a == 0 || b < a {
        return Err(bad());
    }
    Ok(format!("{a}-{b}"))
}

/// The rule's IP: given as an IP, or as an address (URL, partial URL or name) of the region. A given IP must be
/// a reserved address of the region that no instance and no overlapping rule holds; none = ephemeral.
fn resolve_ip(sim: &Sim, cloud: &Cloud, req: &Req, fr: &ForwardingRule) -> ApiResult<String> {
    let region = req.p("region");
    let given = fr.ip_address.trim();
    if given.is_empty() {
        return cloud
            .allocate_ip(IpRange::External, &BTreeSet::new())
            .ok_or_else(|| {
                ApiError::new(400, "invalid", "No external IP addresses are available.")
            });
    }
    let ip = if given.parse::<std::net::Ipv4Addr>().is_ok() {
        given.to_string()
    } else {
        let rel = sim.links.rel(&req.project, given).unwrap_or_else(|| {
            format!(
                "projects/{}/regions/{region}/addresses/{given}",
                req.project
            )
        });
        cloud
            .addresses
            .get(&rel)
            .map(|a| a.address.clone())
            .ok_or_else(|| ApiError::not_found(&rel))?
    };
    let reserved = cloud
        .addresses
        .values()
        .any(|a| a.address == ip && links::name_of(&a.region) == region);
    if !reserved {
        return Err(ApiError::invalid_field(
            "resource.IPAddress",
            &ip,
            &format!(
                "The specified external IP address '{ip}' was not found in region '{region}'."
            ),
        ));
    }
    let ports: BTreeSet<u16> = fr.port_list().into_iter().collect();
    for user in cloud.users_of_ip(region, &ip) {
        let other = cloud.forwarding_rules.get(rel_of(&user));
        let overlaps = match other {
            // Rules may share an IP on disjoint ports; an all-ports rule overlaps everything.
            Some(o) => {
                let theirs: BTreeSet<u16> = o.port_list().into_iter().collect();
                o.ip_protocol == fr.ip_protocol
                    && (ports.is_empty() || theirs.is_empty() || !ports.is_disjoint(&theirs))
            }
            None => true,
        };
        if overlaps {
            return Err(ApiError::invalid_field(
                "resource.IPAddress",
                &ip,
                "Specified IP address is in-use and would result in a conflict.",
            ));
        }
    }
    Ok(ip)
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let region = req.p("region").to_string();
    let mut fr: ForwardingRule = body(req)?;
    check_name(&fr.name)?;
    let k = key(req, &fr.name);
    if cloud.forwarding_rules.contains_key(&k) {
        return Err(ApiError::already_exists(&k));
    }
    if fr.ip_protocol.is_empty() {
        fr.ip_protocol = "TCP".into();
    }
    if !matches!(
        fr.ip_protocol.as_str(),
        "TCP" | "UDP" | "ESP" | "AH" | "SCTP" | "ICMP" | "L3_DEFAULT"
    ) {
        return Err(ApiError::invalid_field(
            "resource.IPProtocol",
            &fr.ip_protocol,
            "Unsupported protocol.",
        ));
    }
    if fr.load_balancing_scheme.is_empty() {
        fr.load_balancing_scheme = "EXTERNAL".into();
    }
    if fr.load_balancing_scheme != "EXTERNAL" {
        return Err(ApiError::invalid_field(
            "resource.loadBalancingScheme",
            &fr.load_balancing_scheme,
            "The simulator supports EXTERNAL forwarding rules to target pools only.",
        ));
    }
    if fr.network_tier.is_empty() {
        fr.network_tier = "PREMIUM".into();
    }
    fr.port_range = fr
        .port_range
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(normalise_port_range)
        .transpose()?;
    if fr.port_range.is_some() && !fr.ports.is_empty() {
        return Err(ApiError::invalid(
            "Only one of portRange and ports may be specified.",
        ));
    }
    if fr.target.is_empty() {
        return Err(ApiError::required("resource.target"));
    }
    let target = common::reference(sim, req, "resource.target", &fr.target)?;
    let same_region = links::scope_of(&target, "regions") == Some(region.as_str())
        && target.contains("/targetPools/");
    if !same_region {
        return Err(ApiError::invalid_field(
            "resource.target",
            &fr.target,
            "The target must be a target pool in the rule's region.",
        ));
    }
    if !cloud.target_pools.contains_key(&target) {
        return Err(ApiError::not_found(&target));
    }
    fr.target = sim.links.url(&target);
    fr.ip_address = resolve_ip(sim, cloud, req, &fr)?;
    fr.kind = "compute#forwardingRule".into();
    fr.id = ids::new_id();
    fr.creation_timestamp = ids::now_rfc3339();
    fr.region = sim
        .links
        .url(&format!("projects/{}/regions/{region}", req.project));
    fr.self_link = sim.links.url(&k);
    fr.label_fingerprint = ids::new_fingerprint();
    fr.fingerprint = ids::new_fingerprint();
    let id = fr.id.clone();
    cloud.forwarding_rules.insert(k.clone(), fr);
    Ok(OpSpec {
        scope: Scope::Region(region),
        op_type: "insert",
        target: k,
        target_id: id,
        on_running: Transition::Nothing,
        on_done: Transition::Nothing,
    })
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req, req.p("rule"));
    cloud
        .forwarding_rules
        .get(&k)
        .map(to_value)
        .unwrap_or_else(|| Err(ApiError::not_found(&k)))
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = format!(
        "projects/{}/regions/{}/forwardingRules",
        req.project,
        req.p("region")
    );
    let prefix = format!("{rel}/");
    let items = under(&cloud.forwarding_rules, &prefix)
        .map(to_value)
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#forwardingRuleList", &rel, items)
}

fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("rule"));
    let fr = cloud
        .forwarding_rules
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    let id = fr.id.clone();
    let gone = Transition::Remove {
        collection: Collection::ForwardingRules,
        key: k.clone(),
    };
    Ok(OpSpec {
        scope: Scope::Region(req.p("region").to_string()),
        op_type: "delete",
        target: k,
        target_id: id,
        on_running: Transition::Nothing,
        on_done: gone,
    })
}

/// What `gcloud compute forwarding-rules list` calls: every region (global rules are not simulated).
fn aggregated_list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let scopes = common::by_region(|region| {
        let prefix = format!("projects/{}/regions/{region}/forwardingRules/", req.project);
        under(&cloud.forwarding_rules, &prefix)
            .map(to_value)
            .collect()
    })?;
    common::aggregated(
        sim,
        req,
        "compute#forwardingRuleAggregatedList",
        "forwardingRules",
        scopes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges_normalise_like_gce() {
        assert_eq!(normalise_port_range("443").unwrap(), "443-443");
        assert_eq!(normalise_port_range("80-90").unwrap(), "80-90");
        assert!(normalise_port_range("90-80").is_err());
        assert!(normalise_port_range("http").is_err());
        assert!(normalise_port_range("0").is_err());
    }
}
