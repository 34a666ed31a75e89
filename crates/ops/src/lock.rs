//! Serializes membership and load-balancer changes of one cluster: inside the provider process, and across every
//! process that applies the cluster (Terragrunt stacks keep the cluster and its replicas in several states, applied
//! by separate `terraform apply` runs at the same time).
//!
//! Two layers, always taken in this order and released in reverse:
//! 1. **In process**, a tokio mutex per cluster id. Terraform applies sibling replicas in parallel; joining them one
//!    at a time makes the result identical to applying them one by one. Its `waiting` counter tells the holder
//!    whether it is the last change of its apply (`others_waiting`).
//! 2. **Across processes**, `ha-lock-*` labels on the cluster's static address, written with GCE's label
//!    fingerprint as a compare-and-set (`domain::lock` has the rules). The address exists before any replica (the
//!    cluster makes it), lives as long as the cluster, and a label write is atomic on GCE, so the same lock covers
//!    the bootstrap of the first replica and every later change. The holder renews it every `Timing::renew`;
//!    a holder that dies (SIGKILL, lost machine) stops renewing, and a waiter takes the lock over once it has seen
//!    the same fingerprint for `Timing::ttl`. docs/internals/cluster-lock.md has the argument why two processes never both mutate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use ha_domain::lock::{
    Decision, Holder, decide, holder_of, label_value, timeout_problem, waiting_message,
    with_holder, without_holder,
};
use ha_gce::{Compute, Fingerprint};

/// The cross-process lock's clocks.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// A holder that has not renewed for this long is taken for dead, and its lock is taken over.
    pub ttl: Duration,
    /// How often a holder renews: three renewals fit in one TTL, so one slow API call does not lose the lock.
    pub renew: Duration,
    /// How often a waiter reads the lock again.
    pub poll: Duration,
    /// How often a waiter says whom it waits for (at info: visible with TF_LOG_PROVIDER=info).
    pub say: Duration,
}

impl Timing {
    /// The clocks for a TTL (the provider's `lock_ttl`): three renewals per TTL, and a waiter that looks at least
    /// five times per TTL (every 2 s at most), so it takes a dead holder's lock soon after the TTL has passed.
    pub fn with_ttl(ttl: Duration) -> Timing {
        Timing {
            ttl,
            renew: ttl / 3,
            poll: (ttl / 5).min(Duration::from_secs(2)),
            say: Duration::from_secs(10),
        }
    }
}

#[derive(Default)]
struct Entry {
    lock: Arc<AsyncMutex<()>>,
    /// Changes waiting for the lock: the holder is the last of its apply when none wait.
    waiting: Arc<AtomicUsize>,
    /// What the holder in this process is doing (`roll replica prod-a`), for a waiter's log and error.
    doing: Arc<Mutex<String>>,
}

static LOCKS: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();

/// Holds a cluster's lock until released (or dropped: the cross-process part is then released in the background,
/// and expires after `Timing::ttl` if even that cannot run).
pub struct ClusterLock {
    shared: Option<SharedLock>,
    waiting: Arc<AtomicUsize>,
    cluster_id: String,
    /// How long taking the lock took: queued behind sibling changes of this apply, then other processes.
    waited: Duration,
    /// Where this process's holder says what it is doing.
    doing: Arc<Mutex<String>>,
    // Last field: dropped after `Drop::drop` has started the shared lock's release.
    _guard: OwnedMutexGuard<()>,
}

impl Drop for ClusterLock {
    /// A read that ran during the change saw it half done: drop that snapshot too.
    fn drop(&mut self) {
        super::refresh::forget(&self.cluster_id);
        if let Some(shared) = self.shared.take() {
            shared.renewer.abort();
            // Dropped without `release` (an interrupted apply): release in the background, best effort.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { shared.release().await });
            }
        }
    }
}

impl ClusterLock {
    /// Whether other changes of this cluster wait to run after this one in this process. Terraform starts sibling
    /// replicas of one apply together, so the holder with nobody waiting is the last change of the apply: the one
    /// that should judge the cluster's final shape.
    pub fn others_waiting(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// How long the change waited for its turn. A change's deadline is moved on by this much once it holds the
    /// lock (`after_wait`): the user's timeout bounds the wait, and again the work, so time spent queued behind
    /// siblings never leaves a change too little time to finish what it starts.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// `deadline`, set when the wait for the lock began, moved on by the wait.
    pub fn after_wait(&self, deadline: Instant) -> Instant {
        deadline + self.waited
    }

    /// Releases the lock across processes, then in this process. Waiters in other processes take it on their
    /// next read.
    pub async fn release(mut self) {
        if let Some(shared) = self.shared.take() {
            shared.renewer.abort();
            shared.release().await;
        }
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

/// Who holds the cluster's lock across processes now, if anyone: a change of another apply may be half done, so
/// plan-time checks stand aside as they do for [`busy`], and say whom they stood aside for. A holder that died
/// without releasing looks the same until a waiter takes its lock over (`domain::lock::decide`), which is why
/// every apply path releases before it returns. Unreadable counts as free (plan then judges, and apply judges
/// again under the lock).
pub async fn holder_elsewhere(ctx: &ClusterCtx) -> Option<Holder> {
    let deadline = Instant::now() + Duration::from_secs(30);
    match ctx
        .compute
        .get_address(&ctx.spec.region, &ctx.names.address, deadline)
        .await
    {
        Ok(Some(a)) => holder_of(&a.labels),
        _ => None,
    }
}

/// Waits for, then holds, the lock of the cluster in this process and across processes. `doing` says what for
/// (other applies read it while they wait). Gives up with a message naming the holder at `deadline`.
pub async fn lock_cluster(ctx: &ClusterCtx, doing: &str, deadline: Instant) -> Result<ClusterLock> {
    let place = LockPlace {
        compute: ctx.compute.clone(),
        region: ctx.spec.region.clone(),
        address: ctx.names.address.clone(),
        cluster: ctx.spec.name.clone(),
        timing: Timing::with_ttl(ctx.lock_ttl),
    };
    lock_at(&ctx.spec.id, place, doing, deadline).await
}

/// Where the cross-process lock lives: the labels of the cluster's static address.
#[derive(Clone)]
pub struct LockPlace {
    pub compute: Compute,
    pub region: String,
    pub address: String,
    /// The cluster's name, for messages.
    pub cluster: String,
    pub timing: Timing,
}

pub(crate) async fn lock_at(
    cluster_id: &str,
    place: LockPlace,
    doing: &str,
    deadline: Instant,
) -> Result<ClusterLock> {
    let started = Instant::now();
    let mut lock = queue_in_process(
        cluster_id,
        &place.cluster,
        doing,
        deadline,
        place.timing.say,
    )
    .await?;
    // Taken after the in-process lock: a process waits in one place only, and its siblings queue behind it. The
    // time queued behind siblings is not taken from the wait for other processes either.
    let deadline = deadline + started.elapsed();
    lock.shared = Some(SharedLock::acquire(place, doing, deadline).await?);
    lock.waited = started.elapsed();
    Ok(lock)
}

/// The in-process layer, saying every `say` whom the change waits behind (at info). Sibling replicas of one apply
/// queue here, and each change ahead runs inside its own timeout, so the wait is given the change's timeout once
/// for each change ahead of it and once for itself: a long queue of healthy rolls never runs out, a stuck one does.
async fn queue_in_process(
    cluster_id: &str,
    cluster: &str,
    doing: &str,
    deadline: Instant,
    say: Duration,
) -> Result<ClusterLock> {
    let started = Instant::now();
    let ahead = changes_ahead(cluster_id);
    let deadline = started + deadline.saturating_duration_since(started) * (ahead + 1);
    let taking = lock_in_process(cluster_id);
    tokio::pin!(taking);
    loop {
        let next_word = (Instant::now() + say).min(deadline);
        match tokio::time::timeout_at(next_word, &mut taking).await {
            Ok(lock) => {
                *lock.doing.lock().unwrap_or_else(|p| p.into_inner()) = doing.to_string();
                if started.elapsed() >= say {
                    tracing::info!(
                        "{doing}: took the lock of cluster {cluster} after waiting {}s for its turn",
                        started.elapsed().as_secs()
                    );
                }
                return Ok(lock);
            }
            Err(_) => {
                let (holder, queued) = in_process_holder(cluster_id);
                let waited = started.elapsed().as_secs();
                if Instant::now() >= deadline {
                    return Err(OpError::Refused(
                        format!(
                            "{doing}: gave up after {waited}s waiting for its turn at cluster {cluster}'s lock"
                        ),
                        format!(
                            "Changes of one cluster run one at a time. This one waited behind \"{holder}\" ({queued} queued) for as long as its timeout allows each of the {ahead} changes that were ahead of it, and did not start: nothing of it was changed. The change ahead is taking longer than its own timeout should let it; look at what it is doing (TF_LOG_PROVIDER=info names each phase), then apply again: the next apply carries on."
                        ),
                    ));
                }
                tracing::info!(
                    "{doing}: waiting for its turn at cluster {cluster}'s lock behind \"{holder}\" ({queued} queued, {waited}s so far)"
                );
            }
        }
    }
}

/// How many changes of the cluster hold or wait for the in-process lock now.
fn changes_ahead(cluster_id: &str) -> u32 {
    let map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    map.get(cluster_id).map_or(0, |e| {
        let held = u32::from(e.lock.try_lock().is_err());
        u32::try_from(e.waiting.load(Ordering::SeqCst)).unwrap_or(u32::MAX) + held
    })
}

/// What the holder of the in-process lock is doing, and how many changes queue behind it.
fn in_process_holder(cluster_id: &str) -> (String, usize) {
    let map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    map.get(cluster_id).map_or((String::new(), 0), |e| {
        (
            e.doing.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            e.waiting.load(Ordering::SeqCst),
        )
    })
}

/// The in-process layer alone (the provider's cancellation tests hold it to make an apply wait).
pub async fn lock_in_process(cluster_id: &str) -> ClusterLock {
    let started = Instant::now();
    let (lock, waiting, doing) = {
        let mut map = LOCKS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let e = map.entry(cluster_id.to_string()).or_default();
        (
            Arc::clone(&e.lock),
            Arc::clone(&e.waiting),
            Arc::clone(&e.doing),
        )
    };
    waiting.fetch_add(1, Ordering::SeqCst);
    // Dropped before the lock is taken (a timed-out wait), the count must still come down.
    let counted = Waiting(&waiting);
    let guard = lock.lock_owned().await;
    drop(counted);
    // A change may follow: a snapshot shared by reads must not outlive it, nor a plan's record of leaves.
    super::refresh::forget(cluster_id);
    super::plan_leaves::forget(cluster_id);
    ClusterLock {
        _guard: guard,
        waiting,
        doing,
        cluster_id: cluster_id.to_string(),
        shared: None,
        waited: started.elapsed(),
    }
}

/// Counts a waiter out when dropped, whether it got the lock or gave up.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The cross-process layer, held: its renewal runs in the background until release.
struct SharedLock {
    place: LockPlace,
    token: String,
    renewer: JoinHandle<()>,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// This process, for the waiting message of another: host and pid.
fn this_process() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{host}-pid-{}", std::process::id())
}

impl SharedLock {
    async fn acquire(place: LockPlace, doing: &str, deadline: Instant) -> Result<SharedLock> {
        let mut me = Holder {
            token: uuid::Uuid::new_v4().simple().to_string(),
            holder: label_value(&this_process()),
            doing: label_value(doing),
            since: 0,
            renewed: 0,
        };
        let started = Instant::now();
        // The fingerprint last read and since when (our clock): unchanged for a TTL means a dead holder.
        let mut seen: Option<(Fingerprint, Instant)> = None;
        let mut said: Option<Instant> = None;
        // Who held the lock when we last looked, so a deadline that runs out during a read still names them.
        let mut last_holder: Option<Holder> = None;
        loop {
            let (labels, fingerprint) = match place.read(deadline).await {
                Ok(read) => read,
                Err(e) => match &last_holder {
                    Some(h) if Instant::now() + place.timing.poll >= deadline => {
                        let (summary, detail) =
                            timeout_problem(&place.cluster, h, place.timing.ttl);
                        return Err(OpError::Refused(summary, detail));
                    }
                    _ => return Err(e),
                },
            };
            let now = Instant::now();
            let unchanged_for = match &seen {
                Some((f, at)) if *f == fingerprint => now - *at,
                _ => {
                    seen = Some((fingerprint.clone(), now));
                    Duration::ZERO
                }
            };
            let current = holder_of(&labels);
            match decide(current.as_ref(), &me.token, unchanged_for, place.timing.ttl) {
                Decision::Held => return Ok(place.held(me.token)),
                Decision::Take => {
                    if let Some(dead) = &current {
                        tracing::warn!(
                            "taking over the lock of cluster {} from {} ({}), which has not renewed it for {}s",
                            place.cluster,
                            dead.holder,
                            dead.doing,
                            unchanged_for.as_secs()
                        );
                    }
                    me.since = unix_now();
                    me.renewed = me.since;
                    let mine = with_holder(&labels, &me);
                    // A stale fingerprint: someone else wrote first. Read again and decide again.
                    if place.write(&mine, &fingerprint, deadline).await? {
                        if said.is_some() {
                            tracing::info!(
                                "took the lock of cluster {} after waiting {}s",
                                place.cluster,
                                started.elapsed().as_secs()
                            );
                        }
                        return Ok(place.held(me.token));
                    }
                }
                Decision::Wait => {
                    let Some(h) = current else { continue };
                    last_holder = Some(h.clone());
                    if said.is_none_or(|at| now - at >= place.timing.say) {
                        tracing::info!("{}", waiting_message(&place.cluster, &h, now - started));
                        said = Some(now);
                    }
                    if now + place.timing.poll >= deadline {
                        let (summary, detail) =
                            timeout_problem(&place.cluster, &h, place.timing.ttl);
                        return Err(OpError::Refused(summary, detail));
                    }
                    tokio::time::sleep(place.timing.poll).await;
                }
            }
        }
    }

    /// Clears our labels if they are still ours. Best effort: failing, the lock expires after `Timing::ttl`.
    async fn release(self) {
        let deadline = Instant::now() + self.place.timing.ttl;
        for _ in 0..5 {
            let done = async {
                let (labels, fingerprint) = self.place.read(deadline).await?;
                if holder_of(&labels).is_none_or(|h| h.token != self.token) {
                    return Ok(true);
                }
                self.place
                    .write(&without_holder(&labels), &fingerprint, deadline)
                    .await
            }
            .await;
            match done {
                Ok(true) => return,
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(
                        "could not release the lock of cluster {} ({e}); it expires in {}s",
                        self.place.cluster,
                        self.place.timing.ttl.as_secs()
                    );
                    return;
                }
            }
        }
    }
}

impl LockPlace {
    async fn read(
        &self,
        deadline: Instant,
    ) -> Result<(std::collections::BTreeMap<String, String>, Fingerprint)> {
        let a = self
            .compute
            .get_address(&self.region, &self.address, deadline)
            .await?
            .ok_or_else(|| {
                OpError::Other(format!(
                    "the static address {} of cluster {} does not exist, and the cluster's lock lives on it; apply the cluster first",
                    self.address, self.cluster
                ))
            })?;
        Ok((a.labels, a.label_fingerprint))
    }

    async fn write(
        &self,
        labels: &std::collections::BTreeMap<String, String>,
        fingerprint: &Fingerprint,
        deadline: Instant,
    ) -> Result<bool> {
        Ok(self
            .compute
            .set_address_labels(&self.region, &self.address, labels, fingerprint, deadline)
            .await?)
    }

    fn held(&self, token: String) -> SharedLock {
        let place = self.clone();
        let renewer = tokio::spawn(renew(place.clone(), token.clone()));
        SharedLock {
            place,
            token,
            renewer,
        }
    }
}

/// Rewrites `ha-lock-renewed` every `Timing::renew` while the lock is ours. A holder that finds its labels gone
/// or replaced lost the lock (it stalled for longer than a TTL): it says so loudly and stops renewing.
async fn renew(place: LockPlace, token: String) {
    loop {
        tokio::time::sleep(place.timing.renew).await;
        let deadline = Instant::now() + place.timing.renew;
        let renewed = async {
            loop {
                let (labels, fingerprint) = place.read(deadline).await?;
                let Some(mut me) = holder_of(&labels).filter(|h| h.token == token) else {
                    return Ok(false);
                };
                me.renewed = unix_now().max(me.renewed + 1);
                if place
                    .write(&with_holder(&labels, &me), &fingerprint, deadline)
                    .await?
                {
                    return Ok::<_, OpError>(true);
                }
            }
        }
        .await;
        match renewed {
            Ok(true) => {}
            Ok(false) => {
                tracing::error!(
                    "lost the lock of cluster {}: another apply took it over after this one did not renew it for {}s",
                    place.cluster,
                    place.timing.ttl.as_secs()
                );
                return;
            }
            // One failed renewal is not fatal: two more fit in the TTL.
            Err(e) => tracing::warn!("could not renew the lock of cluster {}: {e}", place.cluster),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ha_gce::tests::{REGION, Sim, deadline};
    use std::sync::atomic::AtomicBool;

    /// Short clocks so expiry tests take a second, not a minute.
    // A TTL of several renewals and two seconds: on a loaded 2-core machine (the whole suite at once) a renewal
    // can come late by more than half a second, and a 600 ms TTL then took a live holder for dead.
    /// `lock_ttl` sets every clock: three renewals per TTL, and a waiter that looks five times per TTL, at most
    /// every 2 s, so a dead holder's lock is taken within a poll of the TTL.
    #[test]
    fn the_clocks_follow_the_ttl() {
        let t = Timing::with_ttl(Duration::from_secs(30));
        assert_eq!(
            (t.renew, t.poll),
            (Duration::from_secs(10), Duration::from_secs(2))
        );
        let t = Timing::with_ttl(Duration::from_secs(6));
        assert_eq!(
            (t.renew, t.poll),
            (Duration::from_secs(2), Duration::from_millis(1200))
        );
        let t = Timing::with_ttl(ha_domain::lock::MIN_TTL);
        assert!(t.renew * 3 <= t.ttl && t.poll * 5 <= t.ttl, "{t:?}");
    }

    const FAST: Timing = Timing {
        ttl: Duration::from_secs(2),
        renew: Duration::from_millis(250),
        poll: Duration::from_millis(30),
        say: Duration::from_millis(200),
    };

    /// A place on the sim's address `lock-ip`, with its own Compute client: another process, as far as the lock
    /// can tell (the in-process layer is left out on purpose).
    async fn place(sim: &Sim) -> LockPlace {
        LockPlace {
            compute: sim.compute().await,
            region: REGION.into(),
            address: "lock-ip".into(),
            cluster: "lockc".into(),
            timing: FAST,
        }
    }

    async fn sim_with_address() -> Sim {
        let sim = Sim::start().await;
        let c = sim.compute().await;
        c.reserve_external_address(REGION, "lock-ip", deadline())
            .await
            .unwrap();
        // A label of someone else's, which the lock must keep.
        let a = c
            .get_address(REGION, "lock-ip", deadline())
            .await
            .unwrap()
            .unwrap();
        let theirs = [("team".to_string(), "infra".to_string())].into();
        assert!(
            c.set_address_labels(REGION, "lock-ip", &theirs, &a.label_fingerprint, deadline())
                .await
                .unwrap()
        );
        sim
    }

    async fn labels(sim: &Sim) -> std::collections::BTreeMap<String, String> {
        let c = sim.compute().await;
        c.get_address(REGION, "lock-ip", deadline())
            .await
            .unwrap()
            .unwrap()
            .labels
    }

    #[tokio::test]
    async fn a_change_queued_past_its_timeout_names_whom_it_waited_behind_and_leaves_the_queue() {
        let id = "p/r/queue";
        let soon = |ms| Instant::now() + Duration::from_millis(ms);
        let say = Duration::from_millis(40);
        let first = queue_in_process(id, "walk", "roll replica walk-a", soon(1000), say)
            .await
            .unwrap();
        let refused = queue_in_process(id, "walk", "roll replica walk-b", soon(200), say)
            .await
            .err()
            .expect("the wait ran out");
        let text = refused.to_string();
        assert!(
            text.contains("roll replica walk-b: gave up after")
                && text.contains("behind \"roll replica walk-a\"")
                && text.contains("nothing of it was changed"),
            "{text}"
        );
        assert!(!first.others_waiting(), "the refused change left the queue");
        // The holder's wait was nothing; a change queued behind it waited for its release, and its deadline
        // moves on by that much.
        assert!(first.waited() < Duration::from_millis(100));
        let second = tokio::spawn(async move {
            queue_in_process(id, "walk", "roll replica walk-c", soon(2000), say).await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(first);
        let second = second.await.unwrap().unwrap();
        assert!(
            second.waited() >= Duration::from_millis(300),
            "{:?}",
            second.waited()
        );
        let now = Instant::now();
        assert_eq!(second.after_wait(now), now + second.waited());
    }

    #[tokio::test]
    async fn processes_take_the_lock_one_at_a_time() {
        let sim = sim_with_address().await;
        let inside = Arc::new(AtomicUsize::new(0));
        let overlapped = Arc::new(AtomicBool::new(false));
        let mut set = tokio::task::JoinSet::new();
        for i in 0..4 {
            let place = place(&sim).await;
            let (inside, overlapped) = (Arc::clone(&inside), Arc::clone(&overlapped));
            set.spawn(async move {
                let held = SharedLock::acquire(place, &format!("worker {i}"), deadline())
                    .await
                    .unwrap();
                if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlapped.store(true, Ordering::SeqCst);
                }
                // Long enough that the others poll several times, and a renewal happens meanwhile.
                tokio::time::sleep(Duration::from_millis(250)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                held.renewer.abort();
                held.release().await;
            });
        }
        while let Some(done) = set.join_next().await {
            done.unwrap();
        }
        assert!(!overlapped.load(Ordering::SeqCst), "two holders at once");
        let left = labels(&sim).await;
        assert_eq!(holder_of(&left), None, "released: {left:?}");
        assert_eq!(left.get("team").map(String::as_str), Some("infra"));
    }

    #[tokio::test]
    async fn a_live_holder_is_waited_for_and_the_waiter_gives_up_naming_it() {
        let sim = sim_with_address().await;
        let held = SharedLock::acquire(place(&sim).await, "create replica lockc-b", deadline())
            .await
            .unwrap();
        // Several TTLs: the holder renews, so it is never taken for dead.
        let until = Instant::now() + FAST.ttl * 3;
        let Err(OpError::Refused(summary, detail)) =
            SharedLock::acquire(place(&sim).await, "create replica lockc-c", until).await
        else {
            panic!("a second holder got the lock of a live one");
        };
        assert_eq!(summary, "Cluster lockc is locked by another apply");
        assert!(detail.contains("create-replica-lockc-b"), "{detail}");
        assert!(
            detail.contains(&format!("-pid-{}", std::process::id())),
            "{detail}"
        );
        held.renewer.abort();
        held.release().await;
    }

    #[tokio::test]
    async fn a_dead_holders_lock_is_taken_over_after_the_ttl() {
        let sim = sim_with_address().await;
        let dead = SharedLock::acquire(place(&sim).await, "killed apply", deadline())
            .await
            .unwrap();
        // SIGKILL: no release, no more renewals.
        dead.renewer.abort();
        let started = Instant::now();
        let taker = SharedLock::acquire(place(&sim).await, "next apply", deadline())
            .await
            .unwrap();
        assert!(
            started.elapsed() >= FAST.ttl,
            "taken over after {:?}, before the TTL",
            started.elapsed()
        );
        let now = holder_of(&labels(&sim).await).unwrap();
        assert_eq!(now.token, taker.token);
        assert_eq!(now.doing, "next-apply");
        // The dead holder's late release must not free the new holder's lock.
        dead.release().await;
        assert_eq!(holder_of(&labels(&sim).await).unwrap().token, taker.token);
        taker.renewer.abort();
        taker.release().await;
        assert_eq!(holder_of(&labels(&sim).await), None);
    }

    #[tokio::test]
    async fn one_holder_per_cluster_and_it_knows_who_waits() {
        let a = lock_in_process("p/r/a").await;
        assert!(!a.others_waiting());
        // Another cluster is independent.
        let _b = lock_in_process("p/r/b").await;
        let waiting = tokio::spawn(async { lock_in_process("p/r/a").await.others_waiting() });
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
