//! Terraform's StopProvider, sent when the user presses Ctrl-C: Terraform then waits for every running apply to
//! return, so an apply that keeps waiting on a VM or on etcd holds the user's terminal for up to its timeout. The
//! provider cancels one token; replica creates and deletes race their work against it and return at once.
//!
//! Dropping a join or a leave mid-way is safe because their steps come from an observed snapshot: the next apply
//! observes what exists and carries on (or, for a tainted replica, removes it). The cluster's lock is a guard
//! owned by the caller, so it is released when the apply returns.

use std::future::Future;

use tfplugin::diag::Diagnostics;
use tokio_util::sync::CancellationToken;

/// What the user reads when an apply stopped because Terraform asked the provider to stop.
pub const INTERRUPTED: &str = "Interrupted: Terraform asked the provider to stop. What was made so far is \
                               saved in state; run apply again to finish.";

/// Runs `work` to completion, or until the provider is asked to stop: `None` then, and `work` is dropped where
/// it stood. A stop that came before the call wins, so no new work starts after Ctrl-C.
pub async fn unless_stopped<T>(
    stop: &CancellationToken,
    work: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        _ = stop.cancelled() => None,
        done = work => Some(done),
    }
}

/// Reports an interrupted create or delete of `what`.
pub fn report_interrupted(diags: &mut Diagnostics, what: &str) {
    diags.error(format!("{what} was interrupted"), INTERRUPTED);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_stop_ends_work_in_flight_and_prevents_new_work() {
        let stop = CancellationToken::new();
        assert_eq!(unless_stopped(&stop, async { 7 }).await, Some(7));

        let waiting = tokio::spawn({
            let stop = stop.clone();
            async move { unless_stopped(&stop, std::future::pending::<()>()).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished());
        stop.cancel();
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .expect("the stop ends the wait")
                .unwrap(),
            None
        );
        // Work that could complete at once does not start once stopped.
        assert_eq!(unless_stopped(&stop, async { 7 }).await, None);
    }

    #[tokio::test]
    async fn a_stop_releases_a_lock_held_by_the_dropped_work() {
        let stop = CancellationToken::new();
        let id = "p/r/cancel-test";
        let held = tokio::spawn({
            let stop = stop.clone();
            async move {
                let _lock = ha_ops::lock::lock_in_process(id).await;
                unless_stopped(&stop, std::future::pending::<()>()).await
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        stop.cancel();
        assert_eq!(held.await.unwrap(), None);
        tokio::time::timeout(Duration::from_secs(5), ha_ops::lock::lock_in_process(id))
            .await
            .expect("the interrupted holder released the cluster's lock");
    }
}
