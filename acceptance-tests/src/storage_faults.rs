//! Storage faults: a proxy between the provider and a Cloud Storage emulator that breaks a seeded share of the
//! calls it carries, as a busy or failing Cloud Storage would (fake-gcs-server itself never fails). The provider
//! is pointed at the proxy (`endpoint()`) instead of the emulator; scenarios read the bucket at the emulator
//! directly, so what they see is what was stored, not what the proxy let through.
//!
//! Each call draws one of [`Fault`] or none, from a generator seeded by `arm`: the same seed draws the same
//! sequence (the order of concurrent calls may still differ, as with ha-sim's failpoints).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// What a faulted call meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// 429 Too Many Requests, the service's rate limit, before the call reaches the bucket.
    TooManyRequests,
    /// 503 Service Unavailable, before the call reaches the bucket.
    Unavailable,
    /// The connection is closed with no answer, before the call reaches the bucket.
    Reset,
    /// The call reaches the bucket and takes effect (an upload is stored), then the connection is closed with no
    /// answer: the caller cannot tell it from `Reset`, and a retry finds its own work done.
    LostAnswer,
    /// The request is read whole and never answered (the proxy lets go after `STALL`): a caller without a
    /// timeout of its own waits that long.
    Stall,
}

/// How long a stalled call is held before its connection is closed. Longer than any attempt the provider should
/// wait for, so a provider that waits for it is seen to.
pub const STALL: Duration = Duration::from_secs(300);

/// The draws: a share of calls per fault, and the generator.
struct Armed {
    rng: Pcg64Mcg,
    /// Percent of calls that meet each fault; the rest pass.
    shares: Vec<(Fault, f64)>,
    /// The next call meets a fault whatever the draw says (which fault is still drawn, by the shares' weights).
    fault_next: bool,
}

#[derive(Default)]
struct Shared {
    armed: Option<Armed>,
    fired: BTreeMap<Fault, u64>,
    calls: u64,
    /// Every call as `METHOD /path?query`, in the order the proxy took them.
    seen: Vec<String>,
}

/// The proxy; serves until dropped.
pub struct StorageFaults {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    /// Taken and shut down in `drop`, which stops the proxy and every call it holds.
    runtime: Option<tokio::runtime::Runtime>,
}

impl StorageFaults {
    /// A proxy to the emulator at `upstream` (its origin, `http://127.0.0.1:port`), passing every call until
    /// `arm`.
    pub fn start(upstream: &str) -> StorageFaults {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime for the storage proxy");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("binding a loopback port");
        let addr = listener.local_addr().expect("the listener's address");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let client = reqwest::Client::builder()
            .build()
            .expect("an HTTP client for the emulator");
        let upstream = Arc::new(upstream.trim_end_matches('/').to_string());
        let state = shared.clone();
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (client, upstream, state) = (client.clone(), upstream.clone(), state.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let (client, upstream, state) =
                            (client.clone(), upstream.clone(), state.clone());
                        async move { carry(&client, &upstream, &state, request).await }
                    });
                    // A call the proxy drops ends its connection with an error: that is the point.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        StorageFaults {
            addr,
            shared,
            runtime: Some(runtime),
        }
    }

    /// What to give the provider as `storage_custom_endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}/storage/v1/", self.addr)
    }

    /// From now on, `percent` of calls meet a fault: 429, 503, a reset before the bucket and a lost answer after
    /// it in equal parts, and a stall at a tenth of that share (each one holds its call for an attempt's length).
    pub fn arm(&self, seed: u64, percent: f64) {
        self.arm_with(seed, percent, false);
    }

    /// [`StorageFaults::arm`], and the first call meets a fault for certain. A change makes only a few storage
    /// calls (its backup's upload, listing and pruning), so a run of a few changes at 25 % still met no fault at
    /// all for about one seed in twenty, and tested nothing.
    pub fn arm_faulting_first(&self, seed: u64, percent: f64) {
        self.arm_with(seed, percent, true);
    }

    fn arm_with(&self, seed: u64, percent: f64, fault_next: bool) {
        let part = percent / 4.0;
        let shares = vec![
            (Fault::TooManyRequests, part),
            (Fault::Unavailable, part),
            (Fault::Reset, part),
            (Fault::LostAnswer, part),
            (Fault::Stall, percent / 10.0),
        ];
        self.lock().armed = Some(Armed {
            rng: Pcg64Mcg::seed_from_u64(seed),
            shares,
            fault_next,
        });
    }

    /// Every call passes again. Calls already stalled stay stalled.
    pub fn disarm(&self) {
        self.lock().armed = None;
    }

    /// How many calls met each fault since the proxy started.
    pub fn fired(&self) -> BTreeMap<Fault, u64> {
        self.lock().fired.clone()
    }

    /// How many calls the proxy carried (faulted or not).
    pub fn calls(&self) -> u64 {
        self.lock().calls
    }

    /// Every call the proxy took, as `METHOD /path?query` (query parameters percent-encoded as sent): what the
    /// service was asked, which the emulator may not keep (fake-gcs-server ignores `kmsKeyName`).
    pub fn requests(&self) -> Vec<String> {
        self.lock().seen.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for StorageFaults {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The fault this call meets, if any, counted.
fn draw(state: &Mutex<Shared>) -> Option<Fault> {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.calls += 1;
    let armed = s.armed.as_mut()?;
    // A forced fault is drawn over the faults' shares only; any other call over the whole 100 %.
    let total: f64 = armed.shares.iter().map(|(_, share)| share).sum();
    let range = if armed.fault_next { total } else { 100.0 };
    armed.fault_next = false;
    let roll = armed.rng.random_range(0.0..range);
    let mut below = 0.0;
    let fault = armed.shares.iter().find_map(|(fault, share)| {
        below += share;
        (roll < below).then_some(*fault)
    })?;
    *s.fired.entry(fault).or_default() += 1;
    Some(fault)
}

/// Why the proxy closed a connection: hyper ends the connection without an answer when the service fails.
#[derive(Debug)]
struct Dropped(&'static str);

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Dropped {}

async fn carry(
    client: &reqwest::Client,
    upstream: &str,
    state: &Mutex<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Dropped> {
    let fault = draw(state);
    let (parts, body) = request.into_parts();
    state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .seen
        .push(format!(
            "{} {}",
            parts.method,
            parts.uri.path_and_query().map_or("/", |p| p.as_str())
        ));
    // The whole request is read first, as the service would before it answers, so an upload is sent in full
    // even when it then fails.
    let body = body
        .collect()
        .await
        .map_err(|_| Dropped("the caller went away"))?
        .to_bytes();
    match fault {
        Some(Fault::TooManyRequests) => return Ok(refusal(StatusCode::TOO_MANY_REQUESTS)),
        Some(Fault::Unavailable) => return Ok(refusal(StatusCode::SERVICE_UNAVAILABLE)),
        Some(Fault::Reset) => return Err(Dropped("reset before the bucket")),
        Some(Fault::Stall) => {
            tokio::time::sleep(STALL).await;
            return Err(Dropped("stalled"));
        }
        Some(Fault::LostAnswer) | None => {}
    }
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut forward = client.request(parts.method.clone(), format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        if name != hyper::header::HOST {
            forward = forward.header(name, value);
        }
    }
    let answer = forward
        .body(body)
        .send()
        .await
        .map_err(|_| Dropped("the emulator did not answer"))?;
    if fault == Some(Fault::LostAnswer) {
        return Err(Dropped("answer lost after the bucket"));
    }
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        // hyper frames the body it is given; the emulator's framing does not carry over.
        if name != hyper::header::TRANSFER_ENCODING && name != hyper::header::CONTENT_LENGTH {
            response = response.header(name, value);
        }
    }
    let bytes = answer
        .bytes()
        .await
        .map_err(|_| Dropped("the emulator's answer broke off"))?;
    Ok(response
        .body(Full::new(bytes))
        .expect("an answer made of the emulator's own parts"))
}

/// The service's JSON error body, as Cloud Storage sends it.
fn refusal(status: StatusCode) -> Response<Full<Bytes>> {
    let body = format!(
        r#"{{"error":{{"code":{},"message":"injected by the storage-fault proxy: {}"}}}}"#,
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
