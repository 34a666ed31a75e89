//! Backup overhead benchmark (issue #11): how long the backup before a change takes against the size of etcd's
//! database. A one-replica cluster with a `backup` block on ha-sim (test latencies, real etcd) and fake-gcs-server
//! is filled with 1 MiB values up to each size, then grows to two replicas and shrinks back: the join and the
//! removal each take a snapshot first. The provider logs each backup's size and duration (`backup before the
//! ...: gs://... (N bytes, revision R) in D`); this prints them with the throughput, next to the whole apply.
//!
//! Then the restore (`restore { source = "snapshot" }`) of the largest size: the replica's VM and data disk are
//! deleted, and one apply restores the newest snapshot (fetched by the VM from the emulator, restored with
//! etcd's tool, the VM rebuilt with its normal build); this prints its wall time against the snapshot's size and
//! checks every key is back.
//!
//! Run: `make build && cargo run --release -p acceptance-tests --bin bench_backup` (sizes in MiB as arguments,
//! default 16 64 256).

use std::time::{Duration, Instant};

use acceptance_tests::walk::{
    delete_vm_and_disk, edit_config, key_count, replicas_by_zone, set_zones, walk_config,
};
use acceptance_tests::{Client, FakeGcs, Sim, Workspace};

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";

/// `backup before the …: gs://… (N bytes, revision R) in D` from the provider's log, as (bytes, seconds).
fn backups_in(log: &str) -> Vec<(u64, f64)> {
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find("backup before the ")?..];
            let bytes: u64 = rest[rest.find(" (")? + 2..]
                .split(' ')
                .next()?
                .parse()
                .ok()?;
            // Terraform re-prints the provider's line with fields after it: the duration ends at its unit.
            let tail = &rest[rest.rfind(" in ")? + 4..];
            let d: String = tail
                .chars()
                .take_while(|c| c.is_ascii_digit() || ".µmsn".contains(*c))
                .collect();
            let d = d.as_str();
            let secs = if let Some(ms) = d.strip_suffix("ms") {
                ms.parse::<f64>().ok()? / 1000.0
            } else if let Some(us) = d.strip_suffix("µs") {
                us.parse::<f64>().ok()? / 1e6
            } else {
                d.strip_suffix('s')?.parse::<f64>().ok()?
            };
            Some((bytes, secs))
        })
        .collect()
}

fn main() {
    let sizes: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![16, 64, 256]
    } else {
        sizes
    };
    let sim = Sim::start("bench-backup");
    let gcs = FakeGcs::start("bench-backup");
    gcs.create_bucket("bench-backups");
    let config = edit_config(
        walk_config(&sim),
        &[
            (
                "  access_token            = \"sim-token\"\n",
                &format!(
                    "  access_token            = \"sim-token\"\n  storage_custom_endpoint = \"{}\"\n",
                    gcs.endpoint()
                ),
            ),
            (
                "  kubernetes_version        = var.kubernetes_version\n",
                "  kubernetes_version        = var.kubernetes_version\n  backup {\n    bucket = \"bench-backups\"\n    keep   = 2\n  }\n",
            ),
        ],
    );
    let ws = Workspace::new(Client::Terraform, "bench-backup")
        .with_timeout(Duration::from_secs(1800))
        .with_env("TF_LOG_PROVIDER", "INFO");
    ws.write_main_tf(&config);
    ws.init();
    set_zones(&ws, &[B]);
    ws.apply();
    let first = replicas_by_zone(&ws)[B].clone();
    println!(
        "Backup overhead: ha-sim (test latencies, real etcd 3.4), fake-gcs-server on loopback, Terraform\n"
    );
    let mut written = 0u64;
    for mib in sizes {
        // 1 MiB values (etcd's request limit is 1.5 MiB): base64 of 768 KiB of random bytes.
        let more = mib.saturating_sub(written);
        let script = format!(
            "head -c 786432 /dev/urandom | base64 -w0 > value && for i in $(seq {written} {}); do etcdctl put bench/$i < value >/dev/null || exit 1; done; rm value",
            written + more.max(1) - 1
        );
        sim.ssh(&first, &["sh", "-c", &script]);
        written += more;
        for (label, zones) in [("join", &[B, C][..]), ("removal", &[B][..])] {
            set_zones(&ws, zones);
            let started = Instant::now();
            let out = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
            let wall = started.elapsed().as_secs_f64();
            out.assert_success();
            let taken = backups_in(&out.stderr);
            let Some((bytes, secs)) = taken.last().copied() else {
                panic!(
                    "no backup in the provider's log of the {label}:\n{}",
                    out.stderr
                );
            };
            println!(
                "{mib:>4} MiB written, {label:<7}: snapshot {:.1} MiB taken, checked and uploaded in {secs:.2} s ({:.0} MiB/s); the apply took {wall:.1} s, the backup {:.0} % of it",
                bytes as f64 / 1048576.0,
                bytes as f64 / 1048576.0 / secs.max(f64::EPSILON),
                100.0 * secs / wall
            );
        }
    }
    // Every VM and disk lost: one apply restores the newest snapshot (the removal's, holding every key).
    for (zone, vm) in replicas_by_zone(&ws) {
        delete_vm_and_disk(&sim, &zone, &vm);
    }
    let restore =
        "  restore {\n    source     = \"snapshot\"\n    generation = 1\n  }\n  backup {\n";
    ws.write_main_tf(&config.replace("  backup {\n", restore));
    let newest = gcs
        .list("bench-backups", "")
        .into_iter()
        .max_by(|a, b| a.name.cmp(&b.name))
        .expect("a snapshot");
    let started = Instant::now();
    ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"])
        .assert_success();
    let wall = started.elapsed().as_secs_f64();
    let keys = key_count(&sim, &replicas_by_zone(&ws)[B], "bench/");
    assert_eq!(keys as u64, written, "keys after the restore");
    let mib = newest.size as f64 / 1048576.0;
    println!(
        "restore of {mib:.1} MiB (every VM and disk lost): the apply took {wall:.1} s ({:.0} MiB/s over the whole apply: fetch, restore, etcd's start, the rebuild), {keys} keys back",
        mib / wall
    );
    ws.destroy();
}
