//! The replicas one plan takes out of each cluster, gathered across the plan's resources. Terraform asks the
//! provider to plan each replica on its own, concurrently, but one provider process plans them all: each removal
//! or replacement is recorded here, and each is judged against everything recorded so far
//! (`domain::protection::check_leaves`, `domain::availability::leave_notes`). The last replica to be recorded
//! sees the whole set, so a plan whose removals together would end below the protected last voter is refused by
//! at least that one, whatever order the client plans them in.
//!
//! Sibling plans arrive within milliseconds of each other (they wait on the same cluster), so a caller waits for
//! the set to settle before it judges; then every replica usually sees the whole set and their notes agree.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use ha_domain::protection::Leaving;
use tokio::time::Instant;

/// How the replica leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// Destroyed: its member and VM are gone after the apply.
    Removed,
    /// Destroyed and created again (a rename, a zone move, a new cluster input).
    Replaced,
}

/// The set is settled once nobody joined it for this long.
const QUIET: Duration = Duration::from_millis(150);
/// Nobody waits longer than this for the set to settle.
const SETTLE_AT_MOST: Duration = Duration::from_secs(2);
/// A record older than this belongs to an earlier plan of a long-lived process, not to this one.
const MAX_AGE: Duration = Duration::from_secs(600);

#[derive(Default)]
struct Plan {
    leaving: Leaving,
    born: Option<Instant>,
    changed: Option<Instant>,
    /// How many leaves the widest set told so far counted.
    told: usize,
}

static PLANS: OnceLock<Mutex<HashMap<String, Plan>>> = OnceLock::new();

fn plans() -> std::sync::MutexGuard<'static, HashMap<String, Plan>> {
    PLANS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Records that this plan takes `replica` out of `cluster_id` and returns every leave of the plan so far, once the
/// set has settled.
pub async fn record(cluster_id: &str, replica: &str, how: Leave) -> Leaving {
    let now = Instant::now();
    {
        let mut map = plans();
        let plan = map.entry(cluster_id.to_string()).or_default();
        if plan.born.is_some_and(|b| now.duration_since(b) > MAX_AGE) {
            *plan = Plan::default();
        }
        plan.born.get_or_insert(now);
        let set = match how {
            Leave::Removed => &mut plan.leaving.removed,
            Leave::Replaced => &mut plan.leaving.replaced,
        };
        if set.insert(replica.to_string()) {
            plan.changed = Some(now);
        }
    }
    settle(cluster_id, now + SETTLE_AT_MOST).await
}

async fn settle(cluster_id: &str, until: Instant) -> Leaving {
    loop {
        let (leaving, quiet_since) = {
            let map = plans();
            let plan = map.get(cluster_id);
            (
                plan.map(|p| p.leaving.clone()).unwrap_or_default(),
                plan.and_then(|p| p.changed),
            )
        };
        let now = Instant::now();
        let quiet = quiet_since.is_none_or(|t| now.duration_since(t) >= QUIET);
        if quiet || now >= until {
            return leaving;
        }
        tokio::time::sleep(QUIET / 3).await;
    }
}

/// Whether the caller is the first to tell the plan's notes about `leaving`: once per set, and again only for a
/// wider set (a replica planned after the others had settled), so the notes are said once and the last said
/// counts every leave.
pub fn first_to_tell(cluster_id: &str, leaving: &Leaving) -> bool {
    let mut map = plans();
    let Some(plan) = map.get_mut(cluster_id) else {
        return true;
    };
    let count = leaving.removed.len() + leaving.replaced.len();
    let first = count > plan.told;
    plan.told = plan.told.max(count);
    first
}

/// Forgets the cluster's plan: called when its lock is taken, as the apply that follows starts from its own look.
pub fn forget(cluster_id: &str) {
    plans().remove(cluster_id);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Siblings arrive a little apart, as the client starts them.
    async fn after(ms: u64, id: &str, name: &str) -> Leaving {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        record(id, name, Leave::Removed).await
    }

    #[tokio::test]
    async fn concurrent_leaves_of_one_plan_all_see_the_whole_set() {
        let id = "p/r/concurrent";
        let (a, b, c) = tokio::join!(after(0, id, "a"), after(20, id, "b"), after(60, id, "c"));
        for leaving in [&a, &b, &c] {
            assert_eq!(leaving.removed.len(), 3, "{leaving:?}");
        }
        let tellers = [a, b, c].iter().filter(|l| first_to_tell(id, l)).count();
        assert_eq!(tellers, 1, "the notes are told once");
        forget(id);
    }

    #[tokio::test]
    async fn the_last_to_arrive_sees_every_earlier_leave_even_after_they_settled() {
        let id = "p/r/late";
        let first = record(id, "a", Leave::Replaced).await;
        assert_eq!(first.replaced.len(), 1);
        assert!(first_to_tell(id, &first));
        let last = record(id, "b", Leave::Removed).await;
        assert!(
            last.replaced.contains("a") && last.removed.contains("b"),
            "{last:?}"
        );
        assert!(first_to_tell(id, &last), "a wider set is told again");
        forget(id);
        assert!(record(id, "c", Leave::Removed).await.replaced.is_empty());
        forget(id);
    }
}
