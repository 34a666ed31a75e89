//! How many voters were down at once during a change, sampled from every VM's etcd on a thread of its own.
//!
//! "Down" has two meanings, and a voter counts as down for either:
//! - its etcd process does not answer `endpoint status` (its VM is stopped, deleted or booting), from the first
//!   such sample to the last of the run; or
//! - it answers, but a linearizable read (what `etcdctl endpoint health` asks) keeps failing for longer than
//!   [`ELECTION_GRACE`]: the member is cut off from its quorum.
//!
//! Why the grace: a linearizable read fails on *every* member while etcd elects a leader. A roll moves leadership
//! away on purpose, and on a loaded 2-core CI machine a missed heartbeat starts an election of its own; both last
//! about an election timeout (1 s by default, randomised up to 2 s). Counting those moments as voters down made the
//! roll scenarios fail with "2 voters were down at once" while only the rolled VM was down (CI of 80f4d13). A
//! member that stays cut off longer than an election can take is down for real, and counts.
//!
//! Each VM is sampled on its own thread, so one VM's timeout does not delay the others' samples, and every sample
//! is kept with its start and end; the overlap of the down intervals is computed afterwards, which is what "at
//! once" means.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::Sim;
use crate::vm_etcd::VmEtcd;

/// Longer than an etcd election under load: a linearizable read failing for longer means the member is cut off.
pub const ELECTION_GRACE: Duration = Duration::from_secs(3);

/// One look at one VM's etcd.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// When the look started and ended, since the sampling began.
    pub from: Duration,
    pub to: Duration,
    /// The member's process answered `endpoint status`.
    pub serving: bool,
    /// A linearizable read answered (implies `serving`).
    pub quorate: bool,
}

/// The most voters down at once, and a sentence saying which and when, for the assertion's message.
#[derive(Debug, Default)]
pub struct VotersDown {
    pub most: usize,
    pub worst: String,
}

/// Samples every one of `vms` about every `every` until `stop`, then finds the most down at once.
pub fn sample_voters_down(
    sim: &Sim,
    vms: &[String],
    every: Duration,
    stop: &AtomicBool,
) -> VotersDown {
    let start = Instant::now();
    let samples: Vec<(String, Vec<Sample>)> = std::thread::scope(|s| {
        let threads: Vec<_> = vms
            .iter()
            .map(|vm| {
                s.spawn(move || {
                    let mut etcd = VmEtcd::new(sim, vm);
                    let mut out = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let from = start.elapsed();
                        let serving = etcd.serving();
                        let quorate = serving && etcd.healthy();
                        out.push(Sample {
                            from,
                            to: start.elapsed(),
                            serving,
                            quorate,
                        });
                        std::thread::sleep(every);
                    }
                    (vm.clone(), out)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    most_down_at_once(&samples, ELECTION_GRACE)
}

/// The down intervals of one VM's samples (see the module's comment for what counts).
pub fn down_intervals(samples: &[Sample], grace: Duration) -> Vec<(Duration, Duration)> {
    let mut out = Vec::new();
    let runs =
        |bad: &dyn Fn(&Sample) -> bool, min: Duration, out: &mut Vec<(Duration, Duration)>| {
            let mut run: Option<(Duration, Duration)> = None;
            for s in samples {
                match (bad(s), run) {
                    (true, None) => run = Some((s.from, s.to)),
                    (true, Some((from, _))) => run = Some((from, s.to)),
                    (false, Some((from, to))) => {
                        if to - from >= min {
                            out.push((from, to));
                        }
                        run = None;
                    }
                    (false, None) => {}
                }
            }
            if let Some((from, to)) = run.filter(|(from, to)| *to - *from >= min) {
                out.push((from, to));
            }
        };
    runs(&|s| !s.serving, Duration::ZERO, &mut out);
    runs(&|s| !s.quorate, grace, &mut out);
    out
}

/// The most VMs whose down intervals overlap at one moment, and which ones then.
pub fn most_down_at_once(samples: &[(String, Vec<Sample>)], grace: Duration) -> VotersDown {
    let intervals: Vec<(&str, Duration, Duration)> = samples
        .iter()
        .flat_map(|(vm, s)| {
            down_intervals(s, grace)
                .into_iter()
                .map(move |(from, to)| (vm.as_str(), from, to))
        })
        .collect();
    let mut best = VotersDown::default();
    // The overlap is largest at the start of some interval.
    for &(_, at, _) in &intervals {
        let mut down: Vec<&str> = intervals
            .iter()
            .filter(|(_, from, to)| *from <= at && at <= *to)
            .map(|(vm, ..)| *vm)
            .collect();
        down.sort();
        down.dedup();
        if down.len() > best.most {
            best = VotersDown {
                most: down.len(),
                worst: format!("{} at {:.2}s", down.join(" and "), at.as_secs_f64()),
            };
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Samples every 200 ms, each taking 10 ms, from a string: `u` up, `e` serving without quorum, `d` not
    /// serving.
    fn samples(pattern: &str) -> Vec<Sample> {
        pattern
            .chars()
            .enumerate()
            .map(|(i, c)| Sample {
                from: ms(200 * i as u64),
                to: ms(200 * i as u64 + 10),
                serving: c != 'd',
                quorate: c == 'u',
            })
            .collect()
    }

    fn most(vms: &[&str]) -> usize {
        let s: Vec<(String, Vec<Sample>)> = vms
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("vm{i}"), samples(p)))
            .collect();
        most_down_at_once(&s, ELECTION_GRACE).most
    }

    #[test]
    fn what_counts_as_voters_down_at_once() {
        let table: &[(&str, &[&str], usize)] = &[
            ("all up", &["uuuuu", "uuuuu", "uuuuu"], 0),
            ("one rolled", &["uudddduu", "uuuuuuuu", "uuuuuuuu"], 1),
            (
                "rolled one after another",
                &["udduuuuu", "uuuudduu", "uuuuuuuu"],
                1,
            ),
            ("two stopped at once", &["uddduu", "uudduu", "uuuuuu"], 2),
            (
                "an election while one is rolled: the others fail reads for a second",
                &["uddddddddu", "uuueeeeeuu", "uuueeeeeuu"],
                1,
            ),
            (
                "a member cut off from its quorum for longer than an election",
                &[
                    "uddddddddddddddddddu",
                    "ueeeeeeeeeeeeeeeeeeu",
                    "uuuuuuuuuuuuuuuuuuuu",
                ],
                2,
            ),
            ("one sample each, apart", &["ud", "uud"], 1),
            ("a run that never ends", &["uuddd", "uuuud"], 2),
        ];
        for (what, vms, want) in table {
            assert_eq!(most(vms), *want, "{what}");
        }
    }

    #[test]
    fn the_worst_moment_names_the_vms() {
        let s = vec![
            ("a".to_string(), samples("udd")),
            ("b".to_string(), samples("uud")),
        ];
        let got = most_down_at_once(&s, ELECTION_GRACE);
        assert_eq!(got.most, 2);
        assert_eq!(got.worst, "a and b at 0.40s");
    }
}
