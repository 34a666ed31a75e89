//! The kubelet's job for the etcd static pod: run it, and when it exits run it again, with a growing back-off.
//!
//! Supervision is a plain thread, not a task: it must outlive nothing but itself, and etcd is spawned with
//! PR_SET_PDEATHSIG, which fires when the *spawning thread* dies. Tying etcd's life to this thread means a crashed or
//! SIGKILLed sim leaves no etcd behind, while a live sim never loses one by accident.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::init::{InitStep, run};

/// How often the supervisor looks at the child and at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// What `status()` reports about the etcd container.
#[derive(Debug, Clone, Default)]
pub(crate) struct EtcdState {
    pub pid: Option<u32>,
    pub restarts: u32,
    pub last_exit: Option<String>,
}

pub(crate) struct Supervisor {
    stop: Arc<AtomicBool>,
    pub state: Arc<Mutex<EtcdState>>,
    thread: Option<JoinHandle<()>>,
}

/// Restart back-off: kubelet doubles from 10 s to 5 min; the sim's defaults are shorter (see `VmOptions`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Supervisor {
    pub(crate) fn start(
        init: Vec<InitStep>,
        argv: Vec<String>,
        log: PathBuf,
        backoff: Backoff,
    ) -> std::io::Result<Supervisor> {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(EtcdState::default()));
        let (s, st) = (stop.clone(), state.clone());
        let thread = std::thread::Builder::new()
            .name("etcd-supervisor".into())
            .spawn(move || {
                if run_init(&init, &log, backoff, &s, &st) {
                    supervise(&argv, &log, backoff, &s, &st)
                }
            })?;
        Ok(Supervisor {
            stop,
            state,
            thread: Some(thread),
        })
    }

    pub(crate) fn snapshot(&self) -> EtcdState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Kills etcd's whole process group and waits until it is reaped. Idempotent.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

fn note(log: &PathBuf, msg: &str) {
    if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(log) {
        let _ = writeln!(f, "[ha-sim kubelet] {msg}");
    }
}

fn spawn(argv: &[String], log: &PathBuf) -> std::io::Result<Child> {
    let out = OpenOptions::new().create(true).append(true).open(log)?;
    let err = out.try_clone()?;
    let parent = std::process::id() as libc::pid_t;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        // Its own group, so one killpg takes etcd and anything it ever forks.
        .process_group(0);
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The sim may have died between fork and prctl; then nobody would ever kill us.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

fn kill_group(child: &mut Child) {
    // SAFETY: plain syscall on a pid we spawned as a group leader and have not yet reaped, so it cannot be reused.
    unsafe {
        libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Sleeps up to `d`, returning true early when asked to stop.
fn sleep_or_stop(d: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
    }
    stop.load(Ordering::SeqCst)
}

/// The pod's init containers, each to completion and in order, before etcd: one that fails is run again after
/// the back-off (with the ones after it), as the kubelet does. False when the VM stopped first.
fn run_init(
    init: &[InitStep],
    log: &PathBuf,
    backoff: Backoff,
    stop: &AtomicBool,
    state: &Mutex<EtcdState>,
) -> bool {
    let mut delay = backoff.initial;
    let mut next = 0;
    while next < init.len() {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let step = &init[next];
        note(log, &format!("init container {} starting", step.name()));
        match run(step, log) {
            Ok(()) => {
                note(log, &format!("init container {} done", step.name()));
                next += 1;
            }
            Err(e) => {
                let msg = format!("init container {} failed: {e}", step.name());
                state.lock().unwrap_or_else(|e| e.into_inner()).last_exit = Some(msg.clone());
                note(log, &format!("{msg}; again in {delay:?}"));
                if sleep_or_stop(delay, stop) {
                    return false;
                }
                delay = (delay * 2).min(backoff.max);
            }
        }
    }
    true
}

fn supervise(
    argv: &[String],
    log: &PathBuf,
    backoff: Backoff,
    stop: &AtomicBool,
    state: &Mutex<EtcdState>,
) {
    let set = |f: &dyn Fn(&mut EtcdState)| f(&mut state.lock().unwrap_or_else(|e| e.into_inner()));
    let mut delay = backoff.initial;
    note(log, &format!("starting: {}", argv.join(" ")));
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let outcome = match spawn(argv, log) {
            Ok(mut child) => {
                let pid = child.id();
                set(&|s| s.pid = Some(pid));
                let status = loop {
                    if stop.load(Ordering::SeqCst) {
                        kill_group(&mut child);
                        set(&|s| s.pid = None);
                        note(log, "VM stopped: etcd killed");
                        return;
                    }
                    match child.try_wait() {
                        Ok(Some(status)) => break format!("exited: {status}"),
                        Ok(None) => std::thread::sleep(POLL),
                        Err(e) => break format!("wait failed: {e}"),
                    }
                };
                // etcd is gone, but anything it forked into its group must go with it.
                kill_group(&mut child);
                status
            }
            Err(e) => format!("could not start {}: {e}", argv[0]),
        };
        // A run that lasted longer than the longest back-off was healthy: start counting again, as the kubelet does.
        if started.elapsed() > backoff.max {
            delay = backoff.initial;
        }
        set(&|s| {
            s.pid = None;
            s.restarts += 1;
            s.last_exit = Some(outcome.clone());
        });
        note(log, &format!("etcd {outcome}; restarting in {delay:?}"));
        if sleep_or_stop(delay, stop) {
            return;
        }
        delay = (delay * 2).min(backoff.max);
    }
}
