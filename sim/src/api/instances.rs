//! instances: insert, get, list, aggregatedList, delete, start, stop, attachDisk, detachDisk, setMachineType.
//! Access configs are in `access_configs.rs`, metadata and labels in `instance_meta.rs`, disks in `disks.rs`.
//!
//! Lifecycle: insert stores the instance PROVISIONING; its operation turns it STAGING when RUNNING and RUNNING
//! when DONE (then the fabric boots its VM). stop: STOPPING → TERMINATED; start: STAGING → RUNNING;
//! delete: STOPPING, gone when DONE.

use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::instance_request::{find, key, op};
use super::{Handler, Req, Route, access_configs, disks, instance_build, instance_meta};
use crate::app::Sim;
use crate::ops::OpSpec;
use crate::ops::model::{Collection, Transition};
use crate::state::resources::Instance;
use crate::state::{Cloud, catalog, ids, under};
use serde_json::Value;
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
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/setTags",
        api: "instances.setTags",
        handler: Handler::Mutate(instance_meta::set_tags),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/attachDisk",
        api: "instances.attachDisk",
        handler: Handler::Mutate(attach_disk),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/detachDisk",
        api: "instances.detachDisk",
        handler: Handler::Mutate(detach_disk),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/instances/{instance}/setMachineType",
        api: "instances.setMachineType",
        handler: Handler::Mutate(set_machine_type),
    },
    Route {
        method: "GET",
        pattern: "aggregated/instances",
        api: "instances.aggregatedList",
        handler: Handler::Read(aggregated_list),
    },
];

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
    i.machine_type = instance_build::machine_type(sim, req, &i.machine_type)?;
    if i.network_interfaces.is_empty() {
        return Err(ApiError::required("resource.networkInterfaces"));
    }
    i.self_link = sim.links.url(&key);
    let mut taken = BTreeSet::new();
    for (n, nic) in i.network_interfaces.iter_mut().enumerate() {
        instance_build::network_interface(
            sim,
            cloud,
            req,
            region,
            n,
            nic,
            &i.self_link,
            &mut taken,
        )?;
    }
    instance_meta::check_metadata(&i.metadata)?;
    instance_meta::check_labels(&i.labels)?;
    instance_build::service_accounts(req, i.extra.get_mut("serviceAccounts"))?;
    // Last, because it creates boot disks: nothing may fail after it (an error must leave the cloud unchanged).
    let before = cloud.disks.clone();
    let mut devices = BTreeSet::new();
    let given = std::mem::take(&mut i.disks);
    let attached = given
        .into_iter()
        .enumerate()
        .map(|(n, d)| disks::attachment(sim, cloud, req, &i.name, n, d, &mut devices))
        .collect::<ApiResult<Vec<_>>>();
    i.disks = match attached {
        Ok(d) => d,
        Err(e) => {
            cloud.disks = before;
            return Err(e);
        }
    };
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

/// What `gcloud compute instances list` and the provider's leak and import checks call: every zone.
fn aggregated_list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let scopes = common::by_zone(|zone| {
        let prefix = format!("projects/{}/zones/{zone}/instances/", req.project);
        under(&cloud.instances, &prefix).map(to_value).collect()
    })?;
    common::aggregated(
        sim,
        req,
        "compute#instanceAggregatedList",
        "instances",
        scopes,
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

/// `attachDisk` (body: an AttachedDisk with `source`): the same rules as at insert; the disk is hot-attached (a
/// running VM sees it at its next boot, when cloud-init's `mounts` run).
fn attach_disk(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let (k, i) = find(cloud, req)?;
    let (name, id) = (i.name.clone(), i.id.clone());
    let mut devices: BTreeSet<String> = i
        .disks
        .iter()
        .filter_map(|d| d["deviceName"].as_str().map(str::to_string))
        .collect();
    let n = i
        .disks
        .iter()
        .filter_map(|d| d["index"].as_u64())
        .max()
        .map_or(0, |m| usize::try_from(m).unwrap_or(0) + 1);
    if req.body.get("source").and_then(Value::as_str).is_none() {
        return Err(ApiError::required("resource.source"));
    }
    let before = cloud.disks.clone();
    let d = disks::attachment(sim, cloud, req, &name, n, req.body.clone(), &mut devices);
    let d = match d {
        Ok(d) => d,
        Err(e) => {
            cloud.disks = before;
            return Err(e);
        }
    };
    if let Some(i) = cloud.instances.get_mut(&k) {
        i.disks.push(d);
    }
    Ok(op(
        req,
        "attachDisk",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}

/// `detachDisk?deviceName=D`: the disk survives (its `users` loses the instance). The boot disk cannot be
/// detached.
fn detach_disk(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let dev = req.q("deviceName").unwrap_or_default().to_string();
    if dev.is_empty() {
        return Err(ApiError::required("deviceName"));
    }
    let (k, i) = find(cloud, req)?;
    let Some(pos) = i.disks.iter().position(|d| d["deviceName"] == dev.as_str()) else {
        return Err(ApiError::invalid_field(
            "deviceName",
            &dev,
            "No attached disk found with that device name.",
        ));
    };
    if i.disks[pos]["boot"].as_bool().unwrap_or(false) {
        return Err(ApiError::invalid_field(
            "deviceName",
            &dev,
            "The boot disk cannot be detached.",
        ));
    }
    let removed = i.disks.remove(pos);
    let id = i.id.clone();
    if let Some(disk) = removed["source"]
        .as_str()
        .and_then(crate::state::links::rel_of)
        .and_then(|rel| cloud.disks.get_mut(rel))
    {
        disk.last_detach_timestamp = Some(ids::now_rfc3339());
    }
    Ok(op(
        req,
        "detachDisk",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}

/// `setMachineType` (body `{machineType}`, validated as at insert): only while the instance is TERMINATED.
///
/// GCE refuses it on a running instance with HTTP 400. The message is the one GCE users report for changes
/// that need a stopped instance ("Invalid resource usage: 'Instance should be in the STOPPED state.'.",
/// terraform-provider-google#7101); the reason code was not verified, `resourceNotReady` is the sim's choice
/// (clients only see a 400 they must not retry blindly).
fn set_machine_type(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let given = req
        .body
        .get("machineType")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mt = instance_build::machine_type(sim, req, &given)?;
    let (k, i) = find(cloud, req)?;
    if i.status != "TERMINATED" {
        return Err(ApiError::new(
            400,
            "resourceNotReady",
            "Invalid resource usage: 'Instance should be in the STOPPED state.'.",
        ));
    }
    i.machine_type = mt;
    let id = i.id.clone();
    Ok(op(
        req,
        "setMachineType",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}
