//! The Compute Engine v1 REST surface: a route table (one entry per API method, declared by each resource's
//! file) and the one pipeline every call goes through:
//! log → bearer token → route → request failpoints → zone outage → requestId → handler → operation.

pub mod access_configs;
pub mod addresses;
pub mod batch;
pub mod common;
pub mod disks;
pub mod error;
pub mod filter;
pub mod firewalls;
pub mod forwarding_rules;
pub mod health_checks;
pub mod images;
pub mod instance_build;
pub mod instance_meta;
pub mod instance_request;
pub mod instances;
pub mod machine_types;
pub mod operations;
pub mod projects;
pub mod subnetworks;
pub mod target_pools;
pub mod zones;

use crate::app::Sim;
use crate::faults::{Effect, RequestFacts};
use crate::ops::{self, OpSpec, Planned};
use crate::reqlog::Entry;
use crate::state::{Cloud, ids};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use error::{ApiError, ApiResult};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A matched route, the project and the captured path parameters; or why nothing matched.
type Routed = Result<(&'static Route, String, Vec<(&'static str, String)>), StatusCode>;

pub type ReadFn = fn(&Sim, &Cloud, &Req) -> ApiResult<Value>;
pub type MutateFn = fn(&Sim, &mut Cloud, &Req) -> ApiResult<OpSpec>;
pub type WriteFn = fn(&Sim, &mut Cloud, &Req) -> ApiResult<Option<Value>>;

pub enum Handler {
    /// Answers from the state (GET, and POST getHealth).
    Read(ReadFn),
    /// Validates, changes the state and returns the operation to create.
    Mutate(MutateFn),
    /// Changes the state without an operation (operations.delete); `None` = empty 204.
    Write(WriteFn),
    /// `operations/{op}/wait`: long-polls.
    Wait,
}

pub struct Route {
    pub method: &'static str,
    /// After `/compute/v1/projects/{project}/`; `{x}` captures one segment.
    pub pattern: &'static str,
    /// API method, e.g. `instances.insert`: the request log key, failpoint `api` and operation kind.
    pub api: &'static str,
    pub handler: Handler,
}

/// One parsed request.
pub struct Req {
    pub api: &'static str,
    pub project: String,
    params: Vec<(&'static str, String)>,
    pub query: BTreeMap<String, String>,
    pub body: Value,
}

impl Req {
    /// A path parameter; the route table guarantees it exists.
    pub fn p(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(k, _)| *k == name)
            .map_or("", |(_, v)| v.as_str())
    }

    pub fn q(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    /// For tests of handlers: a request with the given parts.
    pub fn new(
        api: &'static str,
        project: &str,
        params: Vec<(&'static str, String)>,
        body: Value,
    ) -> Self {
        Req {
            api,
            project: project.to_string(),
            params,
            query: BTreeMap::new(),
            body,
        }
    }
}

fn routes() -> impl Iterator<Item = &'static Route> {
    [
        instances::ROUTES,
        disks::ROUTES,
        addresses::ROUTES,
        subnetworks::ROUTES,
        firewalls::ROUTES,
        health_checks::ROUTES,
        target_pools::ROUTES,
        forwarding_rules::ROUTES,
        zones::ROUTES,
        machine_types::ROUTES,
        images::ROUTES,
        projects::ROUTES,
        operations::ROUTES,
    ]
    .into_iter()
    .flatten()
}

/// Every API method the sim serves (`instances.insert`, ...), for coverage checks.
pub fn route_apis() -> Vec<&'static str> {
    routes().map(|r| r.api).collect()
}

/// Matches `path` (after the project) against a pattern, capturing `{x}` segments.
fn capture(pattern: &'static str, segs: &[&str]) -> Option<Vec<(&'static str, String)>> {
    // The project itself (`projects.get`) has no segments after it.
    let pat: Vec<&'static str> = match pattern {
        "" => Vec::new(),
        _ => pattern.split('/').collect(),
    };
    if pat.len() != segs.len() {
        return None;
    }
    let mut out = Vec::new();
    for (p, s) in pat.into_iter().zip(segs) {
        match p.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(name) if !s.is_empty() => out.push((name, s.to_string())),
            Some(_) => return None,
            None if p == *s => {}
            None => return None,
        }
    }
    Some(out)
}

/// Finds the route for a request path; `Err` distinguishes "no such path" from "wrong method".
fn find_route(method: &Method, path: &str) -> Routed {
    let rest = path
        .strip_prefix("/compute/v1/projects/")
        .ok_or(StatusCode::NOT_FOUND)?;
    let segs: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    let (project, tail) = segs.split_first().ok_or(StatusCode::NOT_FOUND)?;
    let mut wrong_method = false;
    for r in routes() {
        if let Some(params) = capture(r.pattern, tail) {
            if r.method == method.as_str() {
                return Ok((r, project.to_string(), params));
            }
            wrong_method = true;
        }
    }
    Err(if wrong_method {
        StatusCode::METHOD_NOT_ALLOWED
    } else {
        StatusCode::NOT_FOUND
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query string → map. Unknown parameters (`$alt`, `$apiVersion`, ...) are kept and simply never read.
pub fn parse_query(q: Option<&str>) -> BTreeMap<String, String> {
    q.unwrap_or_default()
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// The bearer token of a request, trimmed.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// Whether `token` is the sim's credentials: the one `--require-token` names, or any without it.
pub fn accepted(sim: &Sim, token: &str) -> bool {
    match &sim.cfg.require_token {
        Some(want) => token == want,
        None => !token.is_empty(),
    }
}

fn authorized(sim: &Sim, headers: &HeaderMap) -> bool {
    bearer_token(headers).is_some_and(|t| accepted(sim, t))
}

/// The whole request pipeline for `/compute/v1/...`.
pub async fn handle(
    sim: Arc<Sim>,
    method: Method,
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = std::time::Instant::now();
    let routed = find_route(&method, &path);
    let api = routed.as_ref().map_or("unknown", |(r, _, _)| r.api);
    let result = serve(
        &sim,
        &method,
        &path,
        query.as_deref(),
        &headers,
        &body,
        routed,
    )
    .await;
    let response = match result {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    };
    let entry = Entry {
        seq: 0,
        at: ids::now_rfc3339(),
        method: method.to_string(),
        path: path.clone(),
        api: format!("compute.{api}"),
        status: response.status().as_u16(),
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        user_agent: headers
            .get(axum::http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    tracing::debug!(method = %entry.method, path = %entry.path, status = entry.status, "api call");
    crate::provider_methods::note(&entry.api, entry.user_agent.as_deref());
    sim.reqlog().record(entry);
    response
}

async fn serve(
    sim: &Arc<Sim>,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
    routed: Routed,
) -> ApiResult<Response> {
    if !authorized(sim, headers) {
        return Err(ApiError::unauthenticated());
    }
    let (route, project, params) = match routed {
        Ok(r) => r,
        Err(StatusCode::METHOD_NOT_ALLOWED) => {
            return Err(ApiError::new(
                405,
                "httpMethodNotAllowed",
                format!("HTTP method {method} is not supported by this URL"),
            ));
        }
        Err(_) => {
            return Err(ApiError::new(
                404,
                "notFound",
                format!("The requested URL {path} was not found on this server."),
            ));
        }
    };
    let effects = sim.faults().on_request(&RequestFacts {
        method: method.as_str(),
        api: route.api,
        path,
    });
    for e in effects {
        match e {
            Effect::Delay { ms } => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
            Effect::Status { status } => return Err(ApiError::injected(status)),
            Effect::Stall => {
                sim.hold_until_faults_cleared().await;
                return Err(ApiError::injected(503));
            }
            Effect::Fail { .. } => {}
        }
    }
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Default::default())
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::new(
                400,
                "parseError",
                format!("Invalid JSON payload received. {e}"),
            )
        })?
    };
    let req = Req {
        api: route.api,
        project,
        params,
        query: parse_query(query),
        body,
    };
    common::check_scope(sim, &req)?;
    match &route.handler {
        Handler::Read(f) => {
            let cloud = sim.cloud();
            Ok(axum::Json(f(sim, &cloud, &req)?).into_response())
        }
        Handler::Write(f) => {
            let mut cloud = sim.cloud();
            let out = f(sim, &mut cloud, &req)?;
            sim.commit(&cloud);
            Ok(match out {
                Some(v) => axum::Json(v).into_response(),
                None => StatusCode::NO_CONTENT.into_response(),
            })
        }
        Handler::Mutate(f) => mutate(sim, *f, &req).map(|v| axum::Json(v).into_response()),
        Handler::Wait => operations::wait(sim, &req)
            .await
            .map(|v| axum::Json(v).into_response()),
    }
}

/// A mutation: requestId replay, zone outage, operation failpoints, then the handler and a new operation.
fn mutate(sim: &Arc<Sim>, f: MutateFn, req: &Req) -> ApiResult<Value> {
    let request_id = common::request_id(req)?;
    let mut cloud = sim.cloud();
    if let Some(rid) = request_id {
        // Same requestId again: GCE ignores the repeat and answers with the first request's operation.
        if let Some(rec) = cloud
            .request_ids
            .get(&format!("{}/{rid}", req.project))
            .and_then(|k| cloud.operations.get(k))
        {
            return Ok(serde_json::to_value(&rec.op).unwrap_or_default());
        }
    }
    common::check_zone_up(&cloud, req)?;
    let plan = Planned::from_effects(sim.faults().on_operation(req.api));
    let spec = if plan.failure.is_some() {
        // A failing operation is validated like any other, but changes nothing.
        f(sim, &mut cloud.clone(), req)?
    } else {
        f(sim, &mut cloud, req)?
    };
    let key = ops::create(
        sim,
        &mut cloud,
        &req.project,
        req.api,
        spec,
        &plan,
        request_id,
    );
    sim.commit(&cloud);
    let op = cloud
        .operations
        .get(&key)
        .map(|r| serde_json::to_value(&r.op).unwrap_or_default())
        .unwrap_or_default();
    drop(cloud);
    ops::spawn_driver(sim.clone(), key);
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_pattern_is_unique_and_resolves() {
        let mut seen = std::collections::BTreeSet::new();
        for r in routes() {
            assert!(
                seen.insert((r.method, r.pattern)),
                "duplicate route {} {}",
                r.method,
                r.pattern
            );
            let path = format!(
                "/compute/v1/projects/p/{}",
                r.pattern.replace('{', "x").replace('}', "")
            );
            let m = Method::from_bytes(r.method.as_bytes()).unwrap();
            let (found, project, _) = find_route(&m, &path).unwrap();
            assert_eq!(project, "p");
            assert_eq!(found.api, r.api, "{path}");
        }
    }

    #[test]
    fn queries_decode_dollar_params() {
        let q = parse_query(Some("%24alt=json&requestId=a%2Db&x"));
        assert_eq!(q["$alt"], "json");
        assert_eq!(q["requestId"], "a-b");
        assert_eq!(q["x"], "");
    }
}
