//! Seeded churn (reliability suite R1): a random sequence of user changes, drawn from a seed, applied one after
//! another to one cluster of 1–5 replicas, with Terraform and OpenTofu taking turns on the same state and a writer
//! putting keys into etcd during every apply. The changes are the ones users make: add replicas, remove them,
//! swap one for another in one apply, replace one (`-replace`), move one to another zone, roll the machine type,
//! upgrade Kubernetes by one minor (1.33 up to 1.36), grow and roll in one apply, and upgrade etcd 3.4 → 3.5 once. The cluster backs up to fake-gcs-server before
//! every change, and two disasters are drawn as well: every replica but one lost with its disk, recovered from the
//! survivor (`restore { source = "surviving_member" }`), and every replica lost, restored from the newest snapshot
//! (`source = "snapshot"`).
//!
//! After every step the walk-through's full check holds (the next plan is empty, members == replicas and all
//! voting, the static IP serves, ha-sim holds exactly what state knows), every key the writer had acknowledged
//! is still there (after a restore from a snapshot: every key acknowledged before the previous step began, whose
//! backup the snapshot is or follows), the newest snapshot is one etcd reads, and each replica's etcd data disk
//! exists and no other. A failure names the seed and the step:
//! `HA_CHURN_SEED=<seed> HA_CHURN_STEPS=<n>` replays the same sequence (with `HA_CHURN_DRY=1`, only prints it).
//! `make test` runs ten steps; the long run (`HA_CHURN_STEPS=100`) is recorded in docs/benchmarks.md.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use acceptance_tests::gcs::snapshot_status;
use acceptance_tests::walk::{check, delete_vm_and_disk, walk_config_in, with_storage, write_keys};
use acceptance_tests::{Client, FakeGcs, Sim, Workspace};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// The region's four zones (us-central1 is the sim's only region with four); a fifth replica shares a zone.
const ZONES: [&str; 4] = [
    "us-central1-a",
    "us-central1-b",
    "us-central1-c",
    "us-central1-f",
];
const MAX_REPLICAS: usize = 5;
const MACHINE_TYPES: [&str; 2] = ["e2-standard-2", "e2-standard-4"];
/// The Kubernetes minors the sequence climbs, one at a time (the version-skew policy allows no more).
const KUBERNETES: [&str; 4] = ["1.33", "1.34", "1.35", "1.36"];
const BUCKET: &str = "churn-backups";

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// The walk-through's configuration with replicas keyed by name (`var.replicas`: key → zone), so two may share a
/// zone, and the provider named by its full address, which Terraform and OpenTofu read the same way: they take
/// turns on one state. The cluster backs up to the emulator, and its `restore` block follows the variables.
fn config(sim: &Sim, gcs: &FakeGcs) -> String {
    let base = walk_config_in(sim, ZONES[0]);
    let edits = [
        (
            r#"ha = { source = "hamaster/ha" }"#,
            r#"ha = { source = "registry.terraform.io/hamaster/ha" }"#,
        ),
        (
            "variable \"zones\" {\n  type = list(string)\n}",
            "variable \"replicas\" {\n  type = map(string)\n}\nvariable \"restore_source\" {\n  type = string\n}\nvariable \"restore_generation\" {\n  type = number\n}",
        ),
        ("for_each = toset(var.zones)", "for_each = var.replicas"),
    ];
    with_storage(
        acceptance_tests::walk::edit_config(base, &edits),
        gcs,
        &format!(
            "  backup {{\n    bucket = \"{BUCKET}\"\n    keep   = 3\n  }}\n  restore {{\n    source     = var.restore_source\n    generation = var.restore_generation\n  }}\n"
        ),
    )
}

/// What the configuration says: the replicas (key → zone) and the cluster's settings that roll.
#[derive(Clone, Debug)]
struct Desired {
    replicas: BTreeMap<String, String>,
    machine_type: &'static str,
    etcd_version: &'static str,
    kubernetes_version: &'static str,
    /// The `restore` block: raising the generation asks for one recovery or restore.
    restore_source: &'static str,
    restore_generation: u32,
    /// The next replica key to hand out, so a removed key is never reused by a later add.
    next_key: usize,
}

impl Desired {
    fn tfvars(&self) -> String {
        serde_json::json!({
            "replicas": self.replicas,
            "machine_type": self.machine_type,
            "etcd_version": self.etcd_version,
            "kubernetes_version": self.kubernetes_version,
            "restore_source": self.restore_source,
            "restore_generation": self.restore_generation,
        })
        .to_string()
    }

    fn new_key(&mut self) -> String {
        self.next_key += 1;
        format!("r{:02}", self.next_key)
    }
}

/// What is lost out of band before a step's apply.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Loss {
    Nothing,
    /// Every replica's VM and data disk but the one at this index of the sorted names.
    AllBut(usize),
    /// Every replica's VM and data disk.
    All,
}

/// One step of the sequence: what is lost first, the new configuration, and the resources to `-replace` as well.
struct Step {
    label: String,
    loss: Loss,
    desired: Desired,
    replace: Vec<String>,
}

fn pick_zone(rng: &mut Pcg64Mcg) -> String {
    ZONES[rng.random_range(0..ZONES.len())].to_string()
}

fn pick_key(rng: &mut Pcg64Mcg, d: &Desired) -> String {
    let keys: Vec<&String> = d.replicas.keys().collect();
    keys[rng.random_range(0..keys.len())].clone()
}

/// Draws the next change from what the configuration says now; only changes a user could make on a healthy
/// cluster (never below one replica or above five, a swap or replace only with a replica left to serve). About
/// one draw in eleven is a disaster and its way back; a restore only once a change has taken a backup.
fn draw(rng: &mut Pcg64Mcg, now: &Desired, backed_up: bool) -> Step {
    let n = now.replicas.len();
    loop {
        let mut d = now.clone();
        let mut replace = Vec::new();
        let mut loss = Loss::Nothing;
        // Membership changes weigh most (three in ten draws add, two remove), so the size wanders over 1–5.
        let label = match rng.random_range(0..11) {
            0..=2 if n < MAX_REPLICAS => {
                let k = rng.random_range(1..=(MAX_REPLICAS - n).min(2));
                for _ in 0..k {
                    let key = d.new_key();
                    d.replicas.insert(key, pick_zone(rng));
                }
                format!("add {k} ({n}→{})", n + k)
            }
            3 | 4 if n > 1 => {
                let k = rng.random_range(1..=(n - 1).min(2));
                for _ in 0..k {
                    let key = pick_key(rng, &d);
                    d.replicas.remove(&key);
                }
                format!("remove {k} ({n}→{})", n - k)
            }
            5 if n > 1 => {
                let gone = pick_key(rng, &d);
                d.replicas.remove(&gone);
                let key = d.new_key();
                let zone = pick_zone(rng);
                d.replicas.insert(key.clone(), zone.clone());
                format!("swap {gone} for {key} in {zone} in one apply ({n} replicas)")
            }
            6 if n > 1 => {
                let key = pick_key(rng, &d);
                replace.push(format!("ha_master_replica.r[\"{key}\"]"));
                format!("replace {key} (-replace, {n} replicas)")
            }
            7 if n > 1 => {
                let key = pick_key(rng, &d);
                let from = d.replicas[&key].clone();
                let others: Vec<&str> = ZONES.iter().copied().filter(|z| *z != from).collect();
                let to = others[rng.random_range(0..others.len())].to_string();
                d.replicas.insert(key.clone(), to.clone());
                format!("move {key} from {from} to {to} ({n} replicas)")
            }
            8 if rng.random_bool(0.5) => {
                let Some(next) = next_kubernetes(d.kubernetes_version) else {
                    continue;
                };
                let from = d.kubernetes_version;
                d.kubernetes_version = next;
                format!("upgrade Kubernetes {from} → {next} on {n} replica(s)")
            }
            8 => {
                d.machine_type = other_machine_type(d.machine_type);
                format!("roll {n} replica(s) to {}", d.machine_type)
            }
            9 if n < MAX_REPLICAS && rng.random_bool(0.7) => {
                let key = d.new_key();
                d.replicas.insert(key.clone(), pick_zone(rng));
                d.machine_type = other_machine_type(d.machine_type);
                format!(
                    "add {key} and roll the others to {} in one apply ({n}→{})",
                    d.machine_type,
                    n + 1
                )
            }
            9 if d.etcd_version == "3.4" => {
                d.etcd_version = "3.5";
                format!("upgrade etcd 3.4 → 3.5 on {n} replica(s)")
            }
            10 if n > 1 && rng.random_bool(0.6) => {
                let survivor = rng.random_range(0..n);
                loss = Loss::AllBut(survivor);
                d.restore_source = "surviving_member";
                d.restore_generation += 1;
                format!(
                    "lose {} of {n} replicas with their disks, recover from the survivor",
                    n - 1
                )
            }
            10 if backed_up => {
                loss = Loss::All;
                d.restore_source = "snapshot";
                d.restore_generation += 1;
                let what = if n == 1 {
                    "the only replica with its disk".to_string()
                } else {
                    format!("all {n} replicas with their disks")
                };
                format!("lose {what}, restore from the newest snapshot")
            }
            _ => continue,
        };
        return Step {
            label,
            loss,
            desired: d,
            replace,
        };
    }
}

/// The next minor of `KUBERNETES` after `now`, while there is one.
fn next_kubernetes(now: &str) -> Option<&'static str> {
    let at = KUBERNETES.iter().position(|v| *v == now)?;
    KUBERNETES.get(at + 1).copied()
}

fn other_machine_type(now: &str) -> &'static str {
    if now == MACHINE_TYPES[0] {
        MACHINE_TYPES[1]
    } else {
        MACHINE_TYPES[0]
    }
}

/// Puts `churn/<n>` about every 100 ms through the first replica whose etcd answers, re-reading the replicas from
/// the sim as they come and go, until `stop`. Returns the keys etcd acknowledged and the next key's number.
fn write_during(sim: &Sim, start: usize, stop: &AtomicBool) -> (Vec<String>, usize) {
    let mut acked = Vec::new();
    let mut vms = sim.names("instances");
    let mut refreshed = Instant::now();
    let mut n = start;
    while !stop.load(Ordering::Relaxed) {
        if refreshed.elapsed() > Duration::from_secs(1) {
            vms = sim.names("instances");
            refreshed = Instant::now();
        }
        let key = format!("churn/{n:06}");
        let ok = vms.iter().any(|vm| {
            sim.try_ssh(vm, &["etcdctl", "--command-timeout=1s", "put", &key, "v"])
                .is_ok_and(|o| o.trim() == "OK")
        });
        if ok {
            acked.push(key);
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    (acked, n)
}

/// The writer's keys, seen from `vm`.
fn keys_on(sim: &Sim, vm: &str) -> BTreeSet<String> {
    sim.ssh(vm, &["etcdctl", "get", "churn/", "--prefix", "--keys-only"])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Every acknowledged key must be there, seen from `vm`.
fn assert_keys_kept(sim: &Sim, vm: &str, acked: &BTreeSet<String>) {
    let present = keys_on(sim, vm);
    let lost: Vec<&String> = acked.difference(&present).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged key(s) lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

/// Each replica has its etcd data disk `<replica>-pd`, and the sim has no other disk of the cluster.
fn assert_disks_match(sim: &Sim, replicas: &BTreeSet<String>) {
    let data: BTreeSet<String> = sim
        .names("disks")
        .into_iter()
        .filter(|d| d.ends_with("-pd"))
        .collect();
    let want: BTreeSet<String> = replicas.iter().map(|r| format!("{r}-pd")).collect();
    assert_eq!(data, want, "etcd data disks in the sim");
}

/// Deletes, with gcloud, the VM and data disk of every replica in `state` the loss takes.
fn lose(sim: &Sim, state: &BTreeSet<String>, loss: Loss) {
    for (i, vm) in state.iter().enumerate() {
        if loss == Loss::Nothing || loss == Loss::AllBut(i) {
            continue;
        }
        let zone = sim.instance(vm)["zone"]
            .as_str()
            .and_then(|z| z.rsplit('/').next())
            .expect("the VM's zone")
            .to_string();
        delete_vm_and_disk(sim, &zone, vm);
    }
}

/// The newest snapshot in the bucket is whole and one etcd reads.
fn assert_newest_snapshot_reads(gcs: &FakeGcs) {
    let Some(newest) = gcs
        .list(BUCKET, "")
        .into_iter()
        .max_by(|a, b| a.name.cmp(&b.name))
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("download dir");
    let status = snapshot_status(&gcs.download(BUCKET, &newest.name, dir.path()));
    assert!(
        status["revision"].as_i64().unwrap_or(0) > 0,
        "the newest snapshot {} does not read: {status}",
        newest.name
    );
}

fn replicas_in_state(ws: &Workspace) -> BTreeSet<String> {
    acceptance_tests::walk::outputs(ws)["replicas"]["value"]
        .as_array()
        .expect("replicas output")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_seeded_sequence_of_user_changes_keeps_every_key_and_leaks_nothing() {
    let seed = env_number("HA_CHURN_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            % 1_000_000
    });
    let steps = env_number("HA_CHURN_STEPS").unwrap_or(10) as usize;
    eprintln!("churn: HA_CHURN_SEED={seed} HA_CHURN_STEPS={steps}");
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let clients = Client::all();
    let first = rng.random_range(0..clients.len());

    if std::env::var_os("HA_CHURN_DRY").is_some() {
        // The sequence a seed draws, without running it: to find a seed that reaches a given change.
        let mut rng = rng.clone();
        let mut now = Desired {
            replicas: BTreeMap::from([("r01".to_string(), pick_zone(&mut rng))]),
            machine_type: MACHINE_TYPES[0],
            etcd_version: "3.4",
            kubernetes_version: KUBERNETES[0],
            restore_source: "surviving_member",
            restore_generation: 1,
            next_key: 1,
        };
        for i in 0..steps {
            let step = draw(&mut rng, &now, i > 0);
            eprintln!("churn step {}/{steps}: {}", i + 1, step.label);
            now = step.desired;
        }
        return;
    }
    let sim = Sim::start("churn");
    let gcs = FakeGcs::start("churn");
    gcs.create_bucket(BUCKET);
    let mut ws = Workspace::new(clients[first], "churn").with_timeout(Duration::from_secs(900));
    ws.write_main_tf(&config(&sim, &gcs));
    let mut now = Desired {
        replicas: BTreeMap::new(),
        machine_type: MACHINE_TYPES[0],
        etcd_version: "3.4",
        kubernetes_version: KUBERNETES[0],
        restore_source: "surviving_member",
        restore_generation: 1,
        next_key: 0,
    };
    let key = now.new_key();
    now.replicas.insert(key, pick_zone(&mut rng));
    ws.write_file("terraform.tfvars.json", &now.tfvars());
    ws.init();
    ws.apply();
    let first_vm = replicas_in_state(&ws).into_iter().next().unwrap();
    write_keys(&sim, &first_vm);

    let acked = Mutex::new(BTreeSet::new());
    // Keys acknowledged after the snapshot a restore went back to: gone by design, counted apart.
    let after_snapshot = std::sync::atomic::AtomicUsize::new(0);
    // What was acknowledged before the previous step began: the backup that step took first holds it.
    let mut acked_before_previous = BTreeSet::new();
    let mut next_key = 0;
    let mut initialised = vec![clients[first]];
    let started = Instant::now();
    for i in 0..steps {
        let client = clients[(first + i + 1) % clients.len()];
        let step = draw(&mut rng, &now, i > 0);
        let context = format!(
            "churn step {}/{steps} under {client} (HA_CHURN_SEED={seed}): {}",
            i + 1,
            step.label
        );
        eprintln!("{context}");
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            ws.switch_client(client);
            if !initialised.contains(&client) {
                ws.init();
                initialised.push(client);
            }
            let before_step = acked.lock().unwrap().clone();
            lose(&sim, &replicas_in_state(&ws), step.loss);
            ws.write_file("terraform.tfvars.json", &step.desired.tfvars());
            let mut args = vec!["apply", "-input=false", "-no-color", "-auto-approve"];
            let replace: Vec<String> = step
                .replace
                .iter()
                .map(|r| format!("-replace={r}"))
                .collect();
            args.extend(replace.iter().map(String::as_str));
            let stop = AtomicBool::new(false);
            let (out, (written, next)) = std::thread::scope(|s| {
                let writer = s.spawn(|| write_during(&sim, next_key, &stop));
                let out = ws.run(&args);
                stop.store(true, Ordering::Relaxed);
                (out, writer.join().expect("writer"))
            });
            next_key = next;
            out.assert_success();
            acked.lock().unwrap().extend(written);
            check(client, &ws, &sim, step.desired.replicas.len());
            let replicas = replicas_in_state(&ws);
            if step.loss == Loss::All {
                // What was written after the snapshot is gone by design; what the previous step's backup held
                // is not.
                let first = replicas.iter().next().expect("a replica");
                assert_keys_kept(&sim, first, &acked_before_previous);
                let present = keys_on(&sim, first);
                let mut acked = acked.lock().unwrap();
                let had = acked.len();
                acked.retain(|k| present.contains(k));
                after_snapshot.fetch_add(had - acked.len(), Ordering::Relaxed);
            }
            for vm in &replicas {
                assert_keys_kept(&sim, vm, &acked.lock().unwrap());
            }
            assert_disks_match(&sim, &replicas);
            assert_newest_snapshot_reads(&gcs);
            before_step
        }));
        match outcome {
            // Less what a restore in that step lost by design.
            Ok(before_step) => {
                let kept = acked.lock().unwrap();
                acked_before_previous = before_step.intersection(&kept).cloned().collect();
            }
            Err(panic) => {
                eprintln!(
                    "FAILED at {context}; replay with HA_CHURN_SEED={seed} HA_CHURN_STEPS={steps}"
                );
                std::panic::resume_unwind(panic);
            }
        }
        now = step.desired;
    }
    let keys = acked.lock().unwrap().len();
    let gone = after_snapshot.load(Ordering::Relaxed);
    let report = format!(
        "churn seed {seed}: steps {steps}/{steps} converged, keys lost 0 of {keys} acknowledged (and {gone} written after the snapshot a restore went back to, gone by design), leaked 0 ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    eprintln!("{report}");
    println!("{report}");
    ws.destroy();
    acceptance_tests::walk::assert_sim_empty(ws.client(), &sim);
}
