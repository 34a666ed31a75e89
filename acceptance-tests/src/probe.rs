//! Measuring a change while it happens: a prober at the static IP (HTTPS `/healthz`, verified for that IP
//! under the cluster CA), a writer putting keys into etcd through whichever replica answers, and a sampler of
//! how many voters are down. Each runs on its own thread until the scenario's change is done, so availability
//! and data safety are measured, not assumed.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::Sim;

/// What the prober saw.
#[derive(Debug, Default)]
pub struct Probes {
    pub ok: usize,
    pub failed: usize,
    /// The first few failures, with when they happened (seconds since the start).
    pub failures: Vec<String>,
}

/// Probes `https://<ip>/healthz` every `every` until `stop` is set.
pub fn probe_static_ip(ca: &str, ip: IpAddr, every: Duration, stop: &AtomicBool) -> Probes {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = Instant::now();
    let mut out = Probes::default();
    while !stop.load(Ordering::Relaxed) {
        let answer = rt.block_on(terraform_provider_ha::ops::endpoint::probe(
            ca,
            ip,
            ip,
            443,
            Duration::from_secs(2),
        ));
        match answer {
            Ok(a) if a.status == 200 => out.ok += 1,
            other => {
                out.failed += 1;
                if out.failures.len() < 10 {
                    let why = match other {
                        Ok(a) => format!("status {} from {:?}", a.status, a.replica),
                        Err(e) => e.to_string(),
                    };
                    out.failures
                        .push(format!("{:.2}s: {why}", start.elapsed().as_secs_f64()));
                }
            }
        }
        std::thread::sleep(every);
    }
    out
}

/// What the writer did: every key etcd acknowledged, and how many puts no replica took.
#[derive(Debug, Default)]
pub struct Writes {
    pub acknowledged: Vec<String>,
    pub unanswered: usize,
}

/// Puts `<prefix>/<n>` about every `every` through the first of `vms` whose etcd answers, until `stop`.
pub fn write_through(
    sim: &Sim,
    vms: &[String],
    prefix: &str,
    every: Duration,
    stop: &AtomicBool,
) -> Writes {
    let mut out = Writes::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("{prefix}/{n:05}");
        let acked = vms.iter().any(|vm| {
            sim.try_ssh(vm, &["etcdctl", "--command-timeout=1s", "put", &key, "v"])
                .is_ok_and(|o| o.trim() == "OK")
        });
        if acked {
            out.acknowledged.push(key);
        } else {
            out.unanswered += 1;
        }
        n += 1;
        std::thread::sleep(every);
    }
    out
}

/// The most voters found down at once, sampling every VM's `etcdctl endpoint health` about every `every`.
pub fn most_voters_down(sim: &Sim, vms: &[String], every: Duration, stop: &AtomicBool) -> usize {
    let mut most = 0;
    while !stop.load(Ordering::Relaxed) {
        let down = vms
            .iter()
            .filter(|vm| {
                sim.try_ssh(
                    vm,
                    &["etcdctl", "--command-timeout=1s", "endpoint", "health"],
                )
                .is_err()
            })
            .count();
        most = most.max(down);
        std::thread::sleep(every);
    }
    most
}

/// The keys under `prefix` as `vm`'s etcd has them.
pub fn keys_under(sim: &Sim, vm: &str, prefix: &str) -> Vec<String> {
    sim.ssh(
        vm,
        &[
            "etcdctl",
            "get",
            &format!("{prefix}/"),
            "--prefix",
            "--keys-only",
        ],
    )
    .lines()
    .filter(|l| !l.trim().is_empty())
    .map(str::to_string)
    .collect()
}
