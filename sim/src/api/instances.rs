//! instances: insert, get, list, aggregatedList, delete, start, stop. Access configs are in
//! `access_configs.rs`, metadata and labels in `instance_meta.rs`.
//!
//! Lifecycle: insert stores the instance PROVISIONING; its operation turns it STAGING when RUNNING and RUNNING
//! when DONE (then the fabric boots its VM). stop: STOPPING → TERMINATED; start: STAGING → RUNNING;
//! delete: STOPPING, gone when DONE.

use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route, access_configs, instance_meta};
use crate::app::Sim;
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::{Instance, NetworkInterface};
use crate::state::{Cloud, IpRange, catalog, ids, under};
use serde_json::{Value, json};
use std::collections::BTreeSet;

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances",
        api: "instances.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "zones/{zone}/instances",
        api: "instances.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "zones/{zone}/instances/{instance}",
        api: "instances.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "zones/{zone}/instances/{instance}",
        api: "instances.delete",
        handler: Handler::Mutate(delete),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/start",
        api: "instances.start",
        handler: Handler::Mutate(start),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/stop",
        api: "instances.stop",
        handler: Handler::Mutate(stop),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/addAccessConfig",
        api: "instances.addAccessConfig",
        handler: Handler::Mutate(access_configs::add),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/deleteAccessConfig",
        api: "instances.deleteAccessConfig",
        handler: Handler::Mutate(access_configs::delete),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/setMetadata",
        api: "instances.setMetadata",
        handler: Handler::Mutate(instance_meta::set_metadata),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/setLabels",
        api: "instances.setLabels",
        handler: Handler::Mutate(instance_meta::set_labels),
    },
    Route {
        method: "GET",
        pattern: "aggregated/instances",
        api: "instances.aggregatedList",
        handler: Handler::Read(aggregated_list),
    },
];

/// Relative path of the instance a request names.
pub fn key(req: &Req) -> String {
    format!(
        "projects/{}/zones/{}/instances/{}",
        req.project,
        req.p("zone"),
        req.p("instance")
    )
}

/// The instance a request names, or 404.
pub fn find<'a>(cloud: &'a mut Cloud, req: &Req) -> ApiResult<(String, &'a mut Instance)> {
    let k = key(req);
    match cloud.instances.get_mut(&k) {
        Some(i) => Ok((k, i)),
        None => Err(ApiError::not_found(&k)),
    }
}

/// The operation every instance method returns: zonal, targeting the instance.
pub fn op(
    req: &Req,
    op_type: &'static str,
    key: String,
    id: String,
    on_running: Transition,
    on_done: Transition,
) -> OpSpec {
    OpSpec {
        scope: Scope::Zone(req.p("zone").to_string()),
        op_type,
        target: key,
        target_id: id,
        on_running,
        on_done,
    }
}

fn status(key: &str, s: &str) -> Transition {
    Transition::InstanceStatus {
        key: key.to_string(),
        status: s.to_string(),
    }
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let zone = req.p("zone");
    let region = catalog::region_of(zone).unwrap_or_default();
    let mut i: Instance = body(req)?;
    check_name(&i.name)?;
    let key = format!("projects/{}/zones/{zone}/instances/{}", req.project, i.name);
    if cloud.instances.contains_key(&key) {
        return Err(ApiError::already_exists(&key));
    }
    i.machine_type = machine_type(sim, req, &i.machine_type)?;
    if i.network_interfaces.is_empty() {
        return Err(ApiError::required("resource.networkInterfaces"));
    }
    i.self_link = sim.links.url(&key);
    let mut taken = BTreeSet::new();
    for (n, nic) in i.network_interfaces.iter_mut().enumerate() {
        network_interface(sim, cloud, req, region, n, nic, &i.self_link, &mut taken)?;
    }
    i.disks = disks(sim, req, &i.name, std::mem::take(&mut i.disks));
    instance_meta::check_metadata(&i.metadata)?;
    instance_meta::check_labels(&i.labels)?;
    i.kind = "compute#instance".into();
    i.id = ids::new_id();
    i.creation_timestamp = ids::now_rfc3339();
    i.status = "PROVISIONING".into();
    i.zone = sim
        .links
        .url(&format!("projects/{}/zones/{zone}", req.project));
    i.metadata.kind = "compute#metadata".into();
    i.metadata.fingerprint = ids::new_fingerprint();
    i.label_fingerprint = ids::new_fingerprint();
    i.tags.fingerprint = ids::new_fingerprint();
    let id = i.id.clone();
    cloud.instances.insert(key.clone(), i);
    Ok(op(
        req,
        "insert",
        key.clone(),
        id,
        status(&key, "STAGING"),
        status(&key, "RUNNING"),
    ))
}

/// `zones/z/machineTypes/t` (full or partial URL) → full URL in the instance's own zone.
fn machine_type(sim: &Sim, req: &Req, given: &str) -> ApiResult<String> {
    if given.is_empty() {
        return Err(ApiError::required("resource.machineType"));
    }
    let rel = common::reference(sim, req, "resource.machineType", given)?;
    let ok = crate::state::links::scope_of(&rel, "zones") == Some(req.p("zone"))
        && rel.contains("/machineTypes/");
    if !ok {
        return Err(ApiError::invalid_field(
            "resource.machineType",
            given,
            "Must be a URL to a valid Compute resource of the correct type.",
        ));
    }
    Ok(sim.links.url(&rel))
}

#[allow(clippy::too_many_arguments)]
fn network_interface(
    sim: &Sim,
    cloud: &Cloud,
    req: &Req,
    region: &str,
    n: usize,
    nic: &mut NetworkInterface,
    holder: &str,
    taken: &mut BTreeSet<String>,
) -> ApiResult<()> {
    let field = format!("resource.networkInterfaces[{n}]");
    nic.kind = "compute#networkInterface".into();
    nic.name = format!("nic{n}");
    let network = if nic.network.is_empty() {
        "global/networks/default"
    } else {
        nic.network.as_str()
    };
    nic.network = sim.links.url(&common::reference(
        sim,
        req,
        &format!("{field}.network"),
        network,
    )?);
    let sub = nic
        .subnetwork
        .clone()
        .unwrap_or_else(|| format!("regions/{region}/subnetworks/default"));
    nic.subnetwork = Some(sim.links.url(&common::reference(
        sim,
        req,
        &format!("{field}.subnetwork"),
        &sub,
    )?));
    let ip = match nic.network_ip.take() {
        Some(ip) => {
            if !IpRange::Internal.contains(&ip) {
                return Err(ApiError::invalid_field(
                    &format!("{field}.networkIP"),
                    &ip,
                    "Not in the subnetwork's range.",
                ));
            }
            // A reserved INTERNAL address of the region is meant to be used this way (a static internal IP);
            // any other holder, or an instance already on the address, is a conflict.
            let reserved_for_it = cloud.addresses.values().any(|a| {
                a.address == ip
                    && a.address_type == "INTERNAL"
                    && crate::state::links::name_of(&a.region) == region
            }) && cloud.users_of_ip(region, &ip).is_empty();
            if (cloud.ips_in_use().contains(&ip) && !reserved_for_it) || taken.contains(&ip) {
                return Err(ApiError::new(
                    400,
                    "invalid",
                    format!("IP '{ip}' is already being used by another resource."),
                ));
            }
            ip
        }
        None => cloud.allocate_ip(IpRange::Internal, taken).ok_or_else(|| {
            ApiError::new(400, "invalid", "The subnetwork has no free addresses.")
        })?,
    };
    taken.insert(ip.clone());
    nic.network_ip = Some(ip);
    nic.fingerprint = ids::new_fingerprint();
    nic.stack_type.get_or_insert_with(|| "IPV4_ONLY".into());
    if nic.access_configs.len() > 1 {
        return Err(access_configs::at_most_one());
    }
    for (a, ac) in nic.access_configs.iter_mut().enumerate() {
        let f = format!("{field}.accessConfigs[{a}].natIP");
        access_configs::resolve(cloud, region, ac, holder, &f, taken)?;
    }
    Ok(())
}

/// Disks as GCE shows them: `initializeParams` is input only; the rest gets server defaults.
fn disks(sim: &Sim, req: &Req, instance: &str, given: Vec<Value>) -> Vec<Value> {
    given
        .into_iter()
        .enumerate()
        .map(|(n, mut d)| {
            let size = d["initializeParams"]["diskSizeGb"].clone();
            let dev = d["deviceName"]
                .as_str()
                .map_or_else(|| format!("persistent-disk-{n}"), str::to_string);
            let disk_name = d["initializeParams"]["diskName"].as_str().map_or_else(
                || {
                    if n == 0 {
                        instance.to_string()
                    } else {
                        format!("{instance}-{n}")
                    }
                },
                str::to_string,
            );
            if let Some(obj) = d.as_object_mut() {
                obj.remove("initializeParams");
                obj.insert("kind".into(), json!("compute#attachedDisk"));
                obj.insert("index".into(), json!(n));
                obj.insert("deviceName".into(), json!(dev));
                obj.entry("boot").or_insert(json!(n == 0));
                obj.entry("autoDelete").or_insert(json!(true));
                obj.entry("type").or_insert(json!("PERSISTENT"));
                obj.entry("mode").or_insert(json!("READ_WRITE"));
                obj.entry("interface").or_insert(json!("SCSI"));
                let src = format!(
                    "projects/{}/zones/{}/disks/{disk_name}",
                    req.project,
                    req.p("zone")
                );
                obj.entry("source").or_insert(json!(sim.links.url(&src)));
                if !size.is_null() {
                    obj.insert(
                        "diskSizeGb".into(),
                        json!(size.as_str().map_or(size.to_string(), str::to_string)),
                    );
                }
            }
            d
        })
        .collect()
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req);
    cloud
        .instances
        .get(&k)
        .map(to_value)
        .unwrap_or_else(|| Err(ApiError::not_found(&k)))
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = format!("projects/{}/zones/{}/instances", req.project, req.p("zone"));
    let prefix = format!("{rel}/");
    let items = under(&cloud.instances, &prefix)
        .map(to_value)
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#instanceList", &rel, items)
}

/// Every zone appears: with `instances`, or with the NO_RESULTS_ON_PAGE warning real GCE sends for empty scopes.
fn aggregated_list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let mut items = serde_json::Map::new();
    for zone in catalog::zones() {
        let prefix = format!("projects/{}/zones/{zone}/instances/", req.project);
        let found = under(&cloud.instances, &prefix)
            .map(to_value)
            .collect::<ApiResult<Vec<_>>>()?;
        let scope = format!("zones/{zone}");
        let entry = if found.is_empty() {
            json!({"warning": {"code": "NO_RESULTS_ON_PAGE",
                "message": format!("There are no results for scope '{scope}' on this page."),
                "data": [{"key": "scope", "value": scope}]}})
        } else {
            json!({ "instances": found })
        };
        items.insert(scope, entry);
    }
    let rel = format!("projects/{}/aggregated/instances", req.project);
    Ok(
        json!({"kind": "compute#instanceAggregatedList", "id": rel, "items": items, "selfLink": sim.links.url(&rel)}),
    )
}

fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let (k, i) = find(cloud, req)?;
    if i.deletion_protection {
        return Err(ApiError::new(
            400,
            "resourceInUseByAnotherResource",
            "Invalid resource usage: 'Resource cannot be deleted if it's protected against deletion.'.",
        ));
    }
    i.status = "STOPPING".into();
    let id = i.id.clone();
    let gone = Transition::Remove {
        collection: Collection::Instances,
        key: k.clone(),
    };
    Ok(op(req, "delete", k, id, Transition::Nothing, gone))
}

fn not_ready(k: &str) -> ApiError {
    ApiError::new(
        400,
        "resourceNotReady",
        format!("The resource '{k}' is not ready"),
    )
}

fn start(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let (k, i) = find(cloud, req)?;
    let id = i.id.clone();
    match i.status.as_str() {
        // Starting a running instance is accepted and does nothing, as on GCE.
        "RUNNING" | "STAGING" => Ok(op(
            req,
            "start",
            k,
            id,
            Transition::Nothing,
            Transition::Nothing,
        )),
        "TERMINATED" | "SUSPENDED" => Ok(op(
            req,
            "start",
            k.clone(),
            id,
            status(&k, "STAGING"),
            status(&k, "RUNNING"),
        )),
        _ => Err(not_ready(&k)),
    }
}

fn stop(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let (k, i) = find(cloud, req)?;
    let id = i.id.clone();
    match i.status.as_str() {
        "TERMINATED" => Ok(op(
            req,
            "stop",
            k,
            id,
            Transition::Nothing,
            Transition::Nothing,
        )),
        "RUNNING" | "STAGING" | "SUSPENDED" => {
            i.status = "STOPPING".into();
            Ok(op(
                req,
                "stop",
                k.clone(),
                id,
                Transition::Nothing,
                status(&k, "TERMINATED"),
            ))
        }
        _ => Err(not_ready(&k)),
    }
}
