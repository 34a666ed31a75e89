//! machineTypes: get and list, from the fixed catalog (`state::catalog::machine_types`), so a plan can ask whether
//! a type exists in a zone as it would ask Compute Engine, and instances.insert refuses a type the zone lacks.

use super::common;
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::state::{Cloud, catalog};
use serde_json::{Value, json};

pub const ROUTES: &[Route] = &[
    Route {
        method: "GET",
        pattern: "zones/{zone}/machineTypes",
        api: "machineTypes.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "aggregated/machineTypes",
        api: "machineTypes.aggregatedList",
        handler: Handler::Read(aggregated),
    },
    Route {
        method: "GET",
        pattern: "zones/{zone}/machineTypes/{machineType}",
        api: "machineTypes.get",
        handler: Handler::Read(get),
    },
];

fn resource(sim: &Sim, project: &str, zone: &str, name: &str, t: catalog::MachineType) -> Value {
    json!({
        "kind": "compute#machineType",
        "id": catalog::stable_id(name).to_string(),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": name,
        "description": format!("{} vCPUs, {} GB RAM", t.cpus, f64::from(t.memory_mb) / 1024.0),
        "guestCpus": t.cpus,
        "memoryMb": t.memory_mb,
        "maximumPersistentDisks": 128,
        "maximumPersistentDisksSizeGb": "263168",
        "zone": zone,
        "isSharedCpu": name.ends_with("-micro") || name.ends_with("-small") || name.ends_with("-medium"),
        "selfLink": sim.links.url(&format!("projects/{project}/zones/{zone}/machineTypes/{name}")),
    })
}

/// GCE's answer to a zone that does not exist is a 404 for the zone; to a type the zone lacks, a 404 for the type.
fn known_zone(req: &Req) -> ApiResult<&str> {
    let zone = req.p("zone");
    match catalog::region_of(zone) {
        Some(_) => Ok(zone),
        None => Err(ApiError::not_found(&format!(
            "projects/{}/zones/{zone}",
            req.project
        ))),
    }
}

fn get(sim: &Sim, _cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let zone = known_zone(req)?;
    let name = req.p("machineType");
    let t = catalog::machine_type(name).ok_or_else(|| {
        ApiError::not_found(&format!(
            "projects/{}/zones/{zone}/machineTypes/{name}",
            req.project
        ))
    })?;
    Ok(resource(sim, &req.project, zone, name, t))
}

fn list(sim: &Sim, _cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let zone = known_zone(req)?;
    let items = catalog::machine_types()
        .map(|(name, t)| resource(sim, &req.project, zone, &name, t))
        .collect();
    common::list(
        sim,
        req,
        "compute#machineTypeList",
        &format!("projects/{}/zones/{zone}/machineTypes", req.project),
        items,
    )
}

/// Every zone's types, as gcloud's `machine-types list` asks for them.
fn aggregated(sim: &Sim, _cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let scopes = catalog::zones()
        .map(|zone| {
            let types = catalog::machine_types()
                .map(|(name, t)| resource(sim, &req.project, &zone, &name, t))
                .collect();
            (format!("zones/{zone}"), types)
        })
        .collect();
    common::aggregated(
        sim,
        req,
        "compute#machineTypeAggregatedList",
        "machineTypes",
        scopes,
    )
}

/// What instances.insert and setMachineType say of a type the zone does not offer (GCE's sentence).
pub fn check_offered(field: &str, given: &str, zone: &str) -> ApiResult<()> {
    let name = given.rsplit('/').next().unwrap_or(given);
    if catalog::machine_type(name).is_some() || catalog::is_custom_machine_type(name) {
        return Ok(());
    }
    Err(ApiError::invalid_field(
        field,
        given,
        &format!("Machine type with name '{name}' does not exist in zone '{zone}'."),
    ))
}
