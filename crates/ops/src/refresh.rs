//! One observation of a cluster shared by every read of one refresh. Terraform refreshes sibling replicas (and
//! their cluster) concurrently, each with its own ReadResource call; they all need the same snapshot, so the first
//! caller observes and the others wait for its answer instead of asking the Compute API again. An entry lives for
//! a short time and is dropped as soon as anybody takes the cluster's lock to change it, so no change is ever
//! judged from a snapshot taken before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::observe::{Snapshot, observe};

/// Long enough for one refresh walk of a large configuration, short enough that a later plan in a long-lived
/// provider process looks again.
const MAX_AGE: Duration = Duration::from_secs(30);
/// How long one observation may take.
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(60);

type Shared = Arc<OnceCell<std::result::Result<Arc<Snapshot>, String>>>;

struct Entry {
    cell: Shared,
    /// When the observation ended: an entry's age counts from its answer, so one that took long (etcd's dial
    /// timeout, from outside its network) still serves the rest of the walk instead of being observed again.
    answered: Arc<OnceLock<Instant>>,
}

impl Entry {
    fn fresh(&self) -> bool {
        self.answered.get().is_none_or(|at| at.elapsed() < MAX_AGE)
    }
}

static CACHE: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();

fn cache() -> std::sync::MutexGuard<'static, HashMap<String, Entry>> {
    CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The cluster's snapshot for a refresh or a plan: observed once, shared by concurrent callers.
pub async fn observe_shared(ctx: &ClusterCtx) -> Result<Arc<Snapshot>> {
    let (cell, answered) = {
        let mut map = cache();
        match map.get(&ctx.spec.id) {
            Some(e) if e.fresh() => (Arc::clone(&e.cell), Arc::clone(&e.answered)),
            _ => {
                let e = Entry {
                    cell: Arc::default(),
                    answered: Arc::default(),
                };
                let shared = (Arc::clone(&e.cell), Arc::clone(&e.answered));
                map.insert(ctx.spec.id.clone(), e);
                shared
            }
        }
    };
    let answer = cell
        .get_or_init(|| async {
            let snap = observe(ctx, &[], Instant::now() + OBSERVE_TIMEOUT)
                .await
                .map(Arc::new)
                .map_err(|e| e.to_string());
            let _ = answered.set(Instant::now());
            snap
        })
        .await;
    match answer {
        Ok(snap) => Ok(Arc::clone(snap)),
        Err(e) => {
            // A failure is not kept: the next caller tries again.
            forget(&ctx.spec.id);
            Err(OpError::Other(e.clone()))
        }
    }
}

/// Drops the cluster's shared snapshot: called whenever its lock is taken, since a change may follow.
pub fn forget(cluster_id: &str) {
    cache().remove(cluster_id);
}
