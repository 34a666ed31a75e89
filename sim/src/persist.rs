//! `state.json`, written behind the changes rather than by each one.
//!
//! The file is for the next start of a sim on the same directory (and for reading a stopped one). Writing it from
//! `Sim::commit`, under the cloud's lock, serialized the whole cloud on every change: a few hundred KB of pretty
//! JSON once a scenario has made a few hundred operations, 10 to 15 times within a third of a second while a
//! replica is created, and that was 70 % of the sim's CPU in the resume matrix (docs/benchmarks.md, "Test suite").
//! Now a change only bumps a counter; this task waits [`SETTLE`] for the rest of the burst, then writes one
//! snapshot. A clean stop writes the final state after the API has stopped (`Running::stop`), so a restart on the
//! same directory sees every change. A SIGKILLed sim loses at most the last [`SETTLE`] and one write; its VMs'
//! processes die with it too, so no run resumes from that anyway. Whoever needs a running sim's state now asks it
//! (`/_sim/state`, or `/_sim/instance` as `ha-sim ssh` does) instead of reading the file.

use crate::app::Sim;
use std::sync::Arc;
use std::time::Duration;

/// How long a change waits for the changes after it before they are written together.
pub const SETTLE: Duration = Duration::from_millis(100);

/// Writes `state.json` after each burst of changes until the sim stops. Spawn it before the first commit that must
/// reach the file: it sees changes made after it subscribed.
pub fn spawn(sim: Arc<Sim>) -> tokio::task::JoinHandle<()> {
    let mut changes = sim.watch_changes();
    let mut stop = sim.stop.subscribe();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                // A stopping sim writes its final state itself (`Running::stop`).
                biased;
                _ = stop.wait_for(|s| *s) => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
            tokio::time::sleep(SETTLE).await;
            // Changes from here on wake the next round; this one writes everything before the snapshot.
            changes.borrow_and_update();
            let sim = sim.clone();
            let _ = tokio::task::spawn_blocking(move || sim.write_state()).await;
        }
    })
}
