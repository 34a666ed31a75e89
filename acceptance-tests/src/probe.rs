//! Measuring a change while it happens: a prober at the static IP (HTTPS `/healthz`, verified for that IP
//! under the cluster CA), a writer putting keys into etcd through whichever replica answers, and a sampler of
//! how many voters are down. Each runs on its own thread until the scenario's change is done, so availability
//! and data safety are measured, not assumed.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::collections::BTreeSet;

use crate::vm_etcd::VmEtcd;
use crate::voters_down::{VotersDown, sample_voters_down};
use crate::walk::{outputs, replicas_by_zone};
use crate::{Client, CmdOutput, Sim, Workspace};

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
        let answer = rt.block_on(ha_ops::endpoint::probe(
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
    let mut etcds: Vec<VmEtcd> = vms.iter().map(|vm| VmEtcd::new(sim, vm)).collect();
    let mut out = Writes::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("{prefix}/{n:05}");
        if etcds.iter_mut().any(|etcd| etcd.put(&key, "v")) {
            out.acknowledged.push(key);
        } else {
            out.unanswered += 1;
        }
        n += 1;
        std::thread::sleep(every);
    }
    out
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

/// What a roll did, measured while it ran.
pub struct Measured {
    pub apply: CmdOutput,
    pub failed_probes: usize,
    pub probes: usize,
    pub probe_failures: Vec<String>,
    pub voters_down: VotersDown,
    pub acknowledged: Vec<String>,
}

/// Applies while probing the static IP, writing keys and sampling voters.
pub fn apply_measured(ws: &Workspace, sim: &Sim, prefix: &str) -> Measured {
    apply_measured_with(ws, sim, prefix, |_| {})
}

/// [`apply_measured`] with one more sampler of the scenario's own, run on its own thread until the apply ends.
pub fn apply_measured_with(
    ws: &Workspace,
    sim: &Sim,
    prefix: &str,
    also: impl Fn(&AtomicBool) + Sync,
) -> Measured {
    let out = outputs(ws);
    let ca = out["ca"]["value"].as_str().unwrap().to_string();
    let ip: IpAddr = out["ip"]["value"].as_str().unwrap().parse().unwrap();
    let vms: Vec<String> = replicas_by_zone(ws).into_values().collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let prober = s.spawn(|| probe_static_ip(&ca, ip, Duration::from_millis(50), &stop));
        let writer =
            s.spawn(|| write_through(sim, &vms, prefix, Duration::from_millis(100), &stop));
        let sampler = s.spawn(|| sample_voters_down(sim, &vms, Duration::from_millis(200), &stop));
        let extra = s.spawn(|| also(&stop));
        let apply = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        stop.store(true, Ordering::Relaxed);
        let probes = prober.join().unwrap();
        let writes = writer.join().unwrap();
        extra.join().unwrap();
        Measured {
            apply,
            failed_probes: probes.failed,
            probes: probes.ok + probes.failed,
            probe_failures: probes.failures,
            voters_down: sampler.join().unwrap(),
            acknowledged: writes.acknowledged,
        }
    })
}

/// The roll applied with zero failed probes at the static IP, at most one voter down at a time, and every
/// acknowledged write still there on every replica.
#[track_caller]
pub fn assert_rolled_cleanly(
    client: Client,
    sim: &Sim,
    vms: &[String],
    prefix: &str,
    m: &Measured,
) {
    m.apply.assert_success();
    assert_eq!(
        m.failed_probes, 0,
        "[{client}] failed probes of {}: {:?}",
        m.probes, m.probe_failures
    );
    assert!(
        m.voters_down.most <= 1,
        "[{client}] {} voters were down at once: {}",
        m.voters_down.most,
        m.voters_down.worst
    );
    assert_no_write_lost(client, sim, vms, prefix, &m.acknowledged);
}

/// Every acknowledged key is there, seen from every replica.
#[track_caller]
pub fn assert_no_write_lost(
    client: Client,
    sim: &Sim,
    vms: &[String],
    prefix: &str,
    acked: &[String],
) {
    assert!(!acked.is_empty(), "[{client}] the writer got no key in");
    for vm in vms {
        let have: BTreeSet<String> = keys_under(sim, vm, prefix).into_iter().collect();
        let lost: Vec<&String> = acked.iter().filter(|k| !have.contains(*k)).collect();
        assert!(
            lost.is_empty(),
            "[{client}] {vm} lost acknowledged writes: {lost:?}"
        );
    }
}
