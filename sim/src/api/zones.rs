//! zones and regions: get and list, from the fixed catalog. A zone taken down by a fault shows DOWN.

use super::common;
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::state::{Cloud, catalog};
use serde_json::{Value, json};

pub const ROUTES: &[Route] = &[
    Route {
        method: "GET",
        pattern: "zones",
        api: "zones.list",
        handler: Handler::Read(list_zones),
    },
    Route {
        method: "GET",
        pattern: "zones/{zone}",
        api: "zones.get",
        handler: Handler::Read(get_zone),
    },
    Route {
        method: "GET",
        pattern: "regions",
        api: "regions.list",
        handler: Handler::Read(list_regions),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}",
        api: "regions.get",
        handler: Handler::Read(get_region),
    },
];

/// The catalog's creation time: fixed, so resources do not look freshly made on every call.
const CREATED: &str = "1969-12-31T16:00:00.000-08:00";

fn zone(sim: &Sim, cloud: &Cloud, project: &str, name: &str) -> Value {
    let region = catalog::region_of(name).unwrap_or_default();
    let status = if cloud.zones_down.contains(name) {
        "DOWN"
    } else {
        "UP"
    };
    json!({
        "kind": "compute#zone",
        "id": catalog::stable_id(name).to_string(),
        "creationTimestamp": CREATED,
        "name": name,
        "description": name,
        "status": status,
        "region": sim.links.url(&format!("projects/{project}/regions/{region}")),
        "selfLink": sim.links.url(&format!("projects/{project}/zones/{name}")),
        "availableCpuPlatforms": ["Intel Cascade Lake", "AMD Milan"],
        "supportsPzs": false,
    })
}

fn region(sim: &Sim, cloud: &Cloud, project: &str, name: &str) -> Value {
    let zones = catalog::zones_of(name);
    let urls: Vec<String> = zones
        .iter()
        .map(|z| sim.links.url(&format!("projects/{project}/zones/{z}")))
        .collect();
    // A region is DOWN only if all its zones are.
    let status = if zones.iter().all(|z| cloud.zones_down.contains(z)) {
        "DOWN"
    } else {
        "UP"
    };
    json!({
        "kind": "compute#region",
        "id": catalog::stable_id(name).to_string(),
        "creationTimestamp": CREATED,
        "name": name,
        "description": name,
        "status": status,
        "zones": urls,
        "quotas": [
            {"metric": "CPUS", "limit": 24.0, "usage": 0.0},
            {"metric": "STATIC_ADDRESSES", "limit": 8.0, "usage": 0.0},
            {"metric": "IN_USE_ADDRESSES", "limit": 8.0, "usage": 0.0},
        ],
        "selfLink": sim.links.url(&format!("projects/{project}/regions/{name}")),
        "supportsPzs": false,
    })
}

fn get_zone(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    Ok(zone(sim, cloud, &req.project, req.p("zone")))
}

fn list_zones(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let items = catalog::zones()
        .map(|z| zone(sim, cloud, &req.project, &z))
        .collect();
    common::list(
        sim,
        req,
        "compute#zoneList",
        &format!("projects/{}/zones", req.project),
        items,
    )
}

fn get_region(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let name = req.p("region");
    if !catalog::is_region(name) {
        return Err(ApiError::not_found(&format!(
            "projects/{}/regions/{name}",
            req.project
        )));
    }
    Ok(region(sim, cloud, &req.project, name))
}

fn list_regions(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let items = catalog::REGIONS
        .iter()
        .map(|(r, _)| region(sim, cloud, &req.project, r))
        .collect();
    common::list(
        sim,
        req,
        "compute#regionList",
        &format!("projects/{}/regions", req.project),
        items,
    )
}
