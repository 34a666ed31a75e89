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

/// The `filter` query parameter, parsed (see `filter.rs`); an unsupported expression is a 400.
fn filter_terms(req: &Req) -> ApiResult<Vec<super::filter::Term>> {
    let expr = req.q("filter").unwrap_or_default();
    super::filter::parse(expr).map_err(|e| {
        ApiError::invalid_field(
            "filter",
            expr,
            &format!("Invalid list filter expression: {e}."),
        )
    })
}

/// `pageToken` (an offset into the filtered items) and `maxResults` (GCE's default and cap: 500).
fn page_window(req: &Req) -> ApiResult<(usize, usize)> {
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
    Ok((start, max))
}

/// A `compute#xxxList`, with `filter`, `maxResults` and `pageToken`.
pub fn list(sim: &Sim, req: &Req, kind: &str, rel: &str, items: Vec<Value>) -> ApiResult<Value> {
    let terms = filter_terms(req)?;
    let items: Vec<Value> = items
        .into_iter()
        .filter(|i| super::filter::matches(&terms, i))
        .collect();
    let (start, max) = page_window(req)?;
    let page: Vec<Value> = items.iter().skip(start).take(max).cloned().collect();
    let mut out = json!({"kind": kind, "id": rel, "selfLink": sim.links.url(rel)});
    if !page.is_empty() {
        out["items"] = Value::Array(page);
    }
    if start.saturating_add(max) < items.len() {
        out["nextPageToken"] = json!((start + max).to_string());
    }
    Ok(out)
}

/// A `compute#xxxAggregatedList` (`aggregated/{field}`, what gcloud's `list` commands call): `items` maps every
/// scope (`zones/Z`, `regions/R`, `global`) to `{field: [...]}`, or to the NO_RESULTS_ON_PAGE warning real GCE
/// sends for a scope with nothing on this page. `filter` applies to the resources; `maxResults` and `pageToken`
/// page through all scopes together, as on GCE, so a long-lived sim's hundreds of operations still list whole.
pub fn aggregated(
    sim: &Sim,
    req: &Req,
    kind: &str,
    field: &str,
    scopes: Vec<(String, Vec<Value>)>,
) -> ApiResult<Value> {
    let terms = filter_terms(req)?;
    let (start, max) = page_window(req)?;
    let mut seen = 0usize;
    let mut items = serde_json::Map::new();
    for (scope, found) in scopes {
        let found: Vec<Value> = found
            .into_iter()
            .filter(|i| super::filter::matches(&terms, i))
            .collect();
        // This scope's items are positions seen..seen+len of the whole filtered list; keep those in the window.
        let first = start.saturating_sub(seen).min(found.len());
        let last = start
            .saturating_add(max)
            .saturating_sub(seen)
            .min(found.len());
        seen += found.len();
        let page = &found[first..last];
        let entry = if page.is_empty() {
            json!({"warning": {"code": "NO_RESULTS_ON_PAGE",
                "message": format!("There are no results for scope '{scope}' on this page."),
                "data": [{"key": "scope", "value": scope}]}})
        } else {
            json!({ field: page })
        };
        items.insert(scope, entry);
    }
    let rel = format!("projects/{}/aggregated/{field}", req.project);
    let mut out = json!({"kind": kind, "id": rel, "items": items, "selfLink": sim.links.url(&rel)});
    if start.saturating_add(max) < seen {
        out["nextPageToken"] = json!((start + max).to_string());
    }
    Ok(out)
}

/// Every zone of the catalog with the items `of_zone` finds there: the scopes of a zonal aggregated list.
pub fn by_zone(
    mut of_zone: impl FnMut(&str) -> ApiResult<Vec<Value>>,
) -> ApiResult<Vec<(String, Vec<Value>)>> {
    catalog::zones()
        .map(|z| Ok((format!("zones/{z}"), of_zone(&z)?)))
        .collect()
}

/// Every region of the catalog with the items `of_region` finds there: the scopes of a regional aggregated list.
pub fn by_region(
    mut of_region: impl FnMut(&str) -> ApiResult<Vec<Value>>,
) -> ApiResult<Vec<(String, Vec<Value>)>> {
    catalog::REGIONS
        .iter()
        .map(|(r, _)| Ok((format!("regions/{r}"), of_region(r)?)))
        .collect()
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
