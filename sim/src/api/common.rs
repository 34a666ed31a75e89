//! Helpers every resource handler shares: scope checks, request ids, body decoding, lists.

use super::Req;
use super::error::{ApiError, ApiResult};
use crate::app::Sim;
use crate::state::{Cloud, catalog, ids};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Unknown zone or region in the path → 400, as GCE ("Invalid value for field 'zone': 'x'. Unknown zone.").
pub fn check_scope(_sim: &Sim, req: &Req) -> ApiResult<()> {
    let zone = req.p("zone");
    if !zone.is_empty() && catalog::region_of(zone).is_none() {
        return Err(ApiError::invalid_field("zone", zone, "Unknown zone."));
    }
    let region = req.p("region");
    if !region.is_empty() && !catalog::is_region(region) {
        return Err(ApiError::invalid_field("region", region, "Unknown region."));
    }
    Ok(())
}

/// Mutations in a zone that is down fail fast with 503, as during a real zonal outage.
pub fn check_zone_up(cloud: &Cloud, req: &Req) -> ApiResult<()> {
    let zone = req.p("zone");
    if !zone.is_empty() && cloud.zones_down.contains(zone) {
        return Err(ApiError::new(
            503,
            "backendError",
            format!(
                "The zone 'projects/{}/zones/{zone}' is currently unavailable.",
                req.project
            ),
        ));
    }
    Ok(())
}

/// The `requestId` query parameter: a UUID other than the zero UUID, as GCE requires.
pub fn request_id(req: &Req) -> ApiResult<Option<&str>> {
    let Some(rid) = req.q("requestId").filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    match uuid::Uuid::parse_str(rid) {
        Ok(u) if !u.is_nil() => Ok(Some(rid)),
        _ => Err(ApiError::invalid_field(
            "requestId",
            rid,
            "The request ID must be a valid UUID with the exception that zero UUID is not supported \
             (00000000-0000-0000-0000-000000000000).",
        )),
    }
}

/// Decodes the request body into a typed resource; a wrong type is a 400 like GCE's JSON decoding errors.
pub fn body<T: DeserializeOwned>(req: &Req) -> ApiResult<T> {
    serde_json::from_value(req.body.clone()).map_err(|e| {
        ApiError::new(
            400,
            "invalid",
            format!("Invalid JSON payload received. {e}"),
        )
    })
}

/// The resource name in a body: required, RFC 1035.
pub fn check_name(name: &str) -> ApiResult<()> {
    if name.is_empty() {
        return Err(ApiError::required("resource.name"));
    }
    if !ids::valid_name(name) {
        return Err(ApiError::invalid_field(
            "resource.name",
            name,
            &format!("Must be a match of regex '{}'", ids::NAME_REGEX),
        ));
    }
    Ok(())
}

pub fn to_value<T: serde::Serialize>(t: &T) -> ApiResult<Value> {
    serde_json::to_value(t)
        .map_err(|e| ApiError::new(500, "backendError", format!("encoding response: {e}")))
}

/// A `compute#xxxList`, with `filter` (see `filter.rs`; unsupported expressions are a 400), `maxResults` and
/// `pageToken` (an offset).
pub fn list(sim: &Sim, req: &Req, kind: &str, rel: &str, items: Vec<Value>) -> ApiResult<Value> {
    let expr = req.q("filter").unwrap_or_default();
    let terms = super::filter::parse(expr).map_err(|e| {
        ApiError::invalid_field(
            "filter",
            expr,
            &format!("Invalid list filter expression: {e}."),
        )
    })?;
    let items: Vec<Value> = items
        .into_iter()
        .filter(|i| super::filter::matches(&terms, i))
        .collect();
    let start: usize = match req.q("pageToken").filter(|t| !t.is_empty()) {
        Some(t) => t
            .parse()
            .map_err(|_| ApiError::invalid_field("pageToken", t, "Invalid page token."))?,
        None => 0,
    };
    let max = match req.q("maxResults") {
        Some(m) => m
            .parse::<usize>()
            .map_err(|_| ApiError::invalid_field("maxResults", m, "Must be an integer."))?,
        None => 500,
    }
    .clamp(1, 500);
    let page: Vec<Value> = items.iter().skip(start).take(max).cloned().collect();
    let mut out = json!({"kind": kind, "id": rel, "selfLink": sim.links.url(rel)});
    if !page.is_empty() {
        out["items"] = Value::Array(page);
    }
    if start + max < items.len() {
        out["nextPageToken"] = json!((start + max).to_string());
    }
    Ok(out)
}

/// The relative path of a referenced resource (full URL, `projects/...` or partial), or a 400 naming the field.
pub fn reference(sim: &Sim, req: &Req, field: &str, value: &str) -> ApiResult<String> {
    sim.links.rel(&req.project, value).ok_or_else(|| {
        ApiError::invalid_field(
            field,
            value,
            "Must be a URL to a valid Compute resource of the correct type.",
        )
    })
}

/// The answer to deleting `rel` while `user_rel` still uses it. If the user is itself being deleted (its delete
/// operation is in flight), GCE answers 400 `resourceNotReady`, which clients retry (deleting a target pool
/// right after its forwarding rule); otherwise 400 `resourceInUseByAnotherResource`.
pub fn held_by(cloud: &crate::state::Cloud, kind: &str, rel: &str, user_rel: &str) -> ApiError {
    let user_deleting = cloud.operations.values().any(|r| {
        !r.is_done()
            && r.op.operation_type == "delete"
            && r.op.target_link.ends_with(&format!("/{user_rel}"))
    });
    if user_deleting {
        ApiError::new(
            400,
            "resourceNotReady",
            format!("The resource '{rel}' is not ready"),
        )
    } else {
        ApiError::in_use(kind, rel, user_rel)
    }
}
