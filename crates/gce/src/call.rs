//! How every call is made: retries with jittered exponential backoff under the caller's deadline, one
//! `requestId` per logical mutation, and operations awaited with `*Operations.wait`.
//!
//! Why our own loop rather than the SDK's retry policy: the SDK never retries a POST unless told it is
//! idempotent, does not retry 429 or rate-limit 403s, and bounds retries by its own clock rather than our
//! deadline. Its clients are built with `NeverRetry`, so each `send()` here is exactly one HTTP attempt.

use super::Compute;
use super::error::{Error, Failure, Result, classify, last_segment, operation_error};
use google_cloud_compute_v1::model::Operation;
use google_cloud_compute_v1::model::operation::Status as OpStatus;
use google_cloud_gax::options::RequestOptionsBuilder;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// Backoff between attempts: `initial`, doubling up to `max`, each delay jittered to between half and all of it;
/// and how long one attempt may take before it is abandoned and retried (with the same requestId).
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub attempt_timeout: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            // tpg starts at 0.5 s; GCE's per-minute rate quotas refill within a minute, so cap below that.
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            // `wait` long-polls for up to ~2 minutes, so one attempt must be allowed longer than that.
            attempt_timeout: Duration::from_secs(180),
        }
    }
}

/// A delay in [d/2, d]: spreads out clients that failed together without ever retrying instantly.
fn jittered(d: Duration) -> Duration {
    let r = (uuid::Uuid::new_v4().as_u128() % 1_000_000) as f64 / 1_000_000.0;
    d.mul_f64(0.5 + r / 2.0)
}

/// How often a `wait` may answer 404 before we believe the operation is gone (right after creation an
/// operation can briefly be invisible; tpg retries this case too).
const WAIT_NOT_FOUND_LIMIT: u32 = 5;

/// A `wait` that comes back unfinished sooner than this is followed by a short pause before the next one.
const QUICK_WAIT: Duration = Duration::from_secs(1);

enum Scope {
    Zone(String),
    Region(String),
    Global,
}

fn scope_of(op: &Operation) -> Scope {
    match (op.zone.as_deref(), op.region.as_deref()) {
        (Some(z), _) if !z.is_empty() => Scope::Zone(last_segment(z).to_string()),
        (_, Some(r)) if !r.is_empty() => Scope::Region(last_segment(r).to_string()),
        _ => Scope::Global,
    }
}

fn is_done(op: &Operation) -> bool {
    matches!(op.status, Some(OpStatus::Done))
}

impl Compute {
    /// One logical call, attempted until it succeeds, fails for good, or the deadline passes.
    pub(crate) async fn attempt<T, F, Fut>(
        &self,
        resource: &str,
        action: &str,
        deadline: Instant,
        mut f: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = google_cloud_gax::Result<T>>,
    {
        let mut delay = self.backoff.initial;
        let mut unavailable = 0u32;
        // What the last attempt that got an answer said: an attempt cut short by the deadline reports it, so the
        // user reads the API's reason rather than a bare timeout.
        let mut last = String::new();
        loop {
            let attempt_end = deadline.min(Instant::now() + self.backoff.attempt_timeout);
            let failure = match tokio::time::timeout_at(attempt_end, f()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => classify(&e),
                Err(_) if attempt_end < deadline => Failure {
                    status: None,
                    reason: String::new(),
                    message: format!("no answer within {:?}", self.backoff.attempt_timeout),
                    retryable: true,
                },
                Err(_) => {
                    return Err(Error::Timeout {
                        resource: resource.into(),
                        action: action.into(),
                        last,
                    });
                }
            };
            if !failure.retryable {
                return Err(failure.into_error(resource, action));
            }
            // A zonal call answered 503 twice in a row: if the zone itself is DOWN, say so now rather than retry
            // into the deadline (a roll must stop before it touches another replica).
            if failure.status == Some(503) {
                unavailable += 1;
                if unavailable >= 2
                    && let Some(zone) = zone_of_resource(resource)
                    && self.zone_reported_down(zone).await
                {
                    return Err(Error::ZoneDown {
                        resource: resource.into(),
                        action: action.into(),
                        zone: zone.into(),
                    });
                }
            } else {
                unavailable = 0;
            }
            last = match failure.status {
                Some(s) => format!(
                    " (last answer: HTTP {s} {}: {})",
                    failure.reason, failure.message
                ),
                None => format!(" (last error: {})", failure.message),
            };
            let pause = jittered(delay);
            if Instant::now() + pause >= deadline {
                return Err(Error::Timeout {
                    resource: resource.into(),
                    action: action.into(),
                    last,
                });
            }
            tracing::debug!(
                resource,
                action,
                status = ?failure.status,
                reason = %failure.reason,
                pause_ms = pause.as_millis() as u64,
                "transient Compute Engine error; retrying"
            );
            tokio::time::sleep(pause).await;
            delay = (delay * 2).min(self.backoff.max);
        }
    }

    /// Whether Compute Engine reports `zone` DOWN: one `zones.get`, no retries (any failure says "not known to
    /// be down", and the caller goes on retrying as before).
    async fn zone_reported_down(&self, zone: &str) -> bool {
        let Ok(project) = self.project() else {
            return false;
        };
        let call = self
            .clients
            .zones
            .get()
            .set_project(project)
            .set_zone(zone)
            .with_user_agent(self.user_agent())
            .send();
        match tokio::time::timeout(Duration::from_secs(10), call).await {
            Ok(Ok(z)) => z.status.as_ref().and_then(|s| s.name()) == Some("DOWN"),
            _ => false,
        }
    }

    /// A read where 404 means "absent".
    pub(crate) async fn read_opt<T, F, Fut>(
        &self,
        resource: &str,
        deadline: Instant,
        f: F,
    ) -> Result<Option<T>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = google_cloud_gax::Result<T>>,
    {
        match self.attempt(resource, "get", deadline, f).await {
            Ok(v) => Ok(Some(v)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) if e.is_unknown_location() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One logical mutation: `f` gets the requestId (the same UUID on every attempt, so GCE applies a
    /// retried POST once), and the resulting operation is awaited until DONE. An operation that failed with
    /// RESOURCE_NOT_READY (a dependency still settling) is tried again under a new requestId: reusing the old
    /// one would only return the failed operation again.
    pub(crate) async fn mutate<F, Fut>(
        &self,
        resource: &str,
        action: &str,
        deadline: Instant,
        mut f: F,
    ) -> Result<Operation>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = google_cloud_gax::Result<Operation>>,
    {
        let mut delay = self.backoff.initial;
        loop {
            let request_id = uuid::Uuid::new_v4().to_string();
            let op = self
                .attempt(resource, action, deadline, || f(request_id.clone()))
                .await?;
            match self.wait_done(resource, action, op, deadline).await {
                Err(Error::Operation { code, .. })
                    if code == "RESOURCE_NOT_READY" && Instant::now() + delay < deadline =>
                {
                    tracing::debug!(
                        resource,
                        action,
                        "operation found a resource not ready; retrying"
                    );
                    tokio::time::sleep(jittered(delay)).await;
                    delay = (delay * 2).min(self.backoff.max);
                }
                done => return done,
            }
        }
    }

    /// Like [`mutate`](Self::mutate) for deletes: 404 (already gone) is success.
    pub(crate) async fn delete_idempotent<F, Fut>(
        &self,
        resource: &str,
        deadline: Instant,
        f: F,
    ) -> Result<()>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = google_cloud_gax::Result<Operation>>,
    {
        match self.mutate(resource, "delete", deadline, f).await {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
            Err(e) if e.is_unknown_location() => Ok(()),
            // The operation itself may find the resource already gone (a concurrent delete).
            Err(Error::Operation { code, .. }) if code == "RESOURCE_NOT_FOUND" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Calls `wait` on the operation's scope until it is DONE; a DONE operation's `error` becomes our error.
    /// `wait` long-polls (up to ~2 minutes on GCE) and may return early, so it is called in a loop.
    pub(crate) async fn wait_done(
        &self,
        resource: &str,
        action: &str,
        mut op: Operation,
        deadline: Instant,
    ) -> Result<Operation> {
        let project = self.project()?.to_string();
        let mut not_found = 0;
        loop {
            if is_done(&op) {
                return match operation_error(resource, action, &op) {
                    Some(e) => Err(e),
                    None => Ok(op),
                };
            }
            let name = op.name.clone().unwrap_or_default();
            let what = format!("waiting for operation {name} ({action} of {resource})");
            let asked = Instant::now();
            let waited = match scope_of(&op) {
                Scope::Zone(z) => {
                    self.attempt(resource, &what, deadline, || {
                        self.clients
                            .zone_operations
                            .wait()
                            .set_project(&project)
                            .set_zone(&z)
                            .set_operation(&name)
                            .with_user_agent(self.user_agent())
                            .send()
                    })
                    .await
                }
                Scope::Region(r) => {
                    self.attempt(resource, &what, deadline, || {
                        self.clients
                            .region_operations
                            .wait()
                            .set_project(&project)
                            .set_region(&r)
                            .set_operation(&name)
                            .with_user_agent(self.user_agent())
                            .send()
                    })
                    .await
                }
                Scope::Global => {
                    self.attempt(resource, &what, deadline, || {
                        self.clients
                            .global_operations
                            .wait()
                            .set_project(&project)
                            .set_operation(&name)
                            .with_user_agent(self.user_agent())
                            .send()
                    })
                    .await
                }
            };
            op = match waited {
                // `wait` "might return after zero seconds": never turn that into a busy loop.
                Ok(next) if !is_done(&next) && asked.elapsed() < QUICK_WAIT => {
                    tokio::time::sleep(jittered(self.backoff.initial)).await;
                    next
                }
                Ok(next) => next,
                Err(Error::NotFound { .. }) if not_found < WAIT_NOT_FOUND_LIMIT => {
                    not_found += 1;
                    tokio::time::sleep(jittered(self.backoff.initial)).await;
                    continue;
                }
                Err(Error::NotFound { .. }) => {
                    return Err(Error::Operation {
                        resource: resource.into(),
                        action: action.into(),
                        code: "OPERATION_NOT_FOUND".into(),
                        message: format!("operation {name} disappeared before it was DONE"),
                    });
                }
                Err(e) => return Err(e),
            };
            // `wait` with a stale name must never spin: an empty name means the answer was not an operation.
            if op.name.as_deref().unwrap_or_default().is_empty() {
                return Err(Error::Transport {
                    resource: resource.into(),
                    action: action.into(),
                    message: "the operation answer had no name".into(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_between_half_and_all_of_the_delay() {
        for _ in 0..100 {
            let j = jittered(Duration::from_millis(1000));
            assert!(
                j >= Duration::from_millis(500) && j <= Duration::from_millis(1000),
                "{j:?}"
            );
        }
    }
}

/// The zone a call's resource lives in (`.../zones/<zone>/...`), if it is zonal.
fn zone_of_resource(resource: &str) -> Option<&str> {
    let rest = resource.split("zones/").nth(1)?;
    let zone = rest.split('/').next()?;
    (!zone.is_empty()).then_some(zone)
}

#[cfg(test)]
mod zone_tests {
    use super::zone_of_resource;

    #[test]
    fn the_zone_of_a_zonal_resource_is_read_from_its_path() {
        let cases = [
            (
                "instance projects/p/zones/europe-west1-c/instances/a",
                Some("europe-west1-c"),
            ),
            ("zone projects/p/zones/us-central1-a", Some("us-central1-a")),
            ("address projects/p/regions/europe-west1/addresses/x", None),
            ("firewall projects/p/global/firewalls/f", None),
        ];
        for (resource, zone) in cases {
            assert_eq!(zone_of_resource(resource), zone, "{resource}");
        }
    }
}
