//! `make bench` (`cargo run --release -p acceptance-tests --bin bench`): measures the provider against its
//! targets and prints one table. Options: `--replicas N` (200), `--plan-runs N` (5), `--handshake-runs N` (30),
//! `--strict` (exit 1 on any MISS). Uses the release provider binary (or `HA_PROVIDER_BIN`), never builds it.

mod handshake;
mod plan_time;
mod report;
mod rss;

use acceptance_tests::REQUIRED_PROVIDERS;
use report::{Row, Target};

/// The configuration whose plan is measured; `{count}` becomes the number of replicas and `{url}` ha-sim's
/// endpoint, which answers the plan-time zone check as Compute Engine would (without an endpoint that answers,
/// the plan would measure that check's timeout). Adjust it when the resources' required arguments change.
/// `required_providers` is prepended.
const REPLICA_CONFIG: &str = r#"
provider "ha" {
  project                        = "bench"
  zone                           = "europe-west1-b"
  compute_custom_endpoint        = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token                   = "bench"
}

resource "ha_master_cluster" "bench" {
  name                      = "bench"
  etcd_client_source_ranges = ["127.0.0.0/8"]
}

resource "ha_master_replica" "r" {
  count   = {count}
  cluster = ha_master_cluster.bench.spec
}
"#;

/// The same shape with the built-in terraform_data (no provider process at all): the baseline for the ratio.
const BASELINE_CONFIG: &str = r#"
resource "terraform_data" "bench" {
  input = { name = "bench" }
}

resource "terraform_data" "r" {
  count = {count}
  input = terraform_data.bench.output
}
"#;

/// The same shape on the minimal plugin (`tfplugin/examples/echo_provider.rs`, installed from its own mirror as
/// `hamaster/ha`, so `provider = ha` picks it): the floor any out-of-process provider pays.
const FLOOR_CONFIG: &str = r#"
resource "echo_thing" "bench" {
  provider = ha
  name     = "bench"
}

resource "echo_thing" "r" {
  provider = ha
  count    = {count}
  name     = echo_thing.bench.id
}
"#;

/// Where `make bench` builds the minimal plugin (`HA_ECHO_PROVIDER_BIN` overrides).
fn floor_binary() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("HA_ECHO_PROVIDER_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            acceptance_tests::repo_root().join("target/release/examples/echo_provider")
        });
    path.is_file().then_some(path)
}

const HANDSHAKE_TARGET_MS: f64 = 5.0;
const BINARY_SIZE_TARGET_MB: f64 = 25.0;
const PEAK_RSS_TARGET_MIB: f64 = 30.0;
const PLAN_RATIO_TARGET: f64 = 1.3;

struct Options {
    replicas: usize,
    plan_runs: usize,
    handshake_runs: usize,
    strict: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The RSS measurement installs this same executable as a wrapper around the provider.
    if args.first().map(String::as_str) == Some(rss::WRAP_FLAG) {
        rss::wrap_main(&args[1..]);
    }
    let options = parse_options(&args).unwrap_or_else(|e| {
        eprintln!("bench: {e}\nusage: bench [--replicas N] [--plan-runs N] [--handshake-runs N] [--strict]");
        std::process::exit(2);
    });

    let provider = acceptance_tests::provider_binary();
    eprintln!("bench: provider {}", provider.display());
    let sim = acceptance_tests::Sim::start("bench-plan");
    let replica_config = format!(
        "{REQUIRED_PROVIDERS}{}",
        REPLICA_CONFIG
            .replace("{count}", &options.replicas.to_string())
            .replace("{url}", sim.url())
    );
    let baseline_config = BASELINE_CONFIG.replace("{count}", &options.replicas.to_string());
    let floor_config = format!(
        "{REQUIRED_PROVIDERS}{}",
        FLOOR_CONFIG.replace("{count}", &options.replicas.to_string())
    );
    let floor = floor_binary();
    if floor.is_none() {
        eprintln!(
            "bench: no minimal plugin to measure the floor with: `cargo build --release -p tfplugin --example echo_provider` (make bench does)"
        );
    }
    let n = options.replicas;

    let mut rows = Vec::new();
    eprintln!("bench: time to handshake ({} runs)", options.handshake_runs);
    rows.push(Row::new(
        format!("time to handshake (median of {})", options.handshake_runs),
        Target::AtMost(HANDSHAKE_TARGET_MS, "ms"),
        handshake::median_ms(&provider, options.handshake_runs),
    ));
    rows.push(Row::new(
        "release binary size".into(),
        Target::AtMost(BINARY_SIZE_TARGET_MB, "MB"),
        std::fs::metadata(&provider)
            .map(|m| m.len() as f64 / 1e6)
            .map_err(|e| format!("{}: {e}", provider.display())),
    ));
    for client in acceptance_tests::Client::all() {
        eprintln!("bench: peak provider RSS during a plan of {n} under {client}");
        let usage = rss::measure(client, &provider, &replica_config);
        let detail = usage
            .as_ref()
            .map(|u| {
                format!(
                    "{} processes, provider CPU {:.2} s",
                    u.processes, u.cpu_secs
                )
            })
            .unwrap_or_default();
        rows.push(
            Row::new(
                format!("peak provider RSS, plan of {n} replicas ({client})"),
                Target::AtMost(PEAK_RSS_TARGET_MIB, "MiB"),
                usage.map(|u| u.peak_mib),
            )
            .with_detail(detail),
        );
    }
    for client in acceptance_tests::Client::all() {
        eprintln!(
            "bench: plan time under {client} ({} runs each)",
            options.plan_runs
        );
        let shapes = plan_time::Shapes {
            subject: &replica_config,
            floor: floor.as_deref().map(|bin| (bin, floor_config.as_str())),
            baseline: &baseline_config,
        };
        let timing = plan_time::compare(client, &shapes, options.plan_runs);
        // The target is ours against the minimal plugin (#30): both pay what any plugin pays (process starts,
        // handshakes, gRPC), so the ratio is what our schema and code add. The built-in is reported beside it.
        let (value, detail) = match timing {
            Ok(t) => {
                let detail = format!(
                    "{:.2} s; minimal plugin {}; terraform_data {:.2} s, ours = {:.2}x it",
                    t.subject_secs,
                    t.floor_secs
                        .map_or("not built".to_string(), |f| format!("{f:.2} s")),
                    t.baseline_secs,
                    t.ratio()
                );
                let value = t.floor_secs.map(|f| t.subject_secs / f).ok_or_else(|| {
                    "the minimal plugin was not built (`make bench` builds it)".to_string()
                });
                (value, detail)
            }
            Err(e) => (Err(e), String::new()),
        };
        rows.push(
            Row::new(
                format!("plan time, {n} ha_master_replica / {n} on the minimal plugin ({client}, median of {})", options.plan_runs),
                Target::AtMost(PLAN_RATIO_TARGET, "x"),
                value,
            )
            .with_detail(detail),
        );
    }

    let all_pass = report::print(&rows);
    drop(sim);
    if options.strict && !all_pass {
        std::process::exit(1);
    }
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        replicas: 200,
        plan_runs: 5,
        handshake_runs: 30,
        strict: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            let value = args.next().ok_or_else(|| format!("{name} needs a value"))?;
            match value.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{name} wants a positive number, got {value:?}")),
            }
        };
        match arg.as_str() {
            "--replicas" => options.replicas = number(arg)?,
            "--plan-runs" => options.plan_runs = number(arg)?,
            "--handshake-runs" => options.handshake_runs = number(arg)?,
            "--strict" => options.strict = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

/// Median of non-empty samples.
fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let mid = samples.len() / 2;
    if samples.len().is_multiple_of(2) {
        (samples[mid - 1] + samples[mid]) / 2.0
    } else {
        samples[mid]
    }
}
