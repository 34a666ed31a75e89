//! images: get, getFromFamily, list and imageFamilyViews.get of the public images in the catalogue (`state::catalog::IMAGES`), so a plan
//! can ask whether a cluster's `image` exists as it would ask Compute Engine, and gcloud can describe and list them.

use super::common;
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::state::{Cloud, catalog};
use serde_json::{Value, json};

pub const ROUTES: &[Route] = &[
    Route {
        method: "GET",
        pattern: "global/images",
        api: "images.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "global/images/family/{family}",
        api: "images.getFromFamily",
        handler: Handler::Read(from_family),
    },
    Route {
        method: "GET",
        pattern: "global/images/{image}",
        api: "images.get",
        handler: Handler::Read(get),
    },
    // What gcloud's `instances create --image-family` asks, in zone `-` (any zone): the family's image as a zone
    // sees it. Not `{zone}`, which the router checks against the catalogue's zones.
    Route {
        method: "GET",
        pattern: "zones/{anyZone}/imageFamilyViews/{family}",
        api: "imageFamilyViews.get",
        handler: Handler::Read(family_view),
    },
];

fn resource(sim: &Sim, i: catalog::Image) -> Value {
    json!({
        "kind": "compute#image",
        "id": catalog::stable_id(i.name).to_string(),
        "creationTimestamp": "2026-11-18T00:00:00.000-08:00",
        "name": i.name,
        "family": i.family,
        "status": "READY",
        "sourceType": "RAW",
        "diskSizeGb": "10",
        "architecture": "X86_64",
        "selfLink": sim.links.url(&format!("projects/{}/global/images/{}", i.project, i.name)),
    })
}

fn get(sim: &Sim, _cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let name = req.p("image");
    catalog::IMAGES
        .iter()
        .find(|i| i.project == req.project && i.name == name)
        .map(|i| resource(sim, *i))
        .ok_or_else(|| {
            ApiError::not_found(&format!("projects/{}/global/images/{name}", req.project))
        })
}

/// The family's newest image; GCE's 404 names the family path.
fn from_family(sim: &Sim, _cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let family = req.p("family");
    catalog::IMAGES
        .iter()
        .find(|i| i.project == req.project && i.family == family)
        .map(|i| resource(sim, *i))
        .ok_or_else(|| {
            ApiError::not_found(&format!(
                "projects/{}/global/images/family/{family}",
                req.project
            ))
        })
}

fn family_view(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let image = from_family(sim, cloud, req)?;
    Ok(json!({"kind": "compute#imageFamilyView", "image": image}))
}

fn list(sim: &Sim, _cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let items = catalog::IMAGES
        .iter()
        .filter(|i| i.project == req.project)
        .map(|i| resource(sim, *i))
        .collect();
    common::list(
        sim,
        req,
        "compute#imageList",
        &format!("projects/{}/global/images", req.project),
        items,
    )
}

/// What instances.insert says of a boot disk whose `sourceImage` names no image (GCE's 404 for the reference).
pub fn check_exists(given: &str, project: &str) -> ApiResult<()> {
    if catalog::image_named(given, project).is_some() {
        return Ok(());
    }
    let rel = given
        .split_once("/projects/")
        .map_or(given.to_string(), |(_, r)| format!("projects/{r}"));
    Err(ApiError::not_found(&rel))
}
