//! Errors in Google's legacy JSON shape:
//! `{"error":{"code":404,"message":"…","errors":[{"message":"…","domain":"global","reason":"notFound"}]}}`.
//!
//! Compute omits `error.status`, which is why the Rust SDK reports such errors as `Code::Unknown` and keeps the
//! HTTP status; the sim does the same (except 401, where Google does send `UNAUTHENTICATED`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            reason,
            message: message.into(),
        }
    }

    /// 404 for a resource given by relative path `projects/p/...`.
    pub fn not_found(rel: &str) -> Self {
        Self::new(
            404,
            "notFound",
            format!("The resource '{rel}' was not found"),
        )
    }

    pub fn already_exists(rel: &str) -> Self {
        Self::new(
            409,
            "alreadyExists",
            format!("The resource '{rel}' already exists"),
        )
    }

    /// 400 `invalid` in GCE's "Invalid value for field" wording.
    pub fn invalid_field(field: &str, value: &str, why: &str) -> Self {
        Self::new(
            400,
            "invalid",
            format!("Invalid value for field '{field}': '{value}'. {why}"),
        )
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid", message)
    }

    pub fn required(field: &str) -> Self {
        Self::new(
            400,
            "required",
            format!("Required field '{field}' not specified"),
        )
    }

    /// 400 `resourceInUseByAnotherResource`: "The target_pool resource '…' is already being used by '…'".
    pub fn in_use(kind: &str, rel: &str, user_rel: &str) -> Self {
        Self::new(
            400,
            "resourceInUseByAnotherResource",
            format!("The {kind} resource '{rel}' is already being used by '{user_rel}'"),
        )
    }

    /// 412 on a stale fingerprint; the wording is what terraform-provider-google retries on.
    pub fn fingerprint(what: &str) -> Self {
        Self::new(
            412,
            "conditionNotMet",
            format!("Supplied fingerprint does not match current {what} fingerprint."),
        )
    }

    pub fn unauthenticated() -> Self {
        Self::new(
            401,
            "required",
            "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie \
             or other valid authentication credential.",
        )
    }

    /// What a failpoint returns for an injected HTTP status.
    pub fn injected(status: u16) -> Self {
        match status {
            // Compute documents 403 rateLimitExceeded for rate quotas; 429 is also seen. Same wording for both.
            403 | 429 => Self::new(
                status,
                "rateLimitExceeded",
                "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service \
                 'compute.googleapis.com' for consumer 'project_number:0'.",
            ),
            500 => Self::new(
                500,
                "backendError",
                "Internal error. Please try again or contact Google Support.",
            ),
            503 => Self::new(503, "backendError", "The service is currently unavailable."),
            s => Self::new(
                s,
                "injected",
                format!("Injected failure with HTTP status {s}."),
            ),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        let mut item = json!({"message": self.message, "domain": "global", "reason": self.reason});
        let mut err = json!({"code": self.status, "message": self.message});
        if self.status == 401 {
            item["location"] = json!("Authorization");
            item["locationType"] = json!("header");
            err["status"] = json!("UNAUTHENTICATED");
        }
        err["errors"] = json!([item]);
        json!({ "error": err })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.body())).into_response()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// Upper-case reason phrase for `Operation.httpErrorMessage` ("PRECONDITION FAILED", "SERVICE UNAVAILABLE").
pub fn reason_phrase(status: u16) -> String {
    StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("ERROR")
        .to_uppercase()
}
