//! Random faults (reliability suite R2): while a grow, a roll and a shrink run, a share of the provider's calls
//! fail, drawn from a seed printed at the start (`HA_FAULT_SEED=<n>` replays the draws; the order of concurrent
//! calls may still differ). Each apply must either converge or fail with a sentence (never a crash, a panic or a
//! raw transport error), and once the faults are cleared the next apply must finish the job: the walk-through's
//! full check then holds (plan empty, members == replicas and voting, every key, the static IP serves, nothing
//! leaked).
//!
//! The cluster backs up to a Cloud Storage emulator (fake-gcs-server) before every change, as a cluster with a
//! `backup` block does: after each change converges, its newest snapshot must be one taken for that kind of
//! change, read back whole by etcd's own `etcdutl` with every key written first, no snapshot stored twice, and the
//! bucket pruned to `keep`.
//!
//! Two sources of faults, one test each:
//! - **API faults**: ha-sim answers a share of all Compute and Secret Manager calls with 429, 500 or 503 and ends
//!   a share of operations in an error (so the faults also land between a backup and the change it guards).
//! - **Storage faults**: a proxy between the provider and the emulator (`acceptance_tests::storage_faults`)
//!   answers a share of Cloud Storage calls with 429 or 503, resets the connection before the bucket, loses the
//!   answer after the bucket stored an upload, or stalls a call for longer than any attempt should wait. The
//!   backups must retry through them (or stop the change with a sentence). The first change's first storage call
//!   always meets one: the changes make few storage calls, and a seed that faulted none would test nothing.
//!
//! Before its random changes, the API test makes one fault on every run: every read of the cluster's keys fails
//! with 500, and a grow must stop with a sentence that names the secret and says to apply again, changing nothing.
//!
//! Each prints `applies converged N/N (M needed a second run)` per client; `HA_FAULT_PERCENT` raises the share
//! and `HA_FAULT_ROUNDS=N` repeats the grow, roll and shrink N times (1 in `make test`) for the long run recorded
//! in docs/benchmarks.md.

use std::time::Duration;

use acceptance_tests::faults::{Effect, Failpoint, Trigger};
use acceptance_tests::gcs::snapshot_status;
use acceptance_tests::storage_faults::StorageFaults;
use acceptance_tests::walk::{check, set_vars, walk_config, with_storage_at, write_keys};
use acceptance_tests::{Client, FakeGcs, Sim, Workspace, for_each_client};

const ZONES: [&str; 3] = ["europe-west1-b", "europe-west1-c", "europe-west1-d"];
const BUCKET: &str = "ha-backups";
const KEEP: usize = 3;

/// What the clients print when the plugin itself broke rather than refused: none may appear.
const CRASH_SIGNS: &[&str] = &[
    "panicked",
    "Plugin did not respond",
    "plugin exited",
    "transport is closing",
    "Unexpected EOF",
];

fn seed() -> u64 {
    std::env::var("HA_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000
        })
}

/// The share of calls that fail: `default` unless `HA_FAULT_PERCENT` says otherwise.
fn percent(default: f64) -> f64 {
    std::env::var("HA_FAULT_PERCENT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Where the faults come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// ha-sim's failpoints: Compute and Secret Manager calls and operations.
    Api,
    /// The proxy in front of the Cloud Storage emulator.
    Storage,
}

impl Source {
    /// The default share, in percent. A change makes hundreds of Compute calls but a handful of Cloud Storage
    /// calls (list, upload, list and delete to prune), so storage faults need a larger share to fire at all.
    fn default_percent(self) -> f64 {
        match self {
            Source::Api => 5.0,
            Source::Storage => 25.0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Source::Api => "API",
            Source::Storage => "storage",
        }
    }
}

/// Arms the random faults: `percent` of all calls answer an error status (429, 500 and 503 in equal parts) and
/// `percent` of operations end DONE with INTERNAL_ERROR.
fn arm(sim: &Sim, seed: u64, percent: f64) {
    let any_request = || Trigger::Request {
        method: None,
        api: None,
        path: None,
    };
    for (i, status) in [429, 500, 503].into_iter().enumerate() {
        sim.add_failpoint(
            Failpoint::new(any_request(), Effect::Status { status })
                .chance(percent / 3.0, seed + i as u64),
        );
    }
    sim.add_failpoint(
        Failpoint::new(
            Trigger::Operation { kind: "*".into() },
            Effect::Fail {
                code: "INTERNAL_ERROR".into(),
                message: None,
            },
        )
        .chance(percent, seed + 3),
    );
}

/// How many times the armed faults fired.
fn fired(sim: &Sim) -> u64 {
    sim.admin("faults")["faults"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["hits"].as_u64().unwrap_or(0))
        .sum()
}

fn rounds() -> usize {
    std::env::var("HA_FAULT_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// A change the run makes: its label, the replicas' zones, the other variables and how the `ha-before` of the
/// snapshot taken for it begins.
type Change = (
    String,
    &'static [&'static str],
    Vec<(&'static str, &'static str)>,
    &'static str,
);

/// Round 0 grows 1→3, rolls to e2-standard-4 and shrinks to 2; each later round grows 2→3, rolls to the other
/// machine type and shrinks to 2 again.
fn changes(rounds: usize) -> Vec<Change> {
    let machine = |round: usize| {
        if round.is_multiple_of(2) {
            "e2-standard-4"
        } else {
            "e2-standard-2"
        }
    };
    let mut out = Vec::new();
    for round in 0..rounds {
        let (before, after) = (machine(round + 1), machine(round));
        let from = if round == 0 { 1 } else { 2 };
        let grow_vars = if round == 0 {
            vec![]
        } else {
            vec![("machine_type", before)]
        };
        out.push((
            format!("round {round}: grow {from}→3"),
            &ZONES[..],
            grow_vars,
            "join of",
        ));
        out.push((
            format!("round {round}: roll the machine type to {after}"),
            &ZONES[..],
            vec![("machine_type", after)],
            "roll of replica",
        ));
        out.push((
            format!("round {round}: shrink 3→2"),
            &ZONES[..2],
            vec![("machine_type", after)],
            "removal of replica",
        ));
    }
    out
}

/// The change that just converged took a new snapshot, for its kind of change, that etcd reads back whole with
/// every key `write_keys` put; the bucket holds no more than `KEEP`, and no snapshot twice (an upload whose
/// answer was lost and that then wrote its snapshot again under another name). Returns the newest snapshot's
/// name.
///
/// "Twice" is one backup stored under two names: the same bytes, change and time taken (`ha-taken-at` is fixed
/// before the upload picks its name). Two backups of an etcd nobody wrote to in between hold the same bytes and
/// are both kept: two replicas' rolls, each backing up first, at the same revision.
fn assert_backed_up(
    gcs: &FakeGcs,
    dir: &std::path::Path,
    before: Option<String>,
    kind: &str,
    label: &str,
) -> String {
    let objects = gcs.list(BUCKET, "");
    let names: Vec<&String> = objects.iter().map(|o| &o.name).collect();
    assert!(
        !objects.is_empty() && objects.len() <= KEEP,
        "{label}: between 1 and {KEEP} snapshots kept: {names:?}"
    );
    let meta = |o: &acceptance_tests::gcs::Object, key: &str| {
        o.metadata.get(key).cloned().unwrap_or_default()
    };
    assert!(
        objects.iter().all(|o| !meta(o, "ha-sha256").is_empty()),
        "{label}: a snapshot has no ha-sha256: {objects:?}"
    );
    let mut backups: Vec<(String, String, String)> = objects
        .iter()
        .map(|o| {
            (
                meta(o, "ha-sha256"),
                meta(o, "ha-before"),
                meta(o, "ha-taken-at"),
            )
        })
        .collect();
    backups.sort();
    backups.dedup();
    assert_eq!(
        backups.len(),
        objects.len(),
        "{label}: one backup is stored under two names: {objects:?}"
    );
    let last = objects.last().expect("a snapshot");
    assert_ne!(
        Some(&last.name),
        before.as_ref(),
        "{label}: no new snapshot: {names:?}"
    );
    let before_what = last.metadata.get("ha-before").cloned().unwrap_or_default();
    assert!(
        before_what.starts_with(kind),
        "{label}: the newest snapshot was taken before {before_what:?}, not a {kind:?}"
    );
    let status = snapshot_status(&gcs.download(BUCKET, &last.name, dir));
    assert!(
        status["totalKey"].as_u64().unwrap_or(0) >= acceptance_tests::walk::KEYS as u64,
        "{label}: {} holds fewer keys than were written: {status}",
        last.name
    );
    last.name.clone()
}

fn changes_under_random_faults(client: Client, source: Source) {
    let seed = seed();
    let percent = percent(source.default_percent());
    let kind = source.name();
    eprintln!("[{client}] random {kind} faults: HA_FAULT_SEED={seed} HA_FAULT_PERCENT={percent}");
    let scenario = format!("{}-faults", kind.to_lowercase());
    let sim = Sim::start(&format!("{scenario}-{client}"));
    let gcs = FakeGcs::start(&format!("{scenario}-{client}"));
    gcs.create_bucket(BUCKET);
    // The provider reaches the emulator through the proxy in both runs; it passes every call unless armed.
    let proxy = StorageFaults::start(&gcs.origin());
    // Under storage faults an apply has less time than the proxy's stall: one that waits a stalled call out (no
    // attempt limit of its own) is killed, and the run fails.
    let limit = match source {
        Source::Api => Duration::from_secs(600),
        Source::Storage => acceptance_tests::storage_faults::STALL - Duration::from_secs(60),
    };
    let ws = Workspace::new(client, &scenario).with_timeout(limit);
    ws.write_main_tf(&with_storage_at(
        walk_config(&sim),
        &proxy.endpoint(),
        &format!("  backup {{\n    bucket = \"{BUCKET}\"\n    keep   = {KEEP}\n  }}\n"),
    ));
    ws.init();
    set_vars(&ws, &ZONES[..1], &[]);
    ws.apply();
    let first = acceptance_tests::walk::outputs(&ws)["replicas"]["value"][0]
        .as_str()
        .unwrap()
        .to_string();
    write_keys(&sim, &first);

    if source == Source::Api {
        a_failing_key_read_stops_the_grow_with_a_sentence(client, &ws, &sim);
    }

    let changes = changes(rounds());
    let downloads = tempfile::tempdir().expect("download dir");
    let (mut converged, mut second_runs, mut faults_fired, mut newest) = (0, 0, 0, None);
    for (n, (label, zones, vars, backed_up_before)) in changes.iter().enumerate() {
        set_vars(&ws, zones, vars);
        let draws = seed + 10 * n as u64;
        match source {
            Source::Api => arm(&sim, draws, percent),
            // The first change's first storage call always meets a fault: a few changes make few storage calls.
            Source::Storage if n == 0 => proxy.arm_faulting_first(draws, percent),
            Source::Storage => proxy.arm(draws, percent),
        }
        let out = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        match source {
            Source::Api => {
                faults_fired += fired(&sim);
                sim.clear_failpoints();
            }
            Source::Storage => proxy.disarm(),
        }
        let all = format!("{}{}", out.stdout, out.stderr);
        for sign in CRASH_SIGNS {
            assert!(
                !all.contains(sign),
                "[{client}] {label} (seed {seed}): the provider broke ({sign:?}) instead of refusing:\n{out}"
            );
        }
        if !out.success() {
            // Every fault here passes by itself: the error must say so, and say to apply again.
            assert!(
                out.stderr.contains("Error: ") && out.stderr.contains("apply again"),
                "[{client}] {label} (seed {seed}): a failed apply must say why and what to do:\n{out}"
            );
            eprintln!(
                "[{client}] {label}: failed under faults, the next apply finishes it:\n{}",
                out.stderr
            );
            second_runs += 1;
            ws.apply();
        }
        check(client, &ws, &sim, zones.len());
        newest = Some(assert_backed_up(
            &gcs,
            downloads.path(),
            newest,
            backed_up_before,
            &format!("[{client}] {label} (seed {seed})"),
        ));
        converged += 1;
    }
    let by_fault = match source {
        Source::Api => String::new(),
        Source::Storage => {
            let by_fault = proxy.fired();
            faults_fired = by_fault.values().sum();
            format!(" of {} calls, {by_fault:?}", proxy.calls())
        }
    };
    assert!(
        faults_fired > 0,
        "[{client}] seed {seed}: no fault fired, so this run tested nothing"
    );
    let report = format!(
        "random {kind} faults [{client}] seed {seed}, {percent}% of calls: applies converged {converged}/{} ({second_runs} needed a second run), {faults_fired} faults fired{by_fault}, keys lost 0, leaked 0",
        changes.len()
    );
    eprintln!("{report}");
    println!("{report}");
}

/// Not drawn at random, so it happens on every run: Secret Manager fails every read of the cluster's keys with
/// 500 (which the client does not retry), so a grow cannot sign its new replica. The apply must stop with the
/// error naming the secret and saying to apply again, not crash, and change nothing: the random run then starts
/// from the same one replica.
fn a_failing_key_read_stops_the_grow_with_a_sentence(client: Client, ws: &Workspace, sim: &Sim) {
    set_vars(ws, &ZONES, &[]);
    sim.add_failpoint(Failpoint::new(
        Trigger::Request {
            method: None,
            api: Some("secretmanager.secrets.versions.access".into()),
            path: None,
        },
        Effect::Status { status: 500 },
    ));
    let out = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
    sim.clear_failpoints();
    assert!(
        !out.success(),
        "[{client}] the grow went on without its keys:\n{out}"
    );
    let all = format!("{}{}", out.stdout, out.stderr);
    for sign in CRASH_SIGNS {
        assert!(!all.contains(sign), "[{client}] {sign:?}:\n{out}");
    }
    assert!(
        out.stderr.contains("secrets/walk-cluster-keys")
            && out.stderr.contains("run apply again")
            && out.stderr.contains("passing failure"),
        "[{client}] a failed key read must name the secret and say to apply again:\n{out}"
    );
    set_vars(ws, &ZONES[..1], &[]);
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(0),
        "[{client}] the failed grow changed something:\n{plan}"
    );
}

#[test]
fn a_grow_a_roll_and_a_shrink_converge_under_random_api_faults() {
    for_each_client(|client| changes_under_random_faults(client, Source::Api));
}

#[test]
fn a_grow_a_roll_and_a_shrink_converge_under_random_storage_faults() {
    for_each_client(|client| changes_under_random_faults(client, Source::Storage));
}
