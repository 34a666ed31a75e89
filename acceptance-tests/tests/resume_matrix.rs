//! The kill/fail matrix: an apply that grows or shrinks the cluster (or rolls, moves, restores or mends it, or
//! creates or destroys the cluster itself: the chains at the end) is stopped at every Compute operation it makes,
//! either by SIGKILL of the client and its providers while that operation runs (the operation has taken effect,
//! nobody saw it finish, nothing was saved) or by that operation failing (the provider returns an error and the
//! partial state). After each, the faults are cleared and the next apply must finish the job: the walk-through's
//! full check then holds (plan empty, etcd members == replicas and voting, keys intact, the static IP serves TLS,
//! the load balancer exactly when there are two or more replicas, and no object in the sim that state does not
//! know: nothing leaked).
//!
//! The steps are not listed by hand: each chain first runs its transitions once unfaulted and reads, from the
//! sim's request log, which operations they made and in what order, so a new step in a join or a leave is covered
//! without touching this file. The etcd steps between them (learner added, promoted, member removed) are covered
//! by the operation that follows them. Replicas use default (generated) names, so a create killed before
//! Terraform saved anything leaves objects under a name no state holds: the case that must not leak.
//!
//! Cases are data (`Case`), printed as `grow 1→2: kill@instances.insert`, and each chain prints
//! `resumed N/N, leaked 0` for its client.
//!
//! Both clients run each chain at once, each on its own sim, and split its cases (`owner`): every operation is
//! killed under one client and failed under the other, so each case runs once per test, at half the time of
//! running all of them twice. `HA_RESUME_MATRIX=full` runs every case under both clients (the long run whose
//! figures docs/benchmarks.md records).

use std::time::{Duration, Instant};

use acceptance_tests::faults::{Effect, Event, Failpoint, Trigger};
use acceptance_tests::walk::{
    assert_sim_empty, check, delete_vm_and_disk, replicas_by_zone, set_vars, set_zones,
    walk_config, with_storage, write_keys,
};
use acceptance_tests::{Client, CmdOutput, FakeGcs, Sim, Workspace, for_each_client};

/// The join's last call, which clears the VM's joining mark: its commit point. A kill while it runs leaves a
/// working replica that no state holds and that no longer looks like a dead join's leftover; no provider can
/// close that window (the create must end with some call, and Terraform saves state only once it returns), so
/// the matrix kills everywhere else and only fails this one. docs/internals/invariants.md and changes.md name the window.
const COMMIT_POINT: &str = "instances.setLabels";

/// The error code a failed operation ends with: one the provider does not retry.
const FAIL_CODE: &str = "INTERNAL_ERROR";
/// How long a faulted apply may take to reach its operation.
const REACH_BOUND: Duration = Duration::from_secs(180);

const ONE: &[&str] = &["europe-west1-b"];
const TWO: &[&str] = &["europe-west1-b", "europe-west1-c"];
const THREE: &[&str] = &["europe-west1-b", "europe-west1-c", "europe-west1-d"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// SIGKILL to the client's process group while the operation runs.
    Kill,
    /// The operation ends DONE with an error.
    Fail,
}

/// One apply from `from` to `to` replicas, interrupted at operation `kind` (or not at all).
#[derive(Clone, Debug)]
struct Case<'a> {
    label: &'static str,
    to: &'static [&'static str],
    /// Other variables of the configuration (what the masters are made of), for the roll chain.
    vars: &'a [(&'a str, &'a str)],
    fault: Option<(Mode, String)>,
}

impl std::fmt::Display for Case<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.fault {
            Some((Mode::Kill, kind)) => write!(f, "{}: kill@{kind}", self.label),
            Some((Mode::Fail, kind)) => write!(f, "{}: fail@{kind}", self.label),
            None => write!(f, "{}: unfaulted", self.label),
        }
    }
}

/// The mutations the sim saw since the last reset, as operation kinds (`instances.insert`), first occurrence
/// first. Reads and operation waits are not steps, nor is a call refused (a delete of what is already gone, a
/// secret that already exists): it changed nothing, and no failpoint could catch an operation of it.
fn mutations_since_reset(sim: &Sim) -> Vec<String> {
    let log = sim.requests(true);
    let mut kinds: Vec<String> = Vec::new();
    for e in log["entries"].as_array().into_iter().flatten() {
        let method = e["method"].as_str().unwrap_or("");
        let api = e["api"].as_str().unwrap_or("");
        let kind = api.trim_start_matches("compute.").to_string();
        let is_wait = kind.contains("Operations.");
        let took_effect = e["status"].as_u64().is_some_and(|s| s < 400);
        if method != "GET" && !is_wait && took_effect && !kind.is_empty() && !kinds.contains(&kind)
        {
            kinds.push(kind);
        }
    }
    kinds
}

/// Every mutation the sim saw since the last reset, in order, each named by its kind and, from its second
/// occurrence on, which occurrence it is (`instances.insert#2`): a restore inserts a VM three times (the restoring
/// one, its rebuild, the joiner), and each is a different moment to be killed at.
fn mutation_sequence_since_reset(sim: &Sim) -> Vec<String> {
    let log = sim.requests(true);
    let mut seen: std::collections::BTreeMap<String, u32> = Default::default();
    let mut out = Vec::new();
    for e in log["entries"].as_array().into_iter().flatten() {
        let method = e["method"].as_str().unwrap_or("");
        let kind = e["api"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches("compute.");
        let took_effect = e["status"].as_u64().is_some_and(|s| s < 400);
        if method == "GET" || kind.contains("Operations.") || kind.is_empty() || !took_effect {
            continue;
        }
        let n = seen.entry(kind.to_string()).or_default();
        *n += 1;
        out.push(if *n == 1 {
            kind.to_string()
        } else {
            format!("{kind}#{n}")
        });
    }
    out
}

/// A case's operation as `mutation_sequence_since_reset` names it: its kind, and how many of its matches to let
/// pass before the failpoint fires.
fn occurrence(kind: &str) -> (&str, u32) {
    match kind.split_once('#') {
        Some((kind, n)) => (kind, n.parse::<u32>().map_or(0, |n| n.saturating_sub(1))),
        None => (kind, 0),
    }
}

/// Secret Manager's calls (`secretmanager.secrets.create`) answer at once: a failpoint catches the request, not
/// an operation.
fn is_secret_manager(kind: &str) -> bool {
    kind.starts_with("secretmanager.")
}

/// Where a case's failpoint fires: the operation a Compute call starts, or a Secret Manager request.
fn trigger(kind: &str) -> Trigger {
    if is_secret_manager(kind) {
        Trigger::Request {
            method: None,
            api: Some(kind.into()),
            path: None,
        }
    } else {
        Trigger::Operation { kind: kind.into() }
    }
}

/// The failpoints that can still fire, with their hit counts (the sim drops one that is spent).
fn live_failpoints(sim: &Sim) -> Vec<serde_json::Value> {
    sim.admin("faults")["faults"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Whether the stall we added has caught its operation.
fn stalled(sim: &Sim) -> bool {
    live_failpoints(sim)
        .iter()
        .any(|f| f["hits"].as_u64().unwrap_or(0) > 0)
}

/// The chain that edits a replica's metadata by hand before each case.
const MEND: &str = "mend 1 replica in place";

const APPLY: &[&str] = &["apply", "-input=false", "-no-color", "-auto-approve"];
const DESTROY: &[&str] = &["destroy", "-input=false", "-no-color", "-auto-approve"];

/// Runs one case and the apply that resumes it; panics (naming the case) when the resumed cluster fails a check.
fn run(client: Client, ws: &Workspace, sim: &Sim, case: &Case<'_>) {
    set_vars(ws, case.to, case.vars);
    let resumed = interrupt_and_resume(client, ws, sim, case, APPLY, &case.fault);
    // A VM the interrupted job built carries the provider's own startup configuration, not one the state's digests
    // (recorded for the VM before it) would take for a hand edit. The mend chain edits metadata by hand itself.
    if let Some(resumed) = resumed.filter(|_| case.label != MEND) {
        assert!(
            !resumed.stdout.contains("edited out of band"),
            "[{client}] {case}: the next apply took the provider's own metadata for drift:\n{resumed}"
        );
    }
    check(client, ws, sim, case.to.len());
}

/// `command` (an apply or a destroy) with `fault`, then the same command again unfaulted, which must finish the
/// job; or, with no fault, `command` once, which must succeed. What the job left is the caller's to check.
fn interrupt_and_resume(
    client: Client,
    ws: &Workspace,
    sim: &Sim,
    case: &dyn std::fmt::Display,
    command: &[&str],
    fault: &Option<(Mode, String)>,
) -> Option<CmdOutput> {
    eprintln!("[{client}] case {case}");
    match fault {
        None => {
            let out = ws.run(command);
            assert!(
                out.success(),
                "[{client}] {case}: {command:?} failed:\n{out}"
            );
        }
        Some((Mode::Kill, named)) => {
            let (kind, skip) = occurrence(named);
            sim.add_failpoint(Failpoint::new(trigger(kind), Effect::Stall).after(skip));
            let mut child = ws.spawn(command, "killed");
            let start = Instant::now();
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!(
                        "[{client}] {case}: the {} ended ({status}) without reaching {kind}:\n{}{}",
                        command[0],
                        ws.read_file("killed.stdout"),
                        ws.read_file("killed.stderr")
                    );
                }
                if stalled(sim) {
                    break;
                }
                assert!(
                    start.elapsed() < REACH_BOUND,
                    "[{client}] {case}: {kind} not reached within {REACH_BOUND:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: kill(2) on the process group `spawn` created for this child (client and providers).
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
        }
        Some((Mode::Fail, named)) => {
            let (kind, skip) = occurrence(named);
            let effect = if is_secret_manager(kind) {
                // No operation to fail: the call itself answers an error no client retries.
                Effect::Status { status: 500 }
            } else {
                Effect::Fail {
                    code: FAIL_CODE.into(),
                    message: None,
                }
            };
            sim.add_failpoint(Failpoint::new(trigger(kind), effect).after(skip).times(1));
            let out = ws.run(command);
            // A failpoint good for one hit is gone once spent.
            assert!(
                live_failpoints(sim).is_empty(),
                "[{client}] {case}: the {} never made {named}:\n{out}",
                command[0]
            );
            assert!(
                !out.success(),
                "[{client}] {case}: a failed {named} must fail the {}:\n{out}",
                command[0]
            );
        }
    }
    if fault.is_some() {
        // Clearing releases a stalled operation: it finishes as GCE's would after the client died.
        sim.clear_failpoints();
        let resumed = ws.run(command);
        assert!(
            resumed.success(),
            "[{client}] {case}: the next {} must finish the job:\n{resumed}",
            command[0]
        );
        return Some(resumed);
    }
    None
}

/// A chain's closing line, on stderr for a live run and on stdout for the log nextest keeps
/// (`.config/nextest.toml`).
fn print_report(report: &str) {
    eprintln!("{report}");
    println!("{report}");
}

/// Whether `client` runs the case that interrupts the `index`th operation a direction makes, in `mode`. Both
/// clients learn the same operations in the same order (one provider makes them), so the two shares are
/// complementary: operation 0 is killed under Terraform and failed under OpenTofu, operation 1 the other way.
fn owner(client: Client, index: usize, mode: Mode) -> bool {
    if std::env::var("HA_RESUME_MATRIX").as_deref() == Ok("full") {
        return true;
    }
    let client_index = Client::all().iter().position(|c| *c == client).unwrap();
    (index + usize::from(mode == Mode::Fail)) % 2 == client_index
}

/// Which share of the cases the report covers.
fn share_note() -> &'static str {
    if std::env::var("HA_RESUME_MATRIX").as_deref() == Ok("full") {
        "all"
    } else {
        "its half"
    }
}

/// A chain alternates between `low` and `high` replicas: it learns each direction's operations from an unfaulted
/// run, then interrupts each direction at each of its operations, once per mode.
fn chain(client: Client, name: &str, low: &'static [&'static str], high: &'static [&'static str]) {
    let sim = Sim::start(&format!("{name}-{client}"));
    let ws = Workspace::new(client, name).with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(&sim));
    ws.init();
    // Reach `low`, one replica at a time as the walk-through does, and write the keys every check looks for.
    for n in 1..=low.len() {
        set_zones(&ws, &low[..n]);
        ws.apply();
        if n == 1 {
            let first = acceptance_tests::walk::outputs(&ws)["replicas"]["value"][0]
                .as_str()
                .unwrap()
                .to_string();
            write_keys(&sim, &first);
        }
    }
    let grow = format!("grow {}→{}", low.len(), high.len());
    let shrink = format!("shrink {}→{}", high.len(), low.len());
    let grow: &'static str = Box::leak(grow.into_boxed_str());
    let shrink: &'static str = Box::leak(shrink.into_boxed_str());

    sim.requests(true);
    run(
        client,
        &ws,
        &sim,
        &Case {
            label: grow,
            to: high,
            vars: &[],
            fault: None,
        },
    );
    let grow_ops = mutations_since_reset(&sim);
    run(
        client,
        &ws,
        &sim,
        &Case {
            label: shrink,
            to: low,
            vars: &[],
            fault: None,
        },
    );
    let shrink_ops = mutations_since_reset(&sim);
    eprintln!("[{client}] {grow} makes {grow_ops:?}; {shrink} makes {shrink_ops:?}");
    assert!(
        !grow_ops.is_empty() && !shrink_ops.is_empty(),
        "[{client}] the request log shows no operations"
    );

    let faults = |ops: &[String]| -> Vec<(Mode, String)> {
        ops.iter()
            .enumerate()
            .flat_map(|(i, k)| [(i, Mode::Kill, k.clone()), (i, Mode::Fail, k.clone())])
            .filter(|(i, mode, k)| {
                owner(client, *i, *mode) && !(*mode == Mode::Kill && k == COMMIT_POINT)
            })
            .map(|(_, mode, k)| (mode, k))
            .collect()
    };
    assert!(
        grow_ops.iter().any(|k| k == COMMIT_POINT),
        "[{client}] {grow} no longer ends with {COMMIT_POINT}: update COMMIT_POINT"
    );
    let grow_faults = faults(&grow_ops);
    let shrink_faults = faults(&shrink_ops);
    let rounds = grow_faults.len().max(shrink_faults.len());
    let mut resumed = 0;
    for r in 0..rounds {
        for (label, to, faults) in [(grow, high, &grow_faults), (shrink, low, &shrink_faults)] {
            let case = Case {
                label,
                to,
                vars: &[],
                fault: faults.get(r).cloned(),
            };
            run(client, &ws, &sim, &case);
            if case.fault.is_some() {
                resumed += 1;
            }
        }
    }
    let total = grow_faults.len() + shrink_faults.len();
    // Every case ended in `check`, which asserts the sim holds exactly what state knows: nothing leaked.
    let report = format!(
        "resume matrix [{client}] {grow} / {shrink}: resumed {resumed}/{total}, leaked 0 ({} of the cases of {} operations; kill@{COMMIT_POINT}, the commit point, not run)",
        share_note(),
        grow_ops.len() + shrink_ops.len(),
    );
    print_report(&report);
}

#[test]
fn one_and_two_replicas_resume_after_a_kill_or_a_failure_at_every_step() {
    for_each_client(|client| chain(client, "matrix12", ONE, TWO));
}

#[test]
fn two_and_three_replicas_resume_after_a_kill_or_a_failure_at_every_step() {
    for_each_client(|client| chain(client, "matrix23", TWO, THREE));
}

/// What the masters are made of after `m` machine type rolls and `i` image rolls of the roll chain: the machine
/// type toggles (stop, setMachineType, start), and each image roll toggles the image and grows the data disk by
/// a GB (delete, disks.resize, insert: a rebuild on the grown disk). Every roll is one the chain faults, so none
/// is spent only on getting back to where it started.
fn roll_settings(m: usize, i: usize) -> Vec<(&'static str, String)> {
    let machine_type = if m % 2 == 1 {
        "e2-standard-4"
    } else {
        "e2-standard-2"
    };
    let image = if i % 2 == 1 {
        "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"
    } else {
        "projects/cos-cloud/global/images/family/cos-stable"
    };
    vec![
        ("machine_type", machine_type.to_string()),
        ("image", image.to_string()),
        ("data_disk_size_gb", (20 + i).to_string()),
    ]
}

/// Runs one roll of the chain to the settings after `m` machine type and `i` image rolls.
fn roll_case(
    client: Client,
    ws: &Workspace,
    sim: &Sim,
    label: &'static str,
    (m, i): (usize, usize),
    fault: Option<(Mode, String)>,
) {
    let owned = roll_settings(m, i);
    let vars: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let case = Case {
        label,
        to: TWO,
        vars: &vars,
        fault,
    };
    run(client, ws, sim, &case);
}

/// A roll of two replicas killed (SIGKILL of the client and its providers) at every operation it makes, for each
/// kind of roll: the next apply must finish it with nothing left stopped, out of the pool or leaked, the same
/// etcd members and every key (the walk-through's full check). Each kind's operations are learned from an
/// unfaulted roll first; then rolls of both kinds alternate, each killed at the next of its operations.
fn roll_chain(client: Client) {
    let sim = Sim::start(&format!("matrix-roll-{client}"));
    let ws = Workspace::new(client, "matrix-roll").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(&sim));
    ws.init();
    for n in 1..=TWO.len() {
        set_zones(&ws, &TWO[..n]);
        ws.apply();
    }
    let first = acceptance_tests::walk::outputs(&ws)["replicas"]["value"][0]
        .as_str()
        .unwrap()
        .to_string();
    write_keys(&sim, &first);
    const MACHINE: &str = "roll machine type";
    const IMAGE: &str = "roll image and grow the data disk";
    let (mut m, mut i) = (0, 0);
    let mut learned: Vec<Vec<String>> = Vec::new();
    for label in [MACHINE, IMAGE] {
        sim.requests(true);
        if label == MACHINE {
            m += 1;
        } else {
            i += 1;
        }
        roll_case(client, &ws, &sim, label, (m, i), None);
        let ops = mutations_since_reset(&sim);
        eprintln!("[{client}] {label} makes {ops:?}");
        // The cluster's own update (its firewall rules) runs first in every apply and is not part of the roll.
        learned.push(
            ops.into_iter()
                .filter(|k| !k.starts_with("firewalls."))
                .collect(),
        );
    }
    assert!(
        learned[0].iter().any(|k| k == "instances.setMachineType")
            && learned[1].iter().any(|k| k == "instances.insert")
            && learned[1].iter().any(|k| k == "disks.resize"),
        "[{client}] the rolls did not make the operations they should: {learned:?}"
    );
    let operations = learned[0].len() + learned[1].len();
    let learned: Vec<Vec<(Mode, String)>> = learned
        .into_iter()
        .map(|ops| {
            ops.into_iter()
                .enumerate()
                .filter(|(i, _)| owner(client, *i, Mode::Kill))
                .map(|(_, k)| (Mode::Kill, k))
                .collect()
        })
        .collect();
    let mut resumed = 0;
    for (kind, label) in [MACHINE, IMAGE].into_iter().enumerate() {
        // Alternating kinds would not change what each roll meets; one kind after the other keeps the report
        // readable. Each roll starts from the settings the previous one left.
        for fault in learned[kind].clone() {
            if kind == 0 {
                m += 1;
            } else {
                i += 1;
            }
            roll_case(client, &ws, &sim, label, (m, i), Some(fault));
            resumed += 1;
        }
    }
    let total = learned[0].len() + learned[1].len();
    let report = format!(
        "resume matrix [{client}] roll machine type / roll image and grow the data disk: resumed {resumed}/{total}, leaked 0 ({} of {operations} operations' kills)",
        share_note(),
    );
    print_report(&report);
}

#[test]
fn a_roll_resumes_after_a_kill_at_every_step() {
    for_each_client(roll_chain);
}

/// A move of three replicas to another subnetwork (two are refused: see `domain::roll::move_refusal`), killed at every Compute operation it makes (the VM's delete,
/// the internal address released and reserved again, the rebuild, the pool's changes): the next apply must finish
/// it with the same etcd members at their new peer URLs and every key (the walk-through's full check). The
/// operations are learned from an unfaulted move; then the replicas move back and forth between the `default`
/// subnetwork and `masters-b`, each move killed at the next of its operations.
fn move_chain(client: Client) {
    let sim = Sim::start(&format!("matrix-move-{client}"));
    let ws = Workspace::new(client, "matrix-move").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(&sim));
    ws.init();
    for n in 1..=THREE.len() {
        set_zones(&ws, &THREE[..n]);
        ws.apply();
    }
    let first = acceptance_tests::walk::outputs(&ws)["replicas"]["value"][0]
        .as_str()
        .unwrap()
        .to_string();
    write_keys(&sim, &first);
    sim.create_subnetwork("masters-b", "europe-west1");
    const MOVE: &str = "move to another subnetwork";
    let to = |n: usize| {
        [(
            "subnetwork",
            if n % 2 == 1 { "masters-b" } else { "default" },
        )]
    };
    sim.requests(true);
    run(
        client,
        &ws,
        &sim,
        &Case {
            label: MOVE,
            to: THREE,
            vars: &to(1),
            fault: None,
        },
    );
    let learned: Vec<String> = mutations_since_reset(&sim)
        .into_iter()
        .filter(|k| !k.starts_with("firewalls."))
        .collect();
    eprintln!("[{client}] {MOVE} makes {learned:?}");
    assert!(
        [
            "instances.delete",
            "addresses.delete",
            "addresses.insert",
            "instances.insert"
        ]
        .iter()
        .all(|k| learned.iter().any(|l| l == k)),
        "[{client}] the move did not make the operations it should: {learned:?}"
    );
    let operations = learned.len();
    let mine: Vec<String> = learned
        .into_iter()
        .enumerate()
        .filter(|(i, _)| owner(client, *i, Mode::Kill))
        .map(|(_, k)| k)
        .collect();
    for (n, kind) in mine.iter().enumerate() {
        run(
            client,
            &ws,
            &sim,
            &Case {
                label: MOVE,
                to: THREE,
                vars: &to(n + 2),
                fault: Some((Mode::Kill, kind.clone())),
            },
        );
    }
    let report = format!(
        "resume matrix [{client}] {MOVE}: resumed {}/{}, leaked 0 ({} of {operations} operations' kills)",
        mine.len(),
        mine.len(),
        share_note(),
    );
    print_report(&report);
}

#[test]
fn a_subnetwork_move_resumes_after_a_kill_at_every_step() {
    for_each_client(move_chain);
}

/// The walk-through backing up to `gcs`, with its `restore` block at `generation` when given.
fn restore_config(sim: &Sim, gcs: &FakeGcs, generation: Option<u32>) -> String {
    let restore = generation.map_or(String::new(), |g| {
        format!("  restore {{\n    source     = \"snapshot\"\n    generation = {g}\n  }}\n")
    });
    with_storage(
        walk_config(sim),
        gcs,
        &format!("  backup {{\n    bucket = \"ha-matrix\"\n  }}\n{restore}"),
    )
}

/// Every VM and data disk of the cluster deleted, as in a lost project or a bad script: what a restore is for.
fn lose_every_replica(ws: &Workspace, sim: &Sim) {
    for (zone, vm) in replicas_by_zone(ws) {
        delete_vm_and_disk(sim, &zone, &vm);
    }
}

/// A restore of two replicas that lost every VM and disk, killed (SIGKILL of the client and its providers) at
/// every operation it makes, each VM insert and delete its own case (`mutation_sequence_since_reset`): the first replica comes back from the cluster's newest snapshot, the second joins
/// it. The next apply must finish the restore: two healthy voters, every key of the snapshot (written before
/// it was taken), an empty plan and nothing leaked (the walk-through's full check). The operations are learned
/// from an unfaulted restore; then the cluster is lost again before each case, with the `restore` block's
/// generation raised, and the restore killed at the next of its operations.
fn restore_chain(client: Client) {
    let sim = Sim::start(&format!("matrix-restore-{client}"));
    let gcs = FakeGcs::start(&format!("matrix-restore-{client}"));
    gcs.create_bucket("ha-matrix");
    let ws = Workspace::new(client, "matrix-restore").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&restore_config(&sim, &gcs, None));
    ws.init();
    set_zones(&ws, ONE);
    ws.apply();
    write_keys(&sim, &replicas_by_zone(&ws)[ONE[0]]);
    // The second replica's join backs up first: every snapshot from here on holds the keys.
    set_zones(&ws, TWO);
    ws.apply();
    const RESTORE: &str = "restore 2 replicas";
    let mut generation = 0;
    let mut restore = |fault: Option<(Mode, String)>| {
        lose_every_replica(&ws, &sim);
        generation += 1;
        ws.write_main_tf(&restore_config(&sim, &gcs, Some(generation)));
        sim.requests(true);
        run(
            client,
            &ws,
            &sim,
            &Case {
                label: RESTORE,
                to: TWO,
                vars: &[],
                fault,
            },
        );
    };
    restore(None);
    let learned = mutation_sequence_since_reset(&sim);
    eprintln!("[{client}] {RESTORE} makes {learned:?}");
    // A VM's data disk is created with it (`instances.insert`); the first replica's keys go to its own secret.
    assert!(
        ["instances.insert", "secretmanager.secrets.addVersion"]
            .iter()
            .all(|k| learned.iter().any(|l| l == k)),
        "[{client}] the restore did not make the operations it should: {learned:?}"
    );
    // In `make test`, every VM insert and delete (the restoring VM, its rebuild, the joiner: each a different
    // moment of the restore) and the first of each other Compute kind. The lock's repeats are the same moment
    // again; the cluster's firewall update and the replicas' Secret Manager calls are the ones every create and
    // update makes, killed by the grow and roll chains. `HA_RESUME_MATRIX=full` kills at every one.
    let every = std::env::var("HA_RESUME_MATRIX").as_deref() == Ok("full");
    let cases: Vec<String> = learned
        .into_iter()
        .filter(|k| {
            every
                || k.starts_with("instances.")
                || !(k.contains('#') || is_secret_manager(k) || k.starts_with("firewalls."))
        })
        .collect();
    let operations = cases.len();
    let mine: Vec<String> = cases
        .into_iter()
        .enumerate()
        .filter(|(i, k)| owner(client, *i, Mode::Kill) && occurrence(k).0 != COMMIT_POINT)
        .map(|(_, k)| k)
        .collect();
    for kind in &mine {
        restore(Some((Mode::Kill, kind.clone())));
    }
    let report = format!(
        "resume matrix [{client}] {RESTORE}: resumed {}/{}, leaked 0 ({} of {operations} operations' kills; kill@{COMMIT_POINT}, the commit point, not run)",
        mine.len(),
        mine.len(),
        share_note(),
    );
    print_report(&report);
}

#[test]
fn a_restore_resumes_after_a_kill_at_every_step() {
    for_each_client(restore_chain);
}

/// Someone edits a replica's metadata and labels by hand, and its VM crashes: the next apply mends it in place
/// (`domain::mend`: metadata written back, VM started, member awaited, labels set).
fn break_in_place(sim: &Sim, vm: &str) {
    sim.event(Event::SetMetadata {
        instance: vm.to_string(),
        key: "ssh-keys".into(),
        value: Some("me:ssh-ed25519 AAAA".into()),
    });
    sim.event(Event::SetLabel {
        instance: vm.to_string(),
        key: "owner".into(),
        value: Some("someone".into()),
    });
    sim.event(Event::CrashVm {
        instance: vm.to_string(),
    });
}

/// The in-place mend of the sole replica (the hardest: its member has no other to be asked through), interrupted
/// at each operation it makes, killed under one client and failed under the other (`owner`). The replica is
/// broken again before each case; the next apply must finish the mend and the full check hold.
fn mend_chain(client: Client) {
    let sim = Sim::start(&format!("matrix-mend-{client}"));
    let ws = Workspace::new(client, "matrix-mend").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(&sim));
    ws.init();
    set_zones(&ws, ONE);
    ws.apply();
    let vm = replicas_by_zone(&ws)[ONE[0]].clone();
    write_keys(&sim, &vm);
    let case = |fault| Case {
        label: MEND,
        to: ONE,
        vars: &[],
        fault,
    };
    break_in_place(&sim, &vm);
    sim.requests(true);
    run(client, &ws, &sim, &case(None));
    let learned = mutations_since_reset(&sim);
    eprintln!("[{client}] {MEND} makes {learned:?}");
    assert!(
        [
            "instances.setMetadata",
            "instances.start",
            "instances.setLabels"
        ]
        .iter()
        .all(|k| learned.iter().any(|l| l == k)),
        "[{client}] the mend did not make the operations it should: {learned:?}"
    );
    let operations = learned.len();
    let mut ran = 0;
    for (i, kind) in learned.iter().enumerate() {
        for mode in [Mode::Kill, Mode::Fail] {
            if !owner(client, i, mode) {
                continue;
            }
            break_in_place(&sim, &vm);
            run(client, &ws, &sim, &case(Some((mode, kind.clone()))));
            ran += 1;
        }
    }
    let report = format!(
        "resume matrix [{client}] {MEND}: resumed {ran}/{ran}, leaked 0 ({} of {operations} operations' kills and failures)",
        share_note(),
    );
    print_report(&report);
}

#[test]
fn an_in_place_mend_resumes_after_a_kill_or_a_failure_at_every_step() {
    for_each_client(mend_chain);
}

/// The cluster's own objects as the sim holds them: its addresses, firewall rules and secrets, by name.
fn cluster_objects(sim: &Sim) -> Vec<(&'static str, Vec<String>)> {
    let state = sim.admin("state");
    ["addresses", "firewalls", "secrets", "instances"]
        .into_iter()
        .map(|kind| {
            let mut names: Vec<String> = state[kind]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.clone())
                .collect();
            names.sort();
            (kind, names)
        })
        .collect()
}

/// A cluster with no replica, as the unfaulted create left it: the same objects in the sim, an empty plan, and
/// the static IP in state the one the sim reserved.
fn check_cluster_alone(client: Client, ws: &Workspace, sim: &Sim, want: &[(&str, Vec<String>)]) {
    assert_eq!(
        cluster_objects(sim),
        want,
        "[{client}] the cluster's objects after a resumed create"
    );
    assert_eq!(
        ws.plan_detailed_exitcode(),
        0,
        "[{client}] the plan after a resumed create must be empty"
    );
    let ip = acceptance_tests::walk::outputs(ws)["ip"]["value"]
        .as_str()
        .unwrap()
        .to_string();
    let reserved = sim.status()["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["name"] == "walk-ip")
        .map(|a| a["address"].as_str().unwrap_or_default().to_string());
    assert_eq!(
        reserved.as_deref(),
        Some(ip.as_str()),
        "[{client}] the static IP in state is not the one reserved"
    );
}

/// The cluster's own life, with no replica: its create (the static address, four firewall rules, the keys'
/// secret) and its destroy, each interrupted at every mutation it makes (each firewall rule its own case), killed
/// under one client and failed under the other (`owner`). A create is killed before Terraform saved anything, so
/// the next apply must find what the dead one made; a destroy killed after the static address (the cluster's
/// identity) went must have deleted everything else first, since the next refresh finds no cluster. After each
/// resumed create the sim holds exactly what an unfaulted create made and the plan is empty; after each resumed
/// destroy the sim is empty.
fn birth_chain(client: Client) {
    let sim = Sim::start(&format!("matrix-birth-{client}"));
    let ws = Workspace::new(client, "matrix-birth").with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(&sim));
    ws.init();
    set_zones(&ws, &[]);
    const CREATE: &str = "create a cluster";
    const DESTROY_IT: &str = "destroy it";
    sim.requests(true);
    interrupt_and_resume(client, &ws, &sim, &CREATE, APPLY, &None);
    let create_ops = mutation_sequence_since_reset(&sim);
    let made = cluster_objects(&sim);
    check_cluster_alone(client, &ws, &sim, &made);
    interrupt_and_resume(client, &ws, &sim, &DESTROY_IT, DESTROY, &None);
    let destroy_ops = mutation_sequence_since_reset(&sim);
    assert_sim_empty(client, &sim);
    eprintln!("[{client}] {CREATE} makes {create_ops:?}; {DESTROY_IT} makes {destroy_ops:?}");
    for kind in [
        "addresses.insert",
        "firewalls.insert#4",
        "secretmanager.secrets.create",
    ] {
        assert!(
            create_ops.iter().any(|k| k == kind),
            "[{client}] the create made no {kind}: {create_ops:?}"
        );
    }
    for kind in [
        "addresses.delete",
        "firewalls.delete#4",
        "secretmanager.secrets.delete",
    ] {
        assert!(
            destroy_ops.iter().any(|k| k == kind),
            "[{client}] the destroy made no {kind}: {destroy_ops:?}"
        );
    }
    let faults = |ops: &[String]| -> Vec<(Mode, String)> {
        ops.iter()
            .enumerate()
            .flat_map(|(i, k)| [(i, Mode::Kill, k.clone()), (i, Mode::Fail, k.clone())])
            .filter(|(i, mode, _)| owner(client, *i, *mode))
            .map(|(_, mode, k)| (mode, k))
            .collect()
    };
    let (create_faults, destroy_faults) = (faults(&create_ops), faults(&destroy_ops));
    let mut ran = 0;
    for r in 0..create_faults.len().max(destroy_faults.len()) {
        let create = create_faults.get(r).cloned();
        let label = Case {
            label: CREATE,
            to: &[],
            vars: &[],
            fault: create.clone(),
        };
        interrupt_and_resume(client, &ws, &sim, &label, APPLY, &create);
        check_cluster_alone(client, &ws, &sim, &made);
        let destroy = destroy_faults.get(r).cloned();
        let label = Case {
            label: DESTROY_IT,
            fault: destroy.clone(),
            ..label
        };
        interrupt_and_resume(client, &ws, &sim, &label, DESTROY, &destroy);
        assert_sim_empty(client, &sim);
        ran += usize::from(create.is_some()) + usize::from(destroy.is_some());
    }
    let report = format!(
        "resume matrix [{client}] {CREATE} / {DESTROY_IT}: resumed {ran}/{ran}, leaked 0 ({} of the cases of {} operations)",
        share_note(),
        create_ops.len() + destroy_ops.len(),
    );
    print_report(&report);
}

#[test]
fn a_cluster_create_and_destroy_resume_after_a_kill_or_a_failure_at_every_step() {
    for_each_client(birth_chain);
}
