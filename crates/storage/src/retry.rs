//! How long a call may take, and when it is tried again. Cloud Storage asks clients to retry 408, 429 and 5xx
//! answers and broken connections with exponential backoff (its "retry strategy" page); Google's client does so
//! for the writes and reads it makes, and [`retrying`] does the same for the listing and the deletes made over
//! the JSON API. Neither bounds one attempt in time: a connection that takes the request and never answers would
//! hold the change until the whole call's limit, so every attempt here has its own ([`attempt_limit`]).

use std::future::Future;
use std::time::Duration;

use google_cloud_gax::backoff_policy::BackoffPolicy;
use google_cloud_gax::exponential_backoff::{ExponentialBackoff, ExponentialBackoffBuilder};
use google_cloud_gax::retry_state::RetryState;
use tokio::time::Instant;

/// How long one call may take, retries included: a backup is refused, not waited on for ever, when the bucket
/// cannot be reached.
pub(crate) const CALL_LIMIT: Duration = Duration::from_secs(60);

/// The waits between attempts: from a quarter second, doubling, at most 4 s (jittered by gax). Cloud Storage's
/// guidance starts at one second and caps at a minute; a change waits on these calls, so they stay short and the
/// call's limit bounds them.
const FIRST_WAIT: Duration = Duration::from_millis(250);
const LONGEST_WAIT: Duration = Duration::from_secs(4);

/// How long one attempt of a small call may wait for its answer.
const ATTEMPT_BASE: Duration = Duration::from_secs(15);

/// The slowest transfer an attempt is allowed before it is taken for stalled: 4 MiB/s on top of the base, so an
/// 8 GiB snapshot may take its 35 minutes.
const SLOWEST_BYTES_PER_SECOND: u64 = 4 * 1024 * 1024;

/// How long one attempt that moves `bytes` may take before it is abandoned and tried again.
pub(crate) fn attempt_limit(bytes: u64) -> Duration {
    ATTEMPT_BASE + Duration::from_secs(bytes / SLOWEST_BYTES_PER_SECOND)
}

/// The limit of a whole call that moves `bytes`: at least `CALL_LIMIT`, and always room for two attempts.
pub(crate) fn call_limit(bytes: u64) -> Duration {
    CALL_LIMIT.max(attempt_limit(bytes) * 2)
}

/// How one attempt ended, when it did not succeed.
pub(crate) enum Failed {
    /// Worth another attempt: a broken connection, or 408, 429 or 5xx. Holds what happened.
    Transient(String),
    /// Another attempt would meet the same answer: the answer's status, when there was one, and what happened.
    Permanent(Option<u16>, String),
}

impl Failed {
    /// Sorts an answer's status: Cloud Storage's retryable codes are transient.
    pub(crate) fn from_status(status: reqwest::StatusCode, message: String) -> Failed {
        match status.as_u16() {
            408 | 429 | 500..=599 => Failed::Transient(message),
            code => Failed::Permanent(Some(code), message),
        }
    }

    /// Sorts an error of Google's client as its own retry policy for Cloud Storage does.
    pub(crate) fn from_client(e: google_cloud_storage::Error) -> Failed {
        use google_cloud_gax::retry_policy::RetryPolicy;
        use google_cloud_gax::retry_result::RetryResult;
        let status = e.http_status_code();
        let message = e.to_string();
        match google_cloud_storage::retry_policy::RetryableErrors
            .on_error(&RetryState::new(true), e)
        {
            RetryResult::Continue(_) => Failed::Transient(message),
            RetryResult::Permanent(_) | RetryResult::Exhausted(_) => {
                Failed::Permanent(status, message)
            }
        }
    }
}

/// Why a call ended without success: the last answer's status when it was a permanent refusal, and what
/// happened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) status: Option<u16>,
    pub(crate) message: String,
}

/// Runs `attempt` until it succeeds, fails permanently, or the next attempt would start past `limit` from now;
/// each attempt is abandoned after `each`, so the call ends within `limit + each`. The error is the last attempt's, with how many were made when more
/// than one.
pub(crate) async fn retrying<T, F, Fut>(
    limit: Duration,
    each: Duration,
    mut attempt: F,
) -> Result<T, Ended>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failed>>,
{
    let started = Instant::now();
    let backoff = ExponentialBackoffBuilder::new()
        .with_initial_delay(FIRST_WAIT)
        .with_maximum_delay(LONGEST_WAIT)
        .build()
        .unwrap_or_else(|_| ExponentialBackoff::default());
    let mut attempts: u32 = 0;
    loop {
        attempts += 1;
        let why = match tokio::time::timeout(each, attempt()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(Failed::Permanent(status, message))) => return Err(Ended { status, message }),
            Ok(Err(Failed::Transient(why))) => why,
            Err(_) => format!("no answer within {each:?}"),
        };
        let wait = backoff.on_failure(
            &RetryState::new(true)
                .set_start(started)
                .set_attempt_count(attempts),
        );
        if started.elapsed() + wait >= limit {
            let message = if attempts == 1 {
                why
            } else {
                format!(
                    "{why} (after {attempts} attempts in {:?})",
                    started.elapsed()
                )
            };
            return Err(Ended {
                status: None,
                message,
            });
        }
        tracing::debug!("Cloud Storage call failed, trying again in {wait:?}: {why}");
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn the_attempt_limit_grows_with_the_bytes_moved() {
        assert_eq!(attempt_limit(0), ATTEMPT_BASE);
        assert_eq!(
            attempt_limit(8 << 30),
            ATTEMPT_BASE + Duration::from_secs(2048)
        );
        assert_eq!(call_limit(0), CALL_LIMIT);
        assert_eq!(call_limit(8 << 30), attempt_limit(8 << 30) * 2);
    }

    #[test]
    fn cloud_storages_retryable_codes_are_transient() {
        for (code, transient) in [
            (408, true),
            (429, true),
            (500, true),
            (503, true),
            (403, false),
            (404, false),
            (412, false),
        ] {
            let failed =
                Failed::from_status(reqwest::StatusCode::from_u16(code).unwrap(), String::new());
            assert_eq!(matches!(failed, Failed::Transient(_)), transient, "{code}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_tried_again_and_a_permanent_one_is_not() {
        let calls = AtomicU32::new(0);
        let got = retrying(CALL_LIMIT, ATTEMPT_BASE, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(Failed::Transient("503".into())),
                _ => Ok("listed"),
            }
        })
        .await;
        assert_eq!(got, Ok("listed"));
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        let calls = AtomicU32::new(0);
        let got: Result<(), Ended> = retrying(CALL_LIMIT, ATTEMPT_BASE, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Failed::Permanent(Some(403), "forbidden".into()))
        })
        .await;
        assert_eq!(
            got,
            Err(Ended {
                status: Some(403),
                message: "forbidden".into()
            })
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_attempt_is_abandoned_and_the_next_one_answers() {
        let calls = AtomicU32::new(0);
        let started = Instant::now();
        let got = retrying(CALL_LIMIT, ATTEMPT_BASE, || async {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                std::future::pending::<()>().await;
            }
            Ok::<_, Failed>("written")
        })
        .await;
        assert_eq!(got, Ok("written"));
        assert!(started.elapsed() >= ATTEMPT_BASE && started.elapsed() < CALL_LIMIT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_answers_ends_within_its_limit_naming_its_attempts() {
        let started = Instant::now();
        let got: Result<(), Ended> = retrying(CALL_LIMIT, ATTEMPT_BASE, std::future::pending).await;
        let why = got.unwrap_err().message;
        assert!(
            why.starts_with("no answer within 15s (after 4 attempts in "),
            "{why}"
        );
        assert!(
            started.elapsed() <= CALL_LIMIT + ATTEMPT_BASE,
            "{:?}",
            started.elapsed()
        );
    }
}
