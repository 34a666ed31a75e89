//! Serializes membership and load-balancer changes of one cluster inside the provider process. Terraform applies
//! sibling replicas in parallel; joining or leaving them one at a time makes the result identical to applying them
//! one by one, and keeps etcd's membership changes strictly sequential as etcd requires.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

#[derive(Default)]
struct Entry {
    lock: Arc<AsyncMutex<()>>,
    /// Changes waiting for the lock: the holder is the last of its apply when none wait.
    waiting: Arc<AtomicUsize>,
}

static LOCKS: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();

/// Holds a cluster's lock until dropped.
pub struct ClusterLock {
    _guard: OwnedMutexGuard<()>,
    waiting: Arc<AtomicUsize>,
    cluster_id: String,
}

impl Drop for ClusterLock {
    /// A read that ran during the change saw it half done: drop that snapshot too.
    fn drop(&mut self) {
        super::refresh::forget(&self.cluster_id);
    }
}

impl ClusterLock {
    /// Whether other changes of this cluster wait to run after this one. Terraform starts sibling replicas of one
    /// apply together, so the holder with nobody waiting is the last change of the apply: the one that should
    /// judge the cluster's final shape.
    pub fn others_waiting(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }
}

/// Whether a change of `cluster_id` runs or waits in this process: the apply phase, whose snapshots are half way
/// through a change. Plan-time checks stand aside then; apply decides from its own snapshot.
pub fn busy(cluster_id: &str) -> bool {
    let map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    map.get(cluster_id)
        .is_some_and(|e| e.waiting.load(Ordering::SeqCst) > 0 || e.lock.try_lock().is_err())
}

/// Waits for, then holds, the lock of `cluster_id`.
pub async fn lock_cluster(cluster_id: &str) -> ClusterLock {
    let (lock, waiting) = {
        let mut map = LOCKS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let e = map.entry(cluster_id.to_string()).or_default();
        (Arc::clone(&e.lock), Arc::clone(&e.waiting))
    };
    waiting.fetch_add(1, Ordering::SeqCst);
    let guard = lock.lock_owned().await;
    waiting.fetch_sub(1, Ordering::SeqCst);
    // A change may follow: a snapshot shared by reads must not outlive it.
    super::refresh::forget(cluster_id);
    ClusterLock {
        _guard: guard,
        waiting,
        cluster_id: cluster_id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_per_cluster_and_it_knows_who_waits() {
        let a = lock_cluster("p/r/a").await;
        assert!(!a.others_waiting());
        // Another cluster is independent.
        let _b = lock_cluster("p/r/b").await;
        let waiting = tokio::spawn(async { lock_cluster("p/r/a").await.others_waiting() });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        assert!(a.others_waiting());
        assert!(busy("p/r/a"));
        drop(a);
        assert!(
            !waiting.await.unwrap(),
            "the last holder has nobody behind it"
        );
        assert!(!busy("p/r/a"), "free once every holder is gone");
        assert!(!busy("p/r/never-locked"));
    }
}
