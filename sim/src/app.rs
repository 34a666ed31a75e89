//! `Sim`: the one shared object behind every request, operation driver and admin call.

use crate::config::SimConfig;
use crate::fabric::Fabric;
use crate::faults::Faults;
use crate::reqlog::RequestLog;
use crate::state::Cloud;
use crate::state::links::Links;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

pub struct Sim {
    pub cfg: SimConfig,
    pub links: Links,
    /// The root URL (`http://127.0.0.1:PORT/`) links and the admin API are built from.
    pub root: String,
    cloud: Mutex<Cloud>,
    faults: Mutex<Faults>,
    reqlog: Mutex<RequestLog>,
    /// Bumped on every operation change, so `wait` long-polls wake without polling.
    ops_changed: watch::Sender<u64>,
    /// Bumped when failpoints are cleared, so stalled operations resume.
    faults_cleared: watch::Sender<u64>,
    /// Bumped on every change to the cloud; `persist` writes `state.json` behind it.
    changes: watch::Sender<u64>,
    /// Held while `state.json` is written, so the persister and the final write at a stop never interleave.
    writing: Mutex<()>,
    pub fabric: Arc<dyn Fabric>,
    /// Set to true to stop the server (admin `shutdown`, SIGTERM).
    pub stop: watch::Sender<bool>,
}

/// Locks ignoring poison: a panicked handler must not take the whole sim down with it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sim {
    pub fn new(cfg: SimConfig, root: String, cloud: Cloud, fabric: Arc<dyn Fabric>) -> Arc<Self> {
        Arc::new(Sim {
            links: Links::new(&root),
            root,
            cfg,
            cloud: Mutex::new(cloud),
            faults: Mutex::new(Faults::default()),
            reqlog: Mutex::new(RequestLog::default()),
            ops_changed: watch::channel(0).0,
            faults_cleared: watch::channel(0).0,
            changes: watch::channel(0).0,
            writing: Mutex::new(()),
            fabric,
            stop: watch::channel(false).0,
        })
    }

    pub fn cloud(&self) -> MutexGuard<'_, Cloud> {
        lock(&self.cloud)
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        lock(&self.faults)
    }

    pub fn reqlog(&self) -> MutexGuard<'_, RequestLog> {
        lock(&self.reqlog)
    }

    /// After a change to `cloud`: let the fabric converge, wake `wait`ers, and have `state.json` written (soon,
    /// with the changes around it: `persist.rs` says why not now). Takes the guard so callers show they hold the lock.
    pub fn commit(&self, cloud: &Cloud) {
        self.fabric.sync(&crate::fabric::desired(cloud, &self.cfg));
        self.ops_changed.send_modify(|n| *n += 1);
        self.changes.send_modify(|n| *n += 1);
    }

    pub fn watch_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Writes the cloud as it is now to `state.json`. The lock is held only to copy it, so requests do not wait
    /// for the encoding.
    pub fn write_state(&self) {
        let _writing = lock(&self.writing);
        let snapshot = self.cloud().clone();
        if let Err(e) = snapshot.save(&self.cfg.state_dir) {
            tracing::error!("persisting state: {e}");
        }
    }

    pub fn watch_ops(&self) -> watch::Receiver<u64> {
        self.ops_changed.subscribe()
    }

    pub fn watch_faults_cleared(&self) -> watch::Receiver<u64> {
        self.faults_cleared.subscribe()
    }

    /// A stalled request: waits until failpoints are cleared (`Sim::clear_faults`), so a test can kill its caller
    /// while the call is in flight, as it kills one during an operation.
    pub async fn hold_until_faults_cleared(&self) {
        let mut cleared = self.watch_faults_cleared();
        let _ = cleared.changed().await;
    }

    /// Clears failpoints and releases stalled operations.
    pub fn clear_faults(&self, id: Option<u64>) -> usize {
        let n = self.faults().clear(id);
        let mut cloud = self.cloud();
        for rec in cloud.operations.values_mut() {
            rec.stalled = false;
        }
        self.commit(&cloud);
        self.faults_cleared.send_modify(|n| *n += 1);
        n
    }
}
