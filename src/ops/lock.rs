//! Serializes membership and load-balancer changes of one cluster inside the provider process. Terraform applies
//! sibling replicas in parallel; joining or leaving them one at a time makes the result identical to applying them
//! one by one, and keeps etcd's membership changes strictly sequential as etcd requires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

static LOCKS: OnceLock<Mutex<HashMap<String, Arc<AsyncMutex<()>>>>> = OnceLock::new();

/// Waits for, then holds, the lock of `cluster_id` until the guard drops.
pub async fn lock_cluster(cluster_id: &str) -> OwnedMutexGuard<()> {
    let lock = {
        let mut map = LOCKS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Arc::clone(map.entry(cluster_id.to_string()).or_default())
    };
    lock.lock_owned().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_per_cluster() {
        let a = lock_cluster("p/r/a").await;
        // Another cluster is independent.
        let _b = lock_cluster("p/r/b").await;
        let waiting = tokio::spawn(async { lock_cluster("p/r/a").await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(a);
        waiting.await.unwrap();
    }
}
