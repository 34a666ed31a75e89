//! Log lines on stderr in hclog's JSON shape, which Terraform and OpenTofu recognise:
//! `{"@level":"info","@message":"…","@module":"ha","@timestamp":"…","key":"value"}`.
//!
//! The client reads plugin stderr and re-logs each line under `provider.terraform-provider-…`, taking the level
//! from `@level` and appending the other keys as `k=v`. It shows them only with `TF_LOG` or `TF_LOG_PROVIDER`
//! set, which is also where we take our level from.
//!
//! Nothing in this crate logs request or response payloads: values may hold secrets. Callers must not log them
//! either; log names, ids and counts.

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value as Json};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Installs the stderr logger for the whole process, tagging every line with `@module` = `module`. The level
/// comes from `TF_LOG_PROVIDER`, else `TF_LOG`; without either only warnings and errors are written. Calling it
/// twice keeps the first logger.
pub fn init_logging(module: &str) {
    let level = level_from(
        std::env::var("TF_LOG_PROVIDER").ok().as_deref(),
        std::env::var("TF_LOG").ok().as_deref(),
    );
    let subscriber = tracing_subscriber::registry().with(
        HclogLayer {
            module: module.to_owned(),
        }
        .with_filter(filter(level)),
    );
    // Fails only if a logger is already installed; the first one wins.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Terraform's rules: a level name in any case; `JSON` and anything unrecognised mean trace (as Terraform treats
/// them); `OFF` silences. An empty or absent `TF_LOG_PROVIDER` defers to `TF_LOG`.
fn level_from(tf_log_provider: Option<&str>, tf_log: Option<&str>) -> LevelFilter {
    let chosen = [tf_log_provider, tf_log]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|v| !v.is_empty());
    match chosen.map(str::to_ascii_lowercase).as_deref() {
        None => LevelFilter::WARN,
        Some("off") => LevelFilter::OFF,
        Some("error") => LevelFilter::ERROR,
        Some("warn") => LevelFilter::WARN,
        Some("info") => LevelFilter::INFO,
        Some("debug") => LevelFilter::DEBUG,
        Some(_) => LevelFilter::TRACE,
    }
}

/// The transport libraries log every HTTP/2 frame at debug and trace; at those levels their lines would bury the
/// provider's. They keep their warnings and errors.
const QUIET_DEPENDENCIES: &[&str] = &[
    "h2",
    "hyper",
    "hyper_util",
    "tonic",
    "tower",
    "rustls",
    "tokio_rustls",
];

fn filter(level: LevelFilter) -> Targets {
    let quiet = level.min(LevelFilter::WARN);
    QUIET_DEPENDENCIES
        .iter()
        .fold(Targets::new().with_default(level), |t, dep| {
            t.with_target(*dep, quiet)
        })
}

/// Writes each event as one hclog JSON line.
struct HclogLayer {
    module: String,
}

impl<S: Subscriber> Layer<S> for HclogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut line = hclog_line(
            &self.module,
            *event.metadata().level(),
            SystemTime::now(),
            |v| event.record(v),
        );
        line.push('\n');
        // One write per line so concurrent events do not interleave; a closed stderr is not worth failing over.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// Builds the JSON object for one event; `record` feeds it the event's fields.
fn hclog_line(
    module: &str,
    level: Level,
    now: SystemTime,
    record: impl FnOnce(&mut dyn Visit),
) -> String {
    let mut fields = FieldVisitor::default();
    record(&mut fields);
    let mut obj = Map::new();
    obj.insert(
        "@level".into(),
        Json::from(level.as_str().to_ascii_lowercase()),
    );
    obj.insert(
        "@message".into(),
        Json::from(fields.message.unwrap_or_default()),
    );
    obj.insert("@module".into(), Json::from(module));
    obj.insert("@timestamp".into(), Json::from(timestamp(now)));
    for (k, v) in fields.others {
        // Our keys win: a field named like one of them must not hide the level or message.
        obj.entry(k).or_insert(v);
    }
    Json::Object(obj).to_string()
}

#[derive(Default)]
struct FieldVisitor {
    message: Option<String>,
    others: Vec<(String, Json)>,
}

impl FieldVisitor {
    fn put(&mut self, field: &Field, value: Json) {
        if field.name() == "message" {
            self.message = Some(match value {
                Json::String(s) => s,
                other => other.to_string(),
            });
        } else {
            self.others.push((field.name().to_owned(), value));
        }
    }
}

impl Visit for FieldVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Json::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Json::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Json::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Json::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Json::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Json::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Json::from(format!("{value:?}")));
    }
}

/// hclog's timestamp layout, `2006-01-02T15:04:05.000000Z`, in UTC.
fn timestamp(now: SystemTime) -> String {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    let mut s = String::with_capacity(27);
    let _ = write!(
        s,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since_epoch.subsec_micros()
    );
    s
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar (Howard Hinnant's algorithm),
/// so a timestamp needs no date crate.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn level_follows_terraform_rules() {
        assert_eq!(level_from(None, None), LevelFilter::WARN);
        assert_eq!(level_from(Some("INFO"), Some("trace")), LevelFilter::INFO);
        assert_eq!(level_from(Some(""), Some("debug")), LevelFilter::DEBUG);
        assert_eq!(level_from(None, Some("json")), LevelFilter::TRACE);
        assert_eq!(level_from(None, Some("nonsense")), LevelFilter::TRACE);
        assert_eq!(level_from(Some("off"), Some("trace")), LevelFilter::OFF);
        assert_eq!(level_from(None, Some("Error")), LevelFilter::ERROR);
    }

    #[test]
    fn transport_libraries_stay_quiet_below_warn() {
        let f = filter(LevelFilter::TRACE);
        assert!(f.would_enable("h2::codec", &Level::WARN));
        assert!(!f.would_enable("h2::codec", &Level::DEBUG));
        assert!(f.would_enable("tfplugin::server", &Level::TRACE));
        let f = filter(LevelFilter::ERROR);
        assert!(!f.would_enable("hyper::proto", &Level::WARN));
    }

    #[test]
    fn timestamps_are_hclog_shaped_utc() {
        let t = UNIX_EPOCH + Duration::from_micros(1_763_769_600_123_456); // 2025-11-22T00:00:00.123456Z
        assert_eq!(timestamp(t), "2025-11-22T00:00:00.123456Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn line_has_hclog_keys_and_extra_fields() {
        // Drive the layer through a real subscriber so field recording is the real thing.
        let captured = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        struct Capture(std::sync::Arc<std::sync::Mutex<Vec<String>>>);
        impl<S: Subscriber> Layer<S> for Capture {
            fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
                let line = hclog_line("ha", *event.metadata().level(), UNIX_EPOCH, |v| {
                    event.record(v)
                });
                self.0.lock().unwrap().push(line);
            }
        }
        let subscriber = tracing_subscriber::registry().with(Capture(captured.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(rpc = "PlanResourceChange", count = 3, "rpc started");
        });
        let lines = captured.lock().unwrap();
        let j: Json = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(j["@level"], "info");
        assert_eq!(j["@message"], "rpc started");
        assert_eq!(j["@module"], "ha");
        assert_eq!(j["@timestamp"], "1970-01-01T00:00:00.000000Z");
        assert_eq!(j["rpc"], "PlanResourceChange");
        assert_eq!(j["count"], 3);
    }
}
