//! subnetworks (regional): insert, get, list, aggregatedList, delete; and how addresses and instances name one
//! (`resolve`), so their internal IPs come from its range.
//!
//! Every region has an implicit subnetwork `default` of network `default`, as GCE's auto-mode default network
//! has: its range is the sim's internal /16 (127.10.0.0/16 in network block 0). It is shown by get and list but
//! never stored (so `/_sim/state` and `ha-sim status` list only the subnetworks someone created), and it cannot
//! be deleted. The sim has no networks resource: a subnetwork may name any network, as instances and firewalls
//! may.
//!
//! Ranges are where the sim departs from GCE: VMs are loopback addresses of this machine, so a range must lie in
//! 127.0.0.0/8, must not meet the host's own addresses or the /16s of any network block (another sim's VMs), and
//! must not overlap any other subnetwork, whatever its network (on GCE only subnetworks of one network must not
//! overlap; on loopback an address is one machine-wide).

use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::net::{Cidr, IpPool, MAX_NETWORK_BLOCK, block_ranges, network_block};
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::Subnetwork;
use crate::state::{Cloud, catalog, ids, is_implicit_subnet, links, under};
use base64::Engine as _;
use serde_json::Value;
use std::net::Ipv4Addr;

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "regions/{region}/subnetworks",
        api: "subnetworks.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/subnetworks",
        api: "subnetworks.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/subnetworks/{subnetwork}",
        api: "subnetworks.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "regions/{region}/subnetworks/{subnetwork}",
        api: "subnetworks.delete",
        handler: Handler::Mutate(delete),
    },
    Route {
        method: "GET",
        pattern: "aggregated/subnetworks",
        api: "subnetworks.aggregatedList",
        handler: Handler::Read(aggregated_list),
    },
];

/// The name of every region's implicit subnetwork.
pub const DEFAULT: &str = "default";

/// The implicit subnetworks' creation time: fixed, as the catalog's, so they do not look freshly made.
const CREATED: &str = "1969-12-31T16:00:00.000-08:00";

fn key(project: &str, region: &str, name: &str) -> String {
    format!("projects/{project}/regions/{region}/subnetworks/{name}")
}

/// The implicit `default` subnetwork of `region`, as GCE shows an auto-mode network's: same id and fingerprint
/// on every call (it never changes).
fn implicit(sim: &Sim, project: &str, region: &str) -> Subnetwork {
    let rel = key(project, region, DEFAULT);
    let range = IpPool::internal_cidr();
    let stable = catalog::stable_id(&rel);
    Subnetwork {
        kind: "compute#subnetwork".into(),
        // Below 2^63, as `ids::new_id`, for clients that parse ids as signed integers.
        id: (stable >> 1).to_string(),
        creation_timestamp: CREATED.into(),
        name: DEFAULT.into(),
        network: sim
            .links
            .url(&format!("projects/{project}/global/networks/default")),
        ip_cidr_range: range.to_string(),
        gateway_address: gateway(range).to_string(),
        region: sim
            .links
            .url(&format!("projects/{project}/regions/{region}")),
        self_link: sim.links.url(&rel),
        fingerprint: base64::engine::general_purpose::URL_SAFE.encode(stable.to_le_bytes()),
        private_ip_google_access: false,
        stack_type: "IPV4_ONLY".into(),
        purpose: "PRIVATE".into(),
        extra: Default::default(),
    }
}

/// The gateway GCE puts on a range: its first host address.
fn gateway(range: Cidr) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range.first()) + 1)
}

/// The subnetwork at `rel`, stored or implicit.
fn find(sim: &Sim, cloud: &Cloud, rel: &str) -> Option<Subnetwork> {
    if let Some(s) = cloud.subnetworks.get(rel) {
        return Some(s.clone());
    }
    if !is_implicit_subnet(rel) {
        return None;
    }
    match links::segments(rel).as_slice() {
        ["projects", project, "regions", region, ..] => Some(implicit(sim, project, region)),
        _ => None,
    }
}

/// Every subnetwork of `region` (the implicit one among them), by name as GCE lists them.
fn in_region(sim: &Sim, cloud: &Cloud, project: &str, region: &str) -> ApiResult<Vec<Value>> {
    let prefix = format!("projects/{project}/regions/{region}/subnetworks/");
    let mut all: Vec<Subnetwork> = under(&cloud.subnetworks, &prefix).cloned().collect();
    all.push(implicit(sim, project, region));
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all.iter().map(to_value).collect()
}

/// A subnetwork named by an address or an instance's interface, resolved: where it is, its range and its
/// network.
pub struct Resolved {
    /// `projects/p/regions/r/subnetworks/s`.
    pub rel: String,
    pub range: Cidr,
    /// Relative path of its network (`projects/p/global/networks/n`).
    pub network: String,
}

/// Resolves a subnetwork reference (full URL, `projects/...` or `regions/r/subnetworks/s`) in `region`: a 400
/// naming `field` if it is no subnetwork reference or one of another region, 404 if there is no such subnetwork.
pub fn resolve(
    sim: &Sim,
    cloud: &Cloud,
    req: &Req,
    field: &str,
    given: &str,
    region: &str,
) -> ApiResult<Resolved> {
    let rel = common::reference(sim, req, field, given)?;
    let same_region = match links::segments(&rel).as_slice() {
        ["projects", _, "regions", r, "subnetworks", name] if !name.is_empty() => *r == region,
        _ => {
            return Err(ApiError::invalid_field(
                field,
                given,
                "Must be a URL to a valid Compute resource of the correct type.",
            ));
        }
    };
    if !same_region {
        return Err(ApiError::invalid_field(
            field,
            given,
            &format!("The subnetwork must be in region '{region}'."),
        ));
    }
    let Some(s) = find(sim, cloud, &rel) else {
        return Err(ApiError::not_found(&rel));
    };
    let range = Cidr::parse_network(&s.ip_cidr_range).ok_or_else(|| ApiError::not_found(&rel))?;
    let network = links::rel_of(&s.network).unwrap_or(&s.network).to_string();
    Ok(Resolved {
        rel,
        range,
        network,
    })
}

/// The region's `default` subnetwork, for an address or interface that names none.
pub fn default_of(sim: &Sim, cloud: &Cloud, req: &Req, region: &str) -> ApiResult<Resolved> {
    let given = format!("regions/{region}/subnetworks/{DEFAULT}");
    resolve(sim, cloud, req, "resource.subnetwork", &given, region)
}

/// GCE's primary IPv4 ranges are /8 to /29; on loopback also inside 127.0.0.0/8, clear of the host's own
/// addresses, of every network block's /16s and of every other subnetwork.
fn check_range(cloud: &Cloud, region: &str, given: &str) -> ApiResult<Cidr> {
    const FIELD: &str = "resource.ipCidrRange";
    if given.is_empty() {
        return Err(ApiError::required(FIELD));
    }
    let Some(range) = Cidr::parse_network(given).filter(|r| (8..=29).contains(&r.prefix_len()))
    else {
        return Err(ApiError::invalid_field(
            FIELD,
            given,
            "Must be an IPv4 network in CIDR notation (a.b.c.d/n, no host bits set) with a prefix length from \
             /8 to /29.",
        ));
    };
    let loopback = Cidr::new(Ipv4Addr::new(127, 0, 0, 0), 8);
    if !loopback.contains(range.first()) {
        return Err(ApiError::invalid_field(
            FIELD,
            given,
            "ha-sim runs every VM on a loopback address of this machine, so it only runs subnetworks whose range \
             lies in 127.0.0.0/8 (e.g. 127.11.0.0/24).",
        ));
    }
    for host in [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 53)] {
        if range.contains(host) {
            return Err(ApiError::invalid_field(
                FIELD,
                given,
                &format!("The range contains {host}, which this machine itself uses."),
            ));
        }
    }
    let own = network_block();
    for n in 0..=MAX_NETWORK_BLOCK {
        let (internal, external) = block_ranges(n);
        for (pool, what) in [(internal, "internal"), (external, "external")] {
            // The sim's own internal /16 is the `default` subnetworks' range: that conflict is worded below.
            if (n == own && what == "internal") || !pool.overlaps(&range) {
                continue;
            }
            let whose = if n == own {
                format!("this sim's pool of {what} addresses")
            } else {
                format!(
                    "the pool of {what} addresses of network block {n}, which another sim on this machine may use"
                )
            };
            return Err(ApiError::invalid_field(
                FIELD,
                given,
                &format!(
                    "The range overlaps {pool}, {whose}; choose a range outside every network block's, e.g. in \
                     127.11.0.0/16 to 127.19.0.0/16."
                ),
            ));
        }
    }
    let conflict = |name: &str, region: &str| {
        ApiError::invalid(format!(
            "Invalid IPCidrRange: {given} conflicts with existing subnetwork '{name}' in region '{region}'."
        ))
    };
    if IpPool::internal_cidr().overlaps(&range) {
        return Err(conflict(DEFAULT, region));
    }
    for s in cloud.subnetworks.values() {
        if Cidr::parse_network(&s.ip_cidr_range).is_some_and(|r| r.overlaps(&range)) {
            return Err(conflict(&s.name, links::name_of(&s.region)));
        }
    }
    Ok(range)
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let region = req.p("region").to_string();
    let mut s: Subnetwork = body(req)?;
    check_name(&s.name)?;
    let k = key(&req.project, &region, &s.name);
    if cloud.subnetworks.contains_key(&k) || s.name == DEFAULT {
        return Err(ApiError::already_exists(&k));
    }
    if s.network.is_empty() {
        return Err(ApiError::required("resource.network"));
    }
    let network = common::reference(sim, req, "resource.network", &s.network)?;
    if !matches!(
        links::segments(&network).as_slice(),
        ["projects", _, "global", "networks", n] if !n.is_empty()
    ) {
        return Err(ApiError::invalid_field(
            "resource.network",
            &s.network,
            "Must be a URL to a valid Compute resource of the correct type.",
        ));
    }
    let range = check_range(cloud, &region, &s.ip_cidr_range)?;
    for (field, value, only) in [
        ("resource.stackType", &mut s.stack_type, "IPV4_ONLY"),
        ("resource.purpose", &mut s.purpose, "PRIVATE"),
    ] {
        if value.is_empty() {
            *value = only.into();
        } else if value != only {
            return Err(ApiError::invalid_field(
                field,
                value,
                &format!("ha-sim only runs {only} subnetworks."),
            ));
        }
    }
    s.kind = "compute#subnetwork".into();
    s.id = ids::new_id();
    s.creation_timestamp = ids::now_rfc3339();
    s.network = sim.links.url(&network);
    s.ip_cidr_range = range.to_string();
    s.gateway_address = gateway(range).to_string();
    s.region = sim
        .links
        .url(&format!("projects/{}/regions/{region}", req.project));
    s.self_link = sim.links.url(&k);
    s.fingerprint = ids::new_fingerprint();
    let id = s.id.clone();
    cloud.subnetworks.insert(k.clone(), s);
    Ok(OpSpec {
        scope: Scope::Region(region),
        op_type: "insert",
        target: k,
        target_id: id,
        on_running: Transition::Nothing,
        on_done: Transition::Nothing,
    })
}

fn get(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(&req.project, req.p("region"), req.p("subnetwork"));
    match find(sim, cloud, &k) {
        Some(s) => to_value(&s),
        None => Err(ApiError::not_found(&k)),
    }
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let region = req.p("region");
    let rel = format!("projects/{}/regions/{region}/subnetworks", req.project);
    let items = in_region(sim, cloud, &req.project, region)?;
    common::list(sim, req, "compute#subnetworkList", &rel, items)
}

/// What `gcloud compute networks subnets list` calls: every region.
fn aggregated_list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let scopes = common::by_region(|region| in_region(sim, cloud, &req.project, region))?;
    common::aggregated(
        sim,
        req,
        "compute#subnetworkAggregatedList",
        "subnetworks",
        scopes,
    )
}

fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(&req.project, req.p("region"), req.p("subnetwork"));
    let Some(s) = cloud.subnetworks.get(&k) else {
        if is_implicit_subnet(&k) {
            return Err(ApiError::new(
                400,
                "invalidResourceUsage",
                "Invalid resource usage: 'Cannot delete auto subnetwork from an auto subnet mode network.'.",
            ));
        }
        return Err(ApiError::not_found(&k));
    };
    if let Some(user) = cloud.subnet_users(&k).first() {
        return Err(common::held_by(cloud, "subnetwork", &k, user));
    }
    let id = s.id.clone();
    Ok(OpSpec {
        scope: Scope::Region(req.p("region").to_string()),
        op_type: "delete",
        target: k.clone(),
        target_id: id,
        on_running: Transition::Nothing,
        on_done: Transition::Remove {
            collection: Collection::Subnetworks,
            key: k,
        },
    })
}
