//! httpHealthChecks (legacy, global): insert, get, list, delete. The load balancer of a forwarding rule probes
//! its pool's instances with the check (HTTP GET port/requestPath), via the net layer.

use super::addresses::rel_of;
use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::HttpHealthCheck;
use crate::state::{Cloud, ids, under};
use serde_json::Value;

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "global/httpHealthChecks",
        api: "httpHealthChecks.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "global/httpHealthChecks",
        api: "httpHealthChecks.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "global/httpHealthChecks/{check}",
        api: "httpHealthChecks.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "global/httpHealthChecks/{check}",
        api: "httpHealthChecks.delete",
        handler: Handler::Mutate(delete),
    },
];

fn key(req: &Req, name: &str) -> String {
    format!("projects/{}/global/httpHealthChecks/{name}", req.project)
}

/// Fills GCE's defaults (port 80, path "/", 5 s interval and timeout, thresholds 2) for absent fields.
fn defaults(req: &Req, h: &mut HttpHealthCheck) {
    let absent = |f: &str| req.body.get(f).is_none_or(Value::is_null);
    if absent("port") {
        h.port = 80;
    }
    if absent("requestPath") {
        h.request_path = "/".into();
    }
    for (field, v) in [
        ("checkIntervalSec", &mut h.check_interval_sec),
        ("timeoutSec", &mut h.timeout_sec),
        ("healthyThreshold", &mut h.healthy_threshold),
        ("unhealthyThreshold", &mut h.unhealthy_threshold),
    ] {
        if absent(field) {
            *v = if field.ends_with("Sec") { 5 } else { 2 };
        }
    }
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let mut h: HttpHealthCheck = body(req)?;
    check_name(&h.name)?;
    let k = key(req, &h.name);
    if cloud.http_health_checks.contains_key(&k) {
        return Err(ApiError::already_exists(&k));
    }
    defaults(req, &mut h);
    if !(1..=65535).contains(&h.port) {
        return Err(ApiError::invalid_field(
            "resource.port",
            &h.port.to_string(),
            "Must be between 1 and 65535.",
        ));
    }
    if h.timeout_sec > h.check_interval_sec {
        return Err(ApiError::invalid_field(
            "resource.timeoutSec",
            &h.timeout_sec.to_string(),
            "Timeout sec must be less than or equal to check interval sec.",
        ));
    }
    if !h.request_path.starts_with('/') {
        return Err(ApiError::invalid_field(
            "resource.requestPath",
            &h.request_path,
            "Must start with '/'.",
        ));
    }
    h.kind = "compute#httpHealthCheck".into();
    h.id = ids::new_id();
    h.creation_timestamp = ids::now_rfc3339();
    h.self_link = sim.links.url(&k);
    let id = h.id.clone();
    cloud.http_health_checks.insert(k.clone(), h);
    Ok(OpSpec {
        scope: Scope::Global,
        op_type: "insert",
        target: k,
        target_id: id,
        on_running: Transition::Nothing,
        on_done: Transition::Nothing,
    })
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req, req.p("check"));
    cloud
        .http_health_checks
        .get(&k)
        .map(to_value)
        .unwrap_or_else(|| Err(ApiError::not_found(&k)))
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = format!("projects/{}/global/httpHealthChecks", req.project);
    let prefix = format!("{rel}/");
    let items = under(&cloud.http_health_checks, &prefix)
        .map(to_value)
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#httpHealthCheckList", &rel, items)
}

/// A check a target pool still uses cannot go ("The http_health_check resource '…' is already being used by '…'").
fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("check"));
    let h = cloud
        .http_health_checks
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    if let Some(pool) = cloud
        .target_pools
        .values()
        .find(|p| p.health_checks.iter().any(|c| rel_of(c) == k))
    {
        return Err(common::held_by(
            cloud,
            "http_health_check",
            &k,
            rel_of(&pool.self_link),
        ));
    }
    let gone = Transition::Remove {
        collection: Collection::HttpHealthChecks,
        key: k.clone(),
    };
    Ok(OpSpec {
        scope: Scope::Global,
        op_type: "delete",
        target: k,
        target_id: h.id.clone(),
        on_running: Transition::Nothing,
        on_done: gone,
    })
}
