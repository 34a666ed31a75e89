//! The one error type of the GCE backend. Every variant names the resource it is about, so a Terraform
//! diagnostic built from `to_string()` tells the user what failed without more context.

use google_cloud_compute_v1::model::Operation;
use google_cloud_gax::error::Error as SdkError;
use google_cloud_gax::error::rpc::StatusDetails;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The settings cannot make a client (no project, bad endpoint, unreadable credentials).
    #[error("Compute Engine client: {0}")]
    Config(String),

    #[error("{resource} was not found")]
    NotFound { resource: String },

    /// An "ensure" found a resource of that name that differs from what was asked for.
    #[error("{resource} already exists but differs: {detail}")]
    Conflict { resource: String, detail: String },

    /// Operation-level QUOTA_EXCEEDED: the quota name and limit are what the user must raise.
    #[error("{resource}: quota {quota} exceeded (limit {limit}{scope}): {message}")]
    QuotaExceeded {
        resource: String,
        quota: String,
        limit: String,
        scope: String,
        message: String,
    },

    /// ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS): a stock-out; another zone or a later retry may work.
    #[error("{resource}: zone {zone} does not have enough resources ({code}): {message}")]
    ZoneExhausted {
        resource: String,
        zone: String,
        code: String,
        message: String,
    },

    /// Any other operation that finished DONE with an error.
    #[error("{resource}: {action} failed with {code}: {message}")]
    Operation {
        resource: String,
        action: String,
        code: String,
        message: String,
    },

    /// An HTTP error answer (after retries, if it was retryable).
    #[error("{resource}: {action} failed: HTTP {status} {reason}: {message}")]
    Api {
        resource: String,
        action: String,
        status: u16,
        reason: String,
        message: String,
    },

    /// The caller's deadline passed before the call or its operation finished.
    #[error("{resource}: {action} did not finish before the deadline{last}")]
    Timeout {
        resource: String,
        action: String,
        last: String,
    },

    /// A call in a zone that Compute Engine reports DOWN (an outage): retrying until the deadline would only
    /// hold the rest of the change back, so the call stops at once.
    #[error(
        "{resource}: {action} failed: zone {zone} is DOWN (Compute Engine answers 503 for it, and reports the zone DOWN). Nothing more was changed in this step; apply again once `gcloud compute zones describe {zone}` says UP"
    )]
    ZoneDown {
        resource: String,
        action: String,
        zone: String,
    },

    /// No HTTP answer: connection, TLS, authentication or decoding failures.
    #[error("{resource}: {action} failed: {message}")]
    Transport {
        resource: String,
        action: String,
        message: String,
    },
}

impl Error {
    /// Whether the same call may succeed later with nothing changed by the user: an operation Compute Engine
    /// ended with an internal or unavailable error, an answer still 429 or 5xx after the retries, no answer at
    /// all, a deadline passed. Quota, stock-outs and refusals are not: they need a change first.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Operation { code, .. } => matches!(
                code.as_str(),
                "INTERNAL_ERROR"
                    | "SERVICE_UNAVAILABLE"
                    | "RESOURCE_NOT_READY"
                    | "OPERATION_CANCELED"
            ),
            Error::Api { status, .. } => *status == 429 || *status >= 500,
            Error::Timeout { .. } | Error::Transport { .. } | Error::ZoneDown { .. } => true,
            _ => false,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Whether Compute Engine refused the call because the zone or region in its path does not exist (400
    /// "Invalid value for field 'zone': 'x'. Unknown zone."). Nothing can exist there: a read finds nothing and a
    /// delete has nothing to do, so a replica created with a misspelt zone can still be read and replaced.
    pub fn is_unknown_location(&self) -> bool {
        matches!(self, Error::Api { status: 400, message, .. }
            if message.contains("Unknown zone.") || message.contains("Unknown region."))
    }

    /// The HTTP status of an API error, if this is one.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            Error::NotFound { .. } => Some(404),
            _ => None,
        }
    }

    /// The API error reason (`alreadyExists`, `conditionNotMet`, `resourceInUseByAnotherResource`...).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Error::Api { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// The operation error code (`QUOTA_EXCEEDED`, `ZONE_RESOURCE_POOL_EXHAUSTED`, `RESOURCE_IN_USE_BY_ANOTHER_RESOURCE`...).
    pub fn operation_code(&self) -> Option<&str> {
        match self {
            Error::QuotaExceeded { .. } => Some("QUOTA_EXCEEDED"),
            Error::ZoneExhausted { code, .. } | Error::Operation { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// What the retry loop needs to know about one failed attempt.
pub(crate) struct Failure {
    pub status: Option<u16>,
    pub reason: String,
    pub message: String,
    pub retryable: bool,
}

/// Classifies an SDK error. Compute's legacy error bodies carry no `error.status`, so the SDK reports
/// `Code::Unknown`; the HTTP status and the `errors[].reason` (kept as ErrorInfo) are what mean something.
pub(crate) fn classify(e: &SdkError) -> Failure {
    let status = e.http_status_code();
    let (reason, message) = match e.status() {
        Some(s) => {
            let reason = s.details.iter().find_map(|d| match d {
                StatusDetails::ErrorInfo(i) if !i.reason.is_empty() => Some(i.reason.clone()),
                _ => None,
            });
            (reason.unwrap_or_default(), s.message.clone())
        }
        None => (String::new(), e.to_string()),
    };
    let retryable = match status {
        // Rate limits and server trouble: GCE asks clients to back off and try again.
        Some(429 | 500 | 502 | 503 | 504) => true,
        Some(403) => is_rate_limit(&reason, &message),
        // A dependency still settling (e.g. a target pool right after its forwarding rule went away).
        Some(400) => reason == "resourceNotReady",
        Some(409) => reason == "operationInProgress" || message.contains("operationInProgress"),
        Some(_) => false,
        // No HTTP answer: the request may or may not have arrived; requestId makes a resend safe.
        None => {
            e.is_io()
                || e.is_connect()
                || e.is_transport()
                || e.is_timeout()
                || (e.is_authentication() && auth_transient(e))
        }
    };
    Failure {
        status,
        reason,
        message,
        retryable,
    }
}

fn auth_transient(e: &SdkError) -> bool {
    use std::error::Error as _;
    e.source()
        .and_then(|s| s.downcast_ref::<google_cloud_gax::error::CredentialsError>())
        .is_some_and(|c| c.is_transient())
}

/// 403s that are per-minute rate limits (retry) rather than permission or resource-quota errors (do not).
fn is_rate_limit(reason: &str, message: &str) -> bool {
    matches!(
        reason,
        "rateLimitExceeded" | "userRateLimitExceeded" | "CONCURRENT_OPERATIONS_QUOTA_EXCEEDED"
    ) || (message.contains("Quota exceeded for quota metric") && message.contains("per minute"))
}

impl Failure {
    pub fn into_error(self, resource: &str, action: &str) -> Error {
        match self.status {
            Some(404) => Error::NotFound {
                resource: resource.to_string(),
            },
            Some(status) => Error::Api {
                resource: resource.to_string(),
                action: action.to_string(),
                status,
                reason: if self.reason.is_empty() {
                    "error".into()
                } else {
                    self.reason
                },
                message: self.message,
            },
            None => Error::Transport {
                resource: resource.to_string(),
                action: action.to_string(),
                message: self.message,
            },
        }
    }
}

/// A DONE operation's `error`, as our error; `None` if it succeeded.
pub(crate) fn operation_error(resource: &str, action: &str, op: &Operation) -> Option<Error> {
    let errors = &op.error.as_ref()?.errors;
    let first = errors.first()?;
    let code = first.code.clone().unwrap_or_else(|| "UNKNOWN".into());
    let message = errors
        .iter()
        .filter_map(|e| e.message.as_deref())
        .collect::<Vec<_>>()
        .join("; ");
    let resource = resource.to_string();
    Some(match code.as_str() {
        "QUOTA_EXCEEDED" => {
            let info = first
                .error_details
                .iter()
                .find_map(|d| d.quota_info.as_ref());
            let quota = info
                .and_then(|q| q.limit_name.clone().or_else(|| q.metric_name.clone()))
                .or_else(|| between(&message, "Quota '", "'"))
                .unwrap_or_else(|| "(unnamed)".into());
            let limit = info
                .and_then(|q| q.limit)
                .map(|l| l.to_string())
                .or_else(|| between(&message, "Limit: ", " "))
                .unwrap_or_else(|| "unknown".into());
            let scope = info
                .and_then(|q| {
                    let mut d: Vec<_> = q.dimensions.iter().collect();
                    d.sort();
                    (!d.is_empty()).then(|| {
                        let parts: Vec<String> =
                            d.iter().map(|(k, v)| format!("{k} {v}")).collect();
                        format!(" in {}", parts.join(", "))
                    })
                })
                .unwrap_or_default();
            Error::QuotaExceeded {
                resource,
                quota,
                limit,
                scope,
                message,
            }
        }
        c if c.starts_with("ZONE_RESOURCE_POOL_EXHAUSTED") => Error::ZoneExhausted {
            resource,
            zone: op
                .zone
                .as_deref()
                .map(last_segment)
                .map(str::to_string)
                .or_else(|| between(&message, "zones/", "'"))
                .unwrap_or_else(|| "(unknown)".into()),
            code,
            message,
        },
        _ => Error::Operation {
            resource,
            action: action.to_string(),
            code,
            message,
        },
    })
}

/// The text between `start` and the next `end` in `s`.
fn between(s: &str, start: &str, end: &str) -> Option<String> {
    let rest = &s[s.find(start)? + start.len()..];
    let stop = rest.find(end).unwrap_or(rest.len());
    let v = rest[..stop].trim_end_matches(['.', ',']);
    (!v.is_empty()).then(|| v.to_string())
}

/// `https://…/zones/us-central1-a` → `us-central1-a`.
pub(crate) fn last_segment(url: &str) -> &str {
    url.trim_end_matches('/').rsplit('/').next().unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_name_and_limit_come_from_the_message_when_details_are_missing() {
        let mut op = Operation::new();
        let mut e = google_cloud_compute_v1::model::operation::error::Errors::new();
        e.code = Some("QUOTA_EXCEEDED".into());
        e.message =
            Some("Quota 'STATIC_ADDRESSES' exceeded.  Limit: 1.0 in region us-east1.".into());
        let mut err = google_cloud_compute_v1::model::operation::Error::new();
        err.errors.push(e);
        op.error = Some(err);
        let got = operation_error("address x", "insert", &op).unwrap();
        let text = got.to_string();
        assert!(
            text.contains("quota STATIC_ADDRESSES exceeded (limit 1.0"),
            "{text}"
        );
        assert!(text.starts_with("address x:"), "{text}");
    }

    #[test]
    fn passing_failures_are_told_from_those_that_need_a_change() {
        let op = |code: &str| Error::Operation {
            resource: "r".into(),
            action: "insert".into(),
            code: code.into(),
            message: String::new(),
        };
        let api = |status| Error::Api {
            resource: "r".into(),
            action: "insert".into(),
            status,
            reason: String::new(),
            message: String::new(),
        };
        let cases = [
            (op("INTERNAL_ERROR"), true),
            (op("SERVICE_UNAVAILABLE"), true),
            (op("RESOURCE_NOT_READY"), true),
            (op("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"), false),
            (api(429), true),
            (api(503), true),
            (api(400), false),
            (api(403), false),
            (
                Error::NotFound {
                    resource: "r".into(),
                },
                false,
            ),
        ];
        for (e, transient) in cases {
            assert_eq!(e.is_transient(), transient, "{e}");
        }
    }

    #[test]
    fn rate_limit_403s_are_told_from_permission_errors() {
        assert!(is_rate_limit("rateLimitExceeded", ""));
        assert!(is_rate_limit(
            "",
            "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service"
        ));
        assert!(!is_rate_limit(
            "forbidden",
            "Required 'compute.instances.create' permission"
        ));
    }
}
