//! disks (zonal persistent disks): insert, get, list, aggregatedList, delete, resize; and how instances attach them
//! (`attachment`, shared by instances.insert and instances.attachDisk).
//!
//! A disk is CREATING until its insert operation is DONE, then READY; DELETING until its delete is DONE.
//! `users` is derived when shown from the instances whose `disks[]` name it, so it follows instance deletes
//! (including out-of-band ones). One READ_WRITE attachment at a time; a disk with users cannot be deleted.
//! Each disk has a host directory (`state_dir/disks/<zone>/<name>-<id>/`), made and removed by the fabric.

use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route, instance_meta};
use crate::app::Sim;
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::Disk;
use crate::state::{Cloud, ids, links, under};
use serde_json::{Value, json};
use std::collections::BTreeSet;

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "zones/{zone}/disks",
        api: "disks.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "zones/{zone}/disks",
        api: "disks.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "zones/{zone}/disks/{disk}",
        api: "disks.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "zones/{zone}/disks/{disk}",
        api: "disks.delete",
        handler: Handler::Mutate(delete),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/disks/{disk}/resize",
        api: "disks.resize",
        handler: Handler::Mutate(resize),
    },
    Route {
        method: "GET",
        pattern: "aggregated/disks",
        api: "disks.aggregatedList",
        handler: Handler::Read(aggregated_list),
    },
];

/// Disk types the sim knows (GCE's zonal PD types).
pub const DISK_TYPES: &[&str] = &["pd-standard", "pd-balanced", "pd-ssd"];

fn key(req: &Req, name: &str) -> String {
    format!(
        "projects/{}/zones/{}/disks/{name}",
        req.project,
        req.p("zone")
    )
}

/// The disk as GCE shows it, with derived `users`.
pub fn render(cloud: &Cloud, d: &Disk) -> ApiResult<Value> {
    let mut d = d.clone();
    d.users = cloud
        .disk_users(&d.self_link)
        .into_iter()
        .map(|(u, _)| u)
        .collect();
    to_value(&d)
}

/// `zones/Z/diskTypes/T` (full or partial URL, in the request's zone) → full URL. Unknown type → 404 as GCE.
pub fn disk_type(sim: &Sim, req: &Req, field: &str, given: &str) -> ApiResult<String> {
    let rel = common::reference(sim, req, field, given)?;
    let ok = links::scope_of(&rel, "zones") == Some(req.p("zone")) && rel.contains("/diskTypes/");
    if !ok {
        return Err(ApiError::invalid_field(
            field,
            given,
            "Must be a URL to a valid Compute resource of the correct type.",
        ));
    }
    if !DISK_TYPES.contains(&links::name_of(&rel)) {
        return Err(ApiError::not_found(&rel));
    }
    Ok(sim.links.url(&rel))
}

/// GCE's default size of a blank disk: 500 GB for pd-standard, 100 GB for the SSD-backed types.
fn default_size(type_url: &str) -> &'static str {
    if links::name_of(type_url) == "pd-standard" {
        "500"
    } else {
        "100"
    }
}

fn check_size(field: &str, size: &str) -> ApiResult<()> {
    match size.parse::<i64>() {
        Ok(n) if (1..=65536).contains(&n) => Ok(()),
        _ => Err(ApiError::invalid_field(
            field,
            size,
            "Must be an integer between 1 and 65536.",
        )),
    }
}

/// A new disk record (not yet stored). `status` is the caller's: CREATING for disks.insert, READY for a disk
/// created with its instance.
#[allow(clippy::too_many_arguments)]
fn new_disk(
    sim: &Sim,
    req: &Req,
    mut d: Disk,
    type_field: &str,
    size_field: &str,
    status: &str,
) -> ApiResult<(String, Disk)> {
    check_name(&d.name)?;
    let k = key(req, &d.name);
    let given_type = if d.type_.is_empty() {
        format!("zones/{}/diskTypes/pd-standard", req.p("zone"))
    } else {
        d.type_.clone()
    };
    d.type_ = disk_type(sim, req, type_field, &given_type)?;
    if d.size_gb.is_empty() {
        d.size_gb = default_size(&d.type_).to_string();
    }
    check_size(size_field, &d.size_gb)?;
    instance_meta::check_labels(&d.labels)?;
    d.kind = "compute#disk".into();
    d.id = ids::new_id();
    d.creation_timestamp = ids::now_rfc3339();
    d.status = status.into();
    d.zone = sim
        .links
        .url(&format!("projects/{}/zones/{}", req.project, req.p("zone")));
    d.self_link = sim.links.url(&k);
    d.users.clear();
    d.label_fingerprint = ids::new_fingerprint();
    d.extra
        .entry("physicalBlockSizeBytes")
        .or_insert(json!("4096"));
    Ok((k, d))
}

fn op(req: &Req, op_type: &'static str, key: String, id: String, on_done: Transition) -> OpSpec {
    OpSpec {
        scope: Scope::Zone(req.p("zone").to_string()),
        op_type,
        target: key,
        target_id: id,
        on_running: Transition::Nothing,
        on_done,
    }
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let given: Disk = body(req)?;
    let (k, d) = new_disk(
        sim,
        req,
        given,
        "resource.type",
        "resource.sizeGb",
        "CREATING",
    )?;
    if cloud.disks.contains_key(&k) {
        return Err(ApiError::already_exists(&k));
    }
    let id = d.id.clone();
    cloud.disks.insert(k.clone(), d);
    let ready = Transition::DiskStatus {
        key: k.clone(),
        status: "READY".into(),
    };
    Ok(op(req, "insert", k, id, ready))
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req, req.p("disk"));
    match cloud.disks.get(&k) {
        Some(d) => render(cloud, d),
        None => Err(ApiError::not_found(&k)),
    }
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = format!("projects/{}/zones/{}/disks", req.project, req.p("zone"));
    let prefix = format!("{rel}/");
    let items = under(&cloud.disks, &prefix)
        .map(|d| render(cloud, d))
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#diskList", &rel, items)
}

/// What `gcloud compute disks list` calls: every zone.
fn aggregated_list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let scopes = common::by_zone(|zone| {
        let prefix = format!("projects/{}/zones/{zone}/disks/", req.project);
        under(&cloud.disks, &prefix)
            .map(|d| render(cloud, d))
            .collect()
    })?;
    common::aggregated(sim, req, "compute#diskAggregatedList", "disks", scopes)
}

fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("disk"));
    let Some(d) = cloud.disks.get(&k) else {
        return Err(ApiError::not_found(&k));
    };
    if let Some((user, _)) = cloud.disk_users(&d.self_link).first() {
        let user_rel = links::rel_of(user).unwrap_or(user);
        return Err(common::held_by(cloud, "disk", &k, user_rel));
    }
    let d = cloud.disks.get_mut(&k).expect("checked above");
    d.status = "DELETING".into();
    let id = d.id.clone();
    let gone = Transition::Remove {
        collection: Collection::Disks,
        key: k.clone(),
    };
    Ok(op(req, "delete", k, id, gone))
}

/// disks.resize: a disk only grows, attached or not (the guest grows its filesystem itself). GCE refuses a
/// size that is not larger with the message gcloud shows: "New disk size 'N' GiB must be larger than existing
/// size 'M' GiB."
fn resize(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("disk"));
    let Some(d) = cloud.disks.get(&k) else {
        return Err(ApiError::not_found(&k));
    };
    let given: Value = body(req)?;
    let size = match given.get("sizeGb") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err(ApiError::required("sizeGb")),
    };
    check_size("sizeGb", &size)?;
    let (new, old) = (
        size.parse::<i64>().unwrap_or_default(),
        d.size_gb.parse::<i64>().unwrap_or_default(),
    );
    if new <= old {
        return Err(ApiError::invalid_field(
            "sizeGb",
            &size,
            &format!("New disk size '{new}' GiB must be larger than existing size '{old}' GiB."),
        ));
    }
    let id = d.id.clone();
    let grown = Transition::DiskSize {
        key: k.clone(),
        size_gb: size,
    };
    Ok(op(req, "resize", k, id, grown))
}

/// Validates one `disks[]` entry of an instance (insert body or attachDisk body) and returns it as GCE shows
/// it. An entry with `source` attaches an existing disk of the instance's zone (404 if it does not exist, 400
/// `resourceInUseByAnotherResource` if it would get a second READ_WRITE attachment, or a READ_ONLY one next to
/// a writer); an entry without creates a disk from `initializeParams` (named `diskName`, else the instance's
/// name for index 0 and `<instance>-<n>` after), stored in `cloud` READY. `devices` holds the device names the
/// instance already uses.
pub fn attachment(
    sim: &Sim,
    cloud: &mut Cloud,
    req: &Req,
    instance: &str,
    n: usize,
    mut d: Value,
    devices: &mut BTreeSet<String>,
) -> ApiResult<Value> {
    let field = format!("resource.disks[{n}]");
    let Some(obj) = d.as_object_mut() else {
        return Err(ApiError::invalid_field(
            &field,
            &d.to_string(),
            "Must be an object.",
        ));
    };
    let mode = obj
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("READ_WRITE")
        .to_string();
    if mode != "READ_WRITE" && mode != "READ_ONLY" {
        return Err(ApiError::invalid_field(
            &format!("{field}.mode"),
            &mode,
            "Must be READ_WRITE or READ_ONLY.",
        ));
    }
    let now = ids::now_rfc3339();
    let ((rel, size), auto_delete_default) = match obj.get("source").and_then(Value::as_str) {
        Some(src) => (
            attach_existing(sim, cloud, req, &field, src, &mode, now)?,
            false,
        ),
        None => {
            let params = obj.remove("initializeParams").unwrap_or(json!({}));
            let name = params["diskName"].as_str().map_or_else(
                || {
                    if n == 0 {
                        instance.to_string()
                    } else {
                        format!("{instance}-{n}")
                    }
                },
                str::to_string,
            );
            (
                create_attached(sim, cloud, req, &field, name, &params, now)?,
                true,
            )
        }
    };
    let dev = obj
        .get("deviceName")
        .and_then(Value::as_str)
        .map_or_else(|| format!("persistent-disk-{n}"), str::to_string);
    if !devices.insert(dev.clone()) {
        return Err(ApiError::invalid_field(
            &format!("{field}.deviceName"),
            &dev,
            "The device name is already in use by another disk of the instance.",
        ));
    }
    obj.insert("kind".into(), json!("compute#attachedDisk"));
    obj.insert("index".into(), json!(n));
    obj.insert("deviceName".into(), json!(dev));
    obj.insert("source".into(), json!(sim.links.url(&rel)));
    obj.insert("mode".into(), json!(mode));
    obj.insert("diskSizeGb".into(), json!(size));
    obj.entry("boot").or_insert(json!(n == 0));
    obj.entry("autoDelete")
        .or_insert(json!(auto_delete_default));
    obj.entry("type").or_insert(json!("PERSISTENT"));
    obj.entry("interface").or_insert(json!("SCSI"));
    Ok(d)
}

/// An existing disk of the instance's zone, attached in `mode`: 404 if it does not exist, 400
/// `resourceInUseByAnotherResource` if it would get a second READ_WRITE attachment, or a READ_ONLY one next to a
/// writer. Returns its relative name and size.
fn attach_existing(
    sim: &Sim,
    cloud: &mut Cloud,
    req: &Req,
    field: &str,
    src: &str,
    mode: &str,
    now: String,
) -> ApiResult<(String, String)> {
    let f = format!("{field}.source");
    let rel = common::reference(sim, req, &f, src)?;
    if !rel.contains("/disks/") {
        return Err(ApiError::invalid_field(
            &f,
            src,
            "Must be a URL to a valid Compute resource of the correct type.",
        ));
    }
    if links::scope_of(&rel, "zones") != Some(req.p("zone")) {
        return Err(ApiError::invalid_field(
            &f,
            src,
            "Disk must be in the same zone as the instance.",
        ));
    }
    let Some(disk) = cloud.disks.get(&rel) else {
        return Err(ApiError::not_found(&rel));
    };
    let users = cloud.disk_users(&disk.self_link);
    let conflict = users
        .iter()
        .find(|(_, m)| mode == "READ_WRITE" || m == "READ_WRITE");
    if let Some((user, _)) = conflict {
        return Err(ApiError::in_use(
            "disk",
            &rel,
            links::rel_of(user).unwrap_or(user),
        ));
    }
    let size = disk.size_gb.clone();
    if let Some(disk) = cloud.disks.get_mut(&rel) {
        disk.last_attach_timestamp = Some(now);
    }
    Ok((rel, size))
}

/// A new disk named `name` from an entry's `initializeParams`, stored READY. Returns its relative name and size.
fn create_attached(
    sim: &Sim,
    cloud: &mut Cloud,
    req: &Req,
    field: &str,
    name: String,
    params: &Value,
    now: String,
) -> ApiResult<(String, String)> {
    let mut given = Disk {
        name,
        type_: params["diskType"].as_str().unwrap_or_default().to_string(),
        size_gb: match &params["diskSizeGb"] {
            Value::String(s) => s.clone(),
            Value::Number(x) => x.to_string(),
            _ => "10".into(),
        },
        ..Disk::default()
    };
    if let Some(labels) = params.get("labels") {
        given.labels = serde_json::from_value(labels.clone()).unwrap_or_default();
    }
    if let Some(img) = params.get("sourceImage") {
        // GCE answers a boot disk from an image nobody publishes with the image's 404.
        super::images::check_exists(img.as_str().unwrap_or_default(), &req.project)?;
        given.extra.insert("sourceImage".into(), img.clone());
    }
    let (rel, mut disk) = new_disk(
        sim,
        req,
        given,
        &format!("{field}.initializeParams.diskType"),
        &format!("{field}.initializeParams.diskSizeGb"),
        "READY",
    )?;
    if cloud.disks.contains_key(&rel) {
        return Err(ApiError::already_exists(&rel));
    }
    disk.last_attach_timestamp = Some(now);
    let size = disk.size_gb.clone();
    cloud.disks.insert(rel.clone(), disk);
    Ok((rel, size))
}
