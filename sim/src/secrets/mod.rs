//! The Secret Manager v1 REST surface (`/v1/projects/{project}/secrets...`): the methods the provider, the
//! masters and an operator's `gcloud secrets` call, with IAM on each secret. Like the Compute surface, a route
//! table (one entry per API method) and one pipeline: log → bearer token → route → request failpoints → IAM →
//! handler. Secret Manager answers at once (no operations), and its errors carry `status`, as one-platform
//! APIs do.
//!
//! Who calls: any token the sim accepts is a project owner (the provider's credentials); a token
//! `sim-sa:<email>` is that service account, as a VM's metadata server would vouch for it, and may only do what a
//! binding on the secret grants (`iam.rs`).

pub mod handlers;
pub mod iam;
pub mod model;
pub mod token;

use crate::app::Sim;
use crate::faults::{Effect, RequestFacts};
use crate::reqlog::Entry;
use crate::state::{Cloud, ids};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use iam::Principal;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where the surface lives: gcloud's `CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER` is the sim's root URL.
pub const PREFIX: &str = "/v1/projects/";

use token::SERVICE_ACCOUNT_TOKEN;

/// An error in the one-platform shape: `{"error":{"code":404,"message":"…","status":"NOT_FOUND"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmError {
    pub code: u16,
    pub status: &'static str,
    pub message: String,
    /// `google.rpc` detail messages (`ErrorInfo` ...), as JSON with their `@type`.
    pub details: Vec<Value>,
}

impl SmError {
    pub fn new(code: u16, status: &'static str, message: impl Into<String>) -> Self {
        SmError {
            code,
            status,
            message: message.into(),
            details: Vec::new(),
        }
    }

    /// What Google answers when the project has not enabled the Secret Manager API.
    pub fn service_disabled(project: &str) -> Self {
        let mut e = Self::new(
            403,
            "PERMISSION_DENIED",
            format!(
                "Secret Manager API has not been used in project {project} before or it is disabled. Enable it by \
                 visiting https://console.developers.google.com/apis/api/secretmanager.googleapis.com/overview?project={project} \
                 then retry."
            ),
        );
        e.details.push(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": crate::faults::SERVICE_DISABLED,
            "domain": "googleapis.com",
            "metadata": {"service": "secretmanager.googleapis.com", "consumer": format!("projects/{project}")},
        }));
        e
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "INVALID_ARGUMENT", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, "NOT_FOUND", message)
    }

    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(400, "FAILED_PRECONDITION", message)
    }

    /// As Secret Manager words it: the caller cannot tell a secret it may not see from one that does not exist.
    pub fn denied(permission: &str, resource: &str) -> Self {
        Self::new(
            403,
            "PERMISSION_DENIED",
            format!(
                "Permission '{permission}' denied for resource '{resource}' (or it may not exist)."
            ),
        )
    }
}

impl IntoResponse for SmError {
    fn into_response(self) -> Response {
        let status = axum::http::StatusCode::from_u16(self.code)
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        let mut body =
            json!({"error": {"code": self.code, "message": self.message, "status": self.status}});
        if !self.details.is_empty() {
            body["error"]["details"] = Value::Array(self.details);
        }
        (status, axum::Json(body)).into_response()
    }
}

pub type SmResult<T> = Result<T, SmError>;

/// One parsed request.
pub struct SmReq {
    pub project: String,
    pub secret: String,
    pub version: String,
    pub query: BTreeMap<String, String>,
    pub body: Value,
    pub who: Principal,
}

/// A handler: reads or changes the cloud, answers JSON.
pub type HandlerFn = fn(&mut Cloud, &SmReq) -> SmResult<Value>;

pub struct Route {
    pub method: &'static str,
    /// After `/v1/projects/{project}/`; `{secret}` and `{version}` capture a segment, `:verb` ends the last one.
    pub pattern: &'static str,
    /// The API method (`secrets.create`): the request log key (`secretmanager.` before it) and failpoint `api`.
    pub api: &'static str,
    /// The IAM permission the caller needs on the secret.
    pub permission: &'static str,
    /// Whether the handler changes the cloud (then the state is saved).
    pub mutates: bool,
    pub handler: HandlerFn,
}

use handlers as h;

pub const ROUTES: &[Route] = &[
    route(
        "POST",
        "secrets",
        "secrets.create",
        "secretmanager.secrets.create",
        true,
        h::create,
    ),
    route(
        "GET",
        "secrets",
        "secrets.list",
        "secretmanager.secrets.list",
        false,
        h::list,
    ),
    route(
        "GET",
        "secrets/{secret}",
        "secrets.get",
        "secretmanager.secrets.get",
        false,
        h::get,
    ),
    route(
        "PATCH",
        "secrets/{secret}",
        "secrets.patch",
        "secretmanager.secrets.update",
        true,
        h::patch,
    ),
    route(
        "DELETE",
        "secrets/{secret}",
        "secrets.delete",
        "secretmanager.secrets.delete",
        true,
        h::delete,
    ),
    route(
        "POST",
        "secrets/{secret}:addVersion",
        "secrets.addVersion",
        "secretmanager.versions.add",
        true,
        h::add_version,
    ),
    route(
        "GET",
        "secrets/{secret}:getIamPolicy",
        "secrets.getIamPolicy",
        "secretmanager.secrets.getIamPolicy",
        false,
        h::get_iam_policy,
    ),
    route(
        "POST",
        "secrets/{secret}:setIamPolicy",
        "secrets.setIamPolicy",
        "secretmanager.secrets.setIamPolicy",
        true,
        h::set_iam_policy,
    ),
    route(
        "GET",
        "secrets/{secret}/versions",
        "secrets.versions.list",
        "secretmanager.versions.list",
        false,
        h::list_versions,
    ),
    route(
        "GET",
        "secrets/{secret}/versions/{version}",
        "secrets.versions.get",
        "secretmanager.versions.get",
        false,
        h::get_version,
    ),
    route(
        "GET",
        "secrets/{secret}/versions/{version}:access",
        "secrets.versions.access",
        "secretmanager.versions.access",
        false,
        h::access,
    ),
    route(
        "POST",
        "secrets/{secret}/versions/{version}:disable",
        "secrets.versions.disable",
        "secretmanager.versions.disable",
        true,
        h::disable,
    ),
    route(
        "POST",
        "secrets/{secret}/versions/{version}:enable",
        "secrets.versions.enable",
        "secretmanager.versions.enable",
        true,
        h::enable,
    ),
    route(
        "POST",
        "secrets/{secret}/versions/{version}:destroy",
        "secrets.versions.destroy",
        "secretmanager.versions.destroy",
        true,
        h::destroy,
    ),
];

const fn route(
    method: &'static str,
    pattern: &'static str,
    api: &'static str,
    permission: &'static str,
    mutates: bool,
    handler: HandlerFn,
) -> Route {
    Route {
        method,
        pattern,
        api,
        permission,
        mutates,
        handler,
    }
}

/// Every API method this surface serves, as the request log names them (`secretmanager.secrets.create`).
pub fn route_apis() -> Vec<String> {
    ROUTES
        .iter()
        .map(|r| format!("secretmanager.{}", r.api))
        .collect()
}

/// The captured `{secret}` and `{version}` of `tail` (the path after the project) if it matches `pattern`.
fn capture(pattern: &str, tail: &str) -> Option<(String, String)> {
    let split = |s: &str| -> (Vec<String>, Option<String>) {
        let mut segs: Vec<String> = s.split('/').map(str::to_string).collect();
        let last = segs.pop().unwrap_or_default();
        let (last, verb) = match last.split_once(':') {
            Some((l, v)) => (l.to_string(), Some(v.to_string())),
            None => (last, None),
        };
        segs.push(last);
        (segs, verb)
    };
    let (pat, pat_verb) = split(pattern);
    let (segs, verb) = split(tail);
    if pat.len() != segs.len() || pat_verb != verb {
        return None;
    }
    let (mut secret, mut version) = (String::new(), String::new());
    for (p, s) in pat.iter().zip(&segs) {
        match p.as_str() {
            "{secret}" if !s.is_empty() => secret = s.clone(),
            "{version}" if !s.is_empty() => version = s.clone(),
            p if p == s => {}
            _ => return None,
        }
    }
    Some((secret, version))
}

/// The caller, from the bearer token; `None` when it is not accepted.
fn principal(sim: &Sim, headers: &HeaderMap) -> Option<Principal> {
    let token = crate::api::bearer_token(headers)?;
    if let Some(email) = token.strip_prefix(SERVICE_ACCOUNT_TOKEN) {
        return (!email.is_empty()).then(|| Principal::ServiceAccount(email.to_string()));
    }
    crate::api::accepted(sim, token).then_some(Principal::Owner)
}

/// The whole pipeline for a request under [`PREFIX`].
pub async fn handle(
    sim: Arc<Sim>,
    method: Method,
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = std::time::Instant::now();
    let rest = path.strip_prefix(PREFIX).unwrap_or_default();
    let (project, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let matched = ROUTES
        .iter()
        .filter(|r| r.method == method.as_str())
        .find_map(|r| capture(r.pattern, tail.trim_end_matches('/')).map(|c| (r, c)));
    let api = matched.as_ref().map_or("unknown", |(r, _)| r.api);
    let result = match (principal(&sim, &headers), matched) {
        (None, _) => Err(SmError::new(
            401,
            "UNAUTHENTICATED",
            "Request is missing required authentication credential.",
        )),
        (Some(_), None) => Err(SmError::not_found(format!(
            "The requested URL {path} was not found on this server."
        ))),
        (Some(who), Some((route, (secret, version)))) => {
            let target = Target {
                project: project.to_string(),
                secret,
                version,
                who,
            };
            serve(&sim, route, &path, target, query.as_deref(), &body).await
        }
    };
    let response = match result {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    };
    let entry = Entry {
        seq: 0,
        at: ids::now_rfc3339(),
        method: method.to_string(),
        path,
        api: format!("secretmanager.{api}"),
        status: response.status().as_u16(),
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        user_agent: headers
            .get(axum::http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    crate::provider_methods::note(&entry.api, entry.user_agent.as_deref());
    sim.reqlog().record(entry);
    response
}

/// A failpoint's status in the one-platform shape, with the canonical code Google's clients decide retries by
/// (only `UNAVAILABLE` is retried by their default policy).
fn injected(status: u16) -> SmError {
    let code = match status {
        400 => "FAILED_PRECONDITION",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    };
    SmError::new(status, code, "injected by a failpoint")
}

/// What a request is about and who makes it.
struct Target {
    project: String,
    secret: String,
    version: String,
    who: Principal,
}

async fn serve(
    sim: &Arc<Sim>,
    route: &Route,
    path: &str,
    target: Target,
    query: Option<&str>,
    body: &Bytes,
) -> SmResult<Value> {
    // Failpoints name Secret Manager's methods as the request log does (`secretmanager.secrets.create`).
    let api = format!("secretmanager.{}", route.api);
    let effects = sim.faults().on_request(&RequestFacts {
        method: route.method,
        api: &api,
        path,
    });
    for e in effects {
        match e {
            Effect::Delay { ms } => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
            Effect::Status { status } => return Err(injected(status)),
            Effect::Stall => {
                sim.hold_until_faults_cleared().await;
                return Err(injected(503));
            }
            Effect::Fail { code, .. } if code == crate::faults::SERVICE_DISABLED => {
                return Err(SmError::service_disabled(&target.project));
            }
            Effect::Fail { .. } => {}
        }
    }
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Default::default())
    } else {
        serde_json::from_slice(body)
            .map_err(|e| SmError::invalid(format!("Invalid JSON payload received. {e}")))?
    };
    let req = SmReq {
        project: target.project,
        secret: target.secret,
        version: target.version,
        query: crate::api::parse_query(query),
        body,
        who: target.who,
    };
    let mut cloud = sim.cloud();
    let resource = path.strip_prefix("/v1/").unwrap_or(path);
    let resource = resource.split(':').next().unwrap_or(resource);
    let policy = cloud.secrets.get(&handlers::key(&req)).map(|s| &s.policy);
    if !iam::allows(policy, &req.who, route.permission) {
        return Err(SmError::denied(route.permission, resource));
    }
    let out = (route.handler)(&mut cloud, &req)?;
    if route.mutates {
        sim.commit(&cloud);
    }
    Ok(out)
}
