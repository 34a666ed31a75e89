//! addresses (regional): insert, get, list, delete, setLabels (with the label fingerprint: 412 when stale).
//!
//! `status` and `users` are derived when shown: IN_USE with the holders' selfLinks while an access config or a
//! forwarding rule holds the IP, RESERVED otherwise (RESERVING until the insert operation is DONE). Inserting an
//! address for an IP an instance or rule already holds ephemerally *promotes* it, as on GCE. An INTERNAL address
//! takes its IP from its `subnetwork` (the region's `default` if it names none), which it then shows as a full URL.

use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route, subnetworks};
use crate::app::Sim;
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::Address;
use crate::state::{Cloud, IpRange, ids, under};
use serde_json::Value;
use std::collections::BTreeSet;

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "regions/{region}/addresses",
        api: "addresses.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/addresses",
        api: "addresses.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/addresses/{address}",
        api: "addresses.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "POST",
        pattern: "regions/{region}/addresses/{address}/setLabels",
        api: "addresses.setLabels",
        handler: Handler::Mutate(set_labels),
    },
    Route {
        method: "DELETE",
        pattern: "regions/{region}/addresses/{address}",
        api: "addresses.delete",
        handler: Handler::Mutate(delete),
    },
    Route {
        method: "GET",
        pattern: "aggregated/addresses",
        api: "addresses.aggregatedList",
        handler: Handler::Read(aggregated_list),
    },
];

fn key(req: &Req, name: &str) -> String {
    format!(
        "projects/{}/regions/{}/addresses/{name}",
        req.project,
        req.p("region")
    )
}

/// The relative part of one of our links (for error messages, which GCE writes with relative paths).
pub fn rel_of(link: &str) -> &str {
    link.find("projects/").map_or(link, |i| &link[i..])
}

/// The address as GCE shows it, with derived `status` and `users`.
pub fn render(cloud: &Cloud, a: &Address) -> ApiResult<Value> {
    let mut a = a.clone();
    let region = crate::state::links::name_of(&a.region).to_string();
    if a.address_type == "INTERNAL" && a.subnetwork.is_none() {
        // Reserved by a sim that did not record subnetworks yet: those all came from the region's `default`.
        a.subnetwork = Some(format!("{}/subnetworks/{}", a.region, subnetworks::DEFAULT));
    }
    a.users = cloud.users_of_ip(&region, &a.address);
    if a.status != "RESERVING" {
        a.status = if a.users.is_empty() {
            "RESERVED"
        } else {
            "IN_USE"
        }
        .into();
    }
    to_value(&a)
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let region = req.p("region").to_string();
    let mut a: Address = body(req)?;
    check_name(&a.name)?;
    let k = key(req, &a.name);
    if cloud.addresses.contains_key(&k) {
        return Err(ApiError::already_exists(&k));
    }
    if a.address_type.is_empty() {
        a.address_type = "EXTERNAL".into();
    }
    let range = match a.address_type.as_str() {
        "EXTERNAL" => {
            if let Some(sub) = a.subnetwork.as_deref().filter(|s| !s.is_empty()) {
                return Err(ApiError::invalid_field(
                    "resource.subnetwork",
                    sub,
                    "A subnetwork can only be given for an INTERNAL address.",
                ));
            }
            a.network_tier.get_or_insert_with(|| "PREMIUM".into());
            IpRange::External
        }
        "INTERNAL" => {
            // No subnetwork: the region's `default`, as GCE picks the default network's subnetwork.
            let sub = match a.subnetwork.as_deref().filter(|s| !s.is_empty()) {
                Some(given) => {
                    subnetworks::resolve(sim, cloud, req, "resource.subnetwork", given, &region)?
                }
                None => subnetworks::default_of(sim, cloud, req, &region)?,
            };
            a.subnetwork = Some(sim.links.url(&sub.rel));
            IpRange::Internal(sub.range)
        }
        other => {
            return Err(ApiError::invalid_field(
                "resource.addressType",
                other,
                "Must be EXTERNAL or INTERNAL.",
            ));
        }
    };
    if a.address.is_empty() {
        a.address = cloud.allocate_ip(range, &BTreeSet::new()).ok_or_else(|| {
            let what = match range {
                IpRange::Internal(_) => "the subnetwork",
                IpRange::External => "the region",
            };
            ApiError::new(
                400,
                "invalid",
                format!("No addresses are available in {what}."),
            )
        })?;
    } else {
        check_requested_ip(cloud, &region, &a.address, range)?;
    }
    a.kind = "compute#address".into();
    a.id = ids::new_id();
    a.creation_timestamp = ids::now_rfc3339();
    a.region = sim
        .links
        .url(&format!("projects/{}/regions/{region}", req.project));
    a.self_link = sim.links.url(&k);
    a.status = "RESERVING".into();
    a.users.clear();
    a.label_fingerprint = Some(ids::new_fingerprint());
    let id = a.id.clone();
    cloud.addresses.insert(k.clone(), a);
    let done = Transition::AddressStatus {
        key: k.clone(),
        status: "RESERVED".into(),
    };
    Ok(OpSpec {
        scope: Scope::Region(region),
        op_type: "insert",
        target: k,
        target_id: id,
        on_running: Transition::Nothing,
        on_done: done,
    })
}

/// A specific IP may be reserved if it is free, or promoted if it is held ephemerally in the same region.
fn check_requested_ip(cloud: &Cloud, region: &str, ip: &str, range: IpRange) -> ApiResult<()> {
    let conflict = || {
        ApiError::invalid_field(
            "resource.address",
            ip,
            "Specified IP address is in-use and would result in a conflict.",
        )
    };
    if !range.contains(ip) {
        let why = match range {
            IpRange::Internal(_) => "Requested internal IP is outside the subnetwork CIDR range.",
            IpRange::External => "Specified IP address is not available in this region.",
        };
        return Err(ApiError::invalid_field("resource.address", ip, why));
    }
    if cloud.addresses.values().any(|a| a.address == ip) {
        return Err(conflict());
    }
    if cloud.ips_in_use().contains(ip) && cloud.users_of_ip(region, ip).is_empty() {
        // Held, but not by an external access config or rule of this region (an internal IP, another region).
        return Err(conflict());
    }
    Ok(())
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req, req.p("address"));
    cloud
        .addresses
        .get(&k)
        .map(|a| render(cloud, a))
        .unwrap_or_else(|| Err(ApiError::not_found(&k)))
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = format!(
        "projects/{}/regions/{}/addresses",
        req.project,
        req.p("region")
    );
    let prefix = format!("{rel}/");
    let items = under(&cloud.addresses, &prefix)
        .map(|a| render(cloud, a))
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#addressList", &rel, items)
}

/// What `gcloud compute addresses list` calls: every region (global addresses are not simulated).
fn aggregated_list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let scopes = common::by_region(|region| {
        let prefix = format!("projects/{}/regions/{region}/addresses/", req.project);
        under(&cloud.addresses, &prefix)
            .map(|a| render(cloud, a))
            .collect()
    })?;
    common::aggregated(
        sim,
        req,
        "compute#addressAggregatedList",
        "addresses",
        scopes,
    )
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct SetLabels {
    labels: std::collections::BTreeMap<String, String>,
    label_fingerprint: String,
}

/// Optimistic concurrency as on GCE: the request carries the fingerprint it read; a stale one is refused with 412
/// and every accepted change rotates it (even to the same labels), so a compare-and-set on labels is atomic.
fn set_labels(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let s: SetLabels = body(req)?;
    let k = key(req, req.p("address"));
    let a = cloud
        .addresses
        .get_mut(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    if a.label_fingerprint.as_deref().unwrap_or_default() != s.label_fingerprint {
        return Err(ApiError::fingerprint("label"));
    }
    super::instance_meta::check_labels(&s.labels)?;
    a.labels = s.labels;
    a.label_fingerprint = Some(ids::new_fingerprint());
    Ok(OpSpec {
        scope: Scope::Region(req.p("region").to_string()),
        op_type: "setLabels",
        target: k,
        target_id: a.id.clone(),
        on_running: Transition::Nothing,
        on_done: Transition::Nothing,
    })
}

fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("address"));
    let a = cloud
        .addresses
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    let users = cloud.users_of_ip(req.p("region"), &a.address);
    if let Some(user) = users.first() {
        return Err(common::held_by(cloud, "address", &k, rel_of(user)));
    }
    let gone = Transition::Remove {
        collection: Collection::Addresses,
        key: k.clone(),
    };
    let scope = Scope::Region(req.p("region").to_string());
    Ok(OpSpec {
        scope,
        op_type: "delete",
        target: k,
        target_id: a.id.clone(),
        on_running: Transition::Nothing,
        on_done: gone,
    })
}
