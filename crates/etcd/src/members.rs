//! Membership changes, one at a time and each idempotent, so an interrupted apply can simply run again.

use std::future::Future;
use std::time::Duration;

use etcd_client::MemberAddOptions;
use tokio::time::{Instant, sleep};

use super::client::{Etcd, members};
use super::error::{CallError, EtcdError, Result};
use super::{EtcdTarget, Member, MemberStatus};

/// How often to look again while waiting on a learner; well under etcd's own heartbeat-driven progress.
const POLL: Duration = Duration::from_millis(200);

// etcd's answers, distinguishable only by message (etcdserver/api/v3rpc/rpctypes).
const LEARNER_NOT_READY: &str = "can only promote a learner member which is in sync with leader";
const NOT_A_LEARNER: &str = "can only promote a learner member";
const MEMBER_NOT_FOUND: &str = "member not found";

/// Long enough for etcd's clock to reach the next second (see `add_learner`).
const ID_SECOND: Duration = Duration::from_millis(1100);
/// etcd refuses membership changes with "unhealthy cluster" until its leader has been connected to every
/// voter for 5 s (its HealthInterval), so the change right after another one must wait that out. Refused
/// for longer, a member is really down, and the caller should hear it.
const SETTLE: Duration = Duration::from_secs(12);
/// Answers that mean "not now": the cluster has not settled since the last change, or it is electing a leader
/// (a member that led was just lost, which is exactly when a dead member gets removed). Each change retried on
/// them is idempotent: a removal that did land answers "member not found", an add finds its peer URL.
const NOT_NOW: [&str; 4] = [
    "unhealthy cluster",
    "no leader",
    "leader changed",
    "request timed out",
];

/// Runs a membership change, retrying while etcd says the cluster has not settled or has no leader.
async fn once_settled<T, F, Fut>(mut change: F) -> std::result::Result<T, CallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, CallError>>,
{
    let deadline = Instant::now() + SETTLE;
    loop {
        match change().await {
            Err(e) if NOT_NOW.iter().any(|m| e.mentions(m)) && Instant::now() < deadline => {
                sleep(POLL).await
            }
            result => return result,
        }
    }
}

/// etcd accepts a promotion once the learner's log is within 10% of the leader's (its hard-coded
/// readiness rule); waiting for the same before promoting saves rejected attempts.
fn caught_up(learner: &MemberStatus, leader: &MemberStatus) -> bool {
    learner.raft_applied_index.saturating_mul(10) >= leader.raft_index.saturating_mul(9)
}

impl Etcd {
    /// The cluster's members, from the first endpoint that answers.
    pub async fn member_list(&self, endpoints: &[EtcdTarget]) -> Result<Vec<Member>> {
        self.first_answer(endpoints, |etcd, target| async move {
            etcd.call_one(&target, |mut c| async move { c.member_list().await })
                .await
        })
        .await
        .map(|resp| members(resp.members()))
        .map_err(EtcdError::MemberList)
    }

    /// Adds a non-voting learner with `peer_url` and returns it with the full member list (the new member
    /// included) for its `--initial-cluster`. If a member with that peer URL exists, returns it unchanged,
    /// learner or not, so a retried apply does not add a second one.
    pub async fn add_learner(
        &self,
        endpoints: &[EtcdTarget],
        peer_url: &str,
    ) -> Result<(Member, Vec<Member>)> {
        let existing = self.member_list(endpoints).await?;
        if let Some(m) = find_peer(&existing, peer_url) {
            return Ok((m.clone(), existing));
        }
        let url = peer_url.to_string();
        let add = || {
            once_settled(|| {
                self.call_any(endpoints, |mut c| {
                    let url = url.clone();
                    async move {
                        c.member_add([url], Some(MemberAddOptions::new().with_is_learner()))
                            .await
                    }
                })
            })
        };
        let added = match add().await {
            // etcd derives a new member's id from its peer URLs, the cluster name and the current second, so
            // re-adding the peer URL of a member removed in the same second (a failed join's learner, then the
            // retry that reserved the same internal IP) yields the removed id, which etcd refuses as "member not
            // found". The next second gives a fresh id.
            Err(e) if e.mentions(MEMBER_NOT_FOUND) => {
                sleep(ID_SECOND).await;
                add().await
            }
            other => other,
        };
        match added {
            Ok(resp) => {
                let list = members(resp.member_list());
                // etcd returns the added member; its URL finds it in the list just as well.
                match find_peer(&list, peer_url).cloned() {
                    Some(m) => Ok((m, list)),
                    None => self.find_added(endpoints, peer_url, None).await,
                }
            }
            // A lost answer to an add that did happen: the retry sees the URL taken. It is ours.
            Err(e) if e.says("Peer URLs already exists") => {
                self.find_added(endpoints, peer_url, Some(e)).await
            }
            Err(source) => Err(EtcdError::AddLearner {
                peer_url: peer_url.to_string(),
                source,
            }),
        }
    }

    async fn find_added(
        &self,
        endpoints: &[EtcdTarget],
        peer_url: &str,
        error: Option<super::CallError>,
    ) -> Result<(Member, Vec<Member>)> {
        let list = self.member_list(endpoints).await?;
        match find_peer(&list, peer_url) {
            Some(m) => Ok((m.clone(), list)),
            None => Err(EtcdError::AddLearner {
                peer_url: peer_url.to_string(),
                source: error.unwrap_or(super::CallError {
                    failures: Vec::new(),
                }),
            }),
        }
    }

    /// Waits until learner `id` has started and applied nearly all the leader has committed. `endpoints`
    /// must include the learner's own (it is the only one that reports the learner's progress). A member
    /// that is already a voter counts as caught up. Changes nothing, so on timeout the caller may wait again
    /// or remove the learner.
    pub async fn await_learner_caught_up(
        &self,
        endpoints: &[EtcdTarget],
        id: u64,
        timeout: Duration,
    ) -> Result<()> {
        let waited = self
            .await_statuses(endpoints, timeout, |statuses| {
                let ok: Vec<&MemberStatus> =
                    statuses.iter().filter_map(|s| s.as_ref().ok()).collect();
                let learner = ok.iter().find(|s| s.member_id == id);
                match (learner, leader_among(&ok)) {
                    (Some(l), _) if !l.is_learner => None,
                    (Some(l), Some(lead)) if caught_up(l, lead) => None,
                    (Some(l), Some(lead)) => Some(format!(
                        "learner applied index {}, leader committed index {}",
                        l.raft_applied_index, lead.raft_index
                    )),
                    (Some(_), None) => Some("no leader answered".to_string()),
                    (None, _) => {
                        let unanswered: Vec<String> = statuses
                            .iter()
                            .filter_map(|s| s.as_ref().err())
                            .map(|f| f.to_string())
                            .collect();
                        Some(if unanswered.is_empty() {
                            "no endpoint given answers as the learner (is its endpoint among them?)"
                                .to_string()
                        } else {
                            format!("the learner has not answered ({})", unanswered.join("; "))
                        })
                    }
                }
            })
            .await;
        let Err(last) = waited else {
            return Ok(());
        };
        // A learner that vanished is a different problem from a slow one: say which.
        if !self
            .member_list(endpoints)
            .await?
            .iter()
            .any(|m| m.id == id)
        {
            return Err(EtcdError::MemberNotFound {
                step: "awaiting a learner",
                id,
            });
        }
        Err(EtcdError::AwaitLearner { id, timeout, last })
    }

    /// Waits until member `id` (a voter that restarted, e.g. after its VM was rebuilt on its data) answers with a
    /// leader and has applied nearly all the leader has committed. `endpoints` must include the member's own.
    /// Changes nothing.
    pub async fn await_caught_up(
        &self,
        endpoints: &[EtcdTarget],
        id: u64,
        timeout: Duration,
    ) -> Result<()> {
        self.await_statuses(endpoints, timeout, |statuses| {
            let ok: Vec<&MemberStatus> = statuses.iter().filter_map(|s| s.as_ref().ok()).collect();
            let me = ok.iter().find(|s| s.member_id == id && s.leader_id != 0);
            match (me, leader_among(&ok)) {
                (Some(m), Some(lead)) if caught_up(m, lead) => None,
                (Some(m), Some(lead)) => Some(format!(
                    "applied index {}, leader committed index {}",
                    m.raft_applied_index, lead.raft_index
                )),
                (Some(_), None) => Some("no leader answered".to_string()),
                (None, _) => Some("the member has not answered with a leader yet".to_string()),
            }
        })
        .await
        .map_err(|last| EtcdError::AwaitMember { id, timeout, last })
    }

    /// Asks every endpoint for its status every `POLL` until `judge` finds what it waits for (`None`) or
    /// `timeout` passes; then the judge's last reason is the error.
    async fn await_statuses(
        &self,
        endpoints: &[EtcdTarget],
        timeout: Duration,
        mut judge: impl FnMut(
            &[std::result::Result<MemberStatus, super::EndpointFailure>],
        ) -> Option<String>,
    ) -> std::result::Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let statuses = self.statuses(endpoints).await;
            let Some(last) = judge(&statuses) else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                return Err(last);
            }
            sleep(POLL).await;
        }
    }

    /// Promotes learner `id` to a voting member, retrying while etcd says it is not yet in sync with the
    /// leader, until `timeout`. Already a voter: Ok.
    pub async fn promote(
        &self,
        endpoints: &[EtcdTarget],
        id: u64,
        timeout: Duration,
    ) -> Result<Member> {
        let deadline = Instant::now() + timeout;
        loop {
            let list = self.member_list(endpoints).await?;
            let Some(member) = list.iter().find(|m| m.id == id) else {
                return Err(EtcdError::MemberNotFound {
                    step: "promoting a learner",
                    id,
                });
            };
            if !member.is_learner {
                return Ok(member.clone());
            }
            let promoted = self
                .call_any(endpoints, |mut c| async move { c.member_promote(id).await })
                .await;
            match promoted {
                Ok(resp) => {
                    if let Some(m) = members(resp.members()).into_iter().find(|m| m.id == id) {
                        return Ok(m);
                    }
                }
                Err(e) if e.says(LEARNER_NOT_READY) => {
                    if Instant::now() >= deadline {
                        return Err(EtcdError::PromoteTimedOut { id, timeout });
                    }
                    sleep(POLL).await;
                }
                // Promoted by an earlier attempt whose answer was lost: the next listing shows a voter.
                Err(e) if e.says(NOT_A_LEARNER) => {}
                Err(e) if e.says(MEMBER_NOT_FOUND) => {
                    return Err(EtcdError::MemberNotFound {
                        step: "promoting a learner",
                        id,
                    });
                }
                Err(source) => return Err(EtcdError::Promote { id, source }),
            }
        }
    }

    /// [`Etcd::await_learner_caught_up`] then [`Etcd::promote`], both within one `timeout`.
    pub async fn promote_when_caught_up(
        &self,
        endpoints: &[EtcdTarget],
        id: u64,
        timeout: Duration,
    ) -> Result<Member> {
        let start = Instant::now();
        self.await_learner_caught_up(endpoints, id, timeout).await?;
        self.promote(endpoints, id, timeout.saturating_sub(start.elapsed()))
            .await
    }

    /// Makes voting member `to` the leader. The request must go to the current leader, so `endpoints`
    /// must include it. Already the leader: Ok.
    pub async fn move_leader(&self, endpoints: &[EtcdTarget], to: u64) -> Result<()> {
        let statuses = self.statuses(endpoints).await;
        let (leader_target, leader_id) =
            leader_of(endpoints, &statuses).ok_or_else(|| EtcdError::MoveLeader {
                to,
                reason: format!(
                    "no endpoint answered as the leader ({})",
                    describe(endpoints, &statuses)
                ),
            })?;
        if leader_id == to {
            return Ok(());
        }
        self.call_one(
            leader_target,
            |mut c| async move { c.move_leader(to).await },
        )
        .await
        .map(|_| ())
        .map_err(|f| EtcdError::MoveLeader {
            to,
            reason: f.to_string(),
        })
    }

    /// Removes member `id`; an absent member is Ok. If it leads, leadership goes first to another started
    /// voter that answers, so the cluster does not stall for an election. Refuses to remove the last member.
    /// Quorum is the caller's check: this does not know which replicas are meant to stay.
    pub async fn remove_member(&self, endpoints: &[EtcdTarget], id: u64) -> Result<()> {
        let list = self.member_list(endpoints).await?;
        let Some(member) = list.iter().find(|m| m.id == id) else {
            return Ok(());
        };
        if list.len() == 1 {
            return Err(EtcdError::RemoveLastMember {
                id,
                name: member.label(),
            });
        }
        let statuses = self.statuses(endpoints).await;
        if let Some((_, leader)) = leader_of(endpoints, &statuses)
            && leader == id
        {
            let successor = statuses
                .iter()
                .filter_map(|s| s.as_ref().ok())
                .find(|s| s.member_id != id && !s.is_learner)
                .map(|s| s.member_id)
                .ok_or(EtcdError::NoSuccessor { id })?;
            self.move_leader(endpoints, successor).await?;
        }
        // Ask the others first: the removed member stops serving as soon as it applies its own removal.
        let removed_name = member.name.clone();
        let mut order: Vec<EtcdTarget> = endpoints.to_vec();
        order.sort_by_key(|t| t.server_name == removed_name);
        match once_settled(|| {
            self.call_any(&order, |mut c| async move { c.member_remove(id).await })
        })
        .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.says(MEMBER_NOT_FOUND) => Ok(()),
            Err(source) => Err(EtcdError::RemoveMember { id, source }),
        }
    }
}

impl Etcd {
    /// Sets member `id`'s peer URL (`etcdctl member update`), as etcd documents for a member whose peer address
    /// changes: the others learn where to reach it, and it keeps its id and data. Already so: Ok, without a
    /// request. Through any member that answers. The change commits only through a leader with a quorum, which a
    /// cluster whose member just restarted on its new address may not have yet (a sole or second member), so any
    /// failure is asked again until `patience` runs out: the change is idempotent, and a request that timed out
    /// but committed is seen as done by the next look.
    pub async fn update_peer_url(
        &self,
        endpoints: &[EtcdTarget],
        id: u64,
        peer_url: &str,
        patience: Duration,
    ) -> Result<()> {
        let until = Instant::now() + patience;
        let urls = vec![peer_url.to_string()];
        loop {
            let attempt = async {
                let list = self.member_list(endpoints).await?;
                if list.iter().any(|m| m.id == id && m.peer_urls == urls) {
                    return Ok(());
                }
                self.call_any(endpoints, |mut c| {
                    let urls = urls.clone();
                    async move { c.member_update(id, urls).await }
                })
                .await
                .map(|_| ())
                .map_err(|source| EtcdError::UpdateMember {
                    id,
                    peer_url: peer_url.to_string(),
                    source,
                })
            };
            match attempt.await {
                Err(_) if Instant::now() < until => sleep(POLL * 5).await,
                result => return result,
            }
        }
    }
}

fn find_peer<'a>(list: &'a [Member], peer_url: &str) -> Option<&'a Member> {
    list.iter()
        .find(|m| m.peer_urls.iter().any(|u| u == peer_url))
}

/// The endpoint that answered as the leader, and the leader's id.
fn leader_of<'a>(
    endpoints: &'a [EtcdTarget],
    statuses: &[std::result::Result<MemberStatus, super::EndpointFailure>],
) -> Option<(&'a EtcdTarget, u64)> {
    endpoints.iter().zip(statuses).find_map(|(t, s)| match s {
        Ok(s) if s.leader_id != 0 && s.member_id == s.leader_id => Some((t, s.leader_id)),
        _ => None,
    })
}

fn describe(
    endpoints: &[EtcdTarget],
    statuses: &[std::result::Result<MemberStatus, super::EndpointFailure>],
) -> String {
    let parts: Vec<String> = endpoints
        .iter()
        .zip(statuses)
        .map(|(t, s)| match s {
            Ok(s) => format!("{t}: follower of {:x}", s.leader_id),
            Err(f) => f.to_string(),
        })
        .collect();
    parts.join("; ")
}

/// The status of the member that says it leads.
fn leader_among<'a>(ok: &[&'a MemberStatus]) -> Option<&'a MemberStatus> {
    ok.iter()
        .find(|s| s.leader_id != 0 && s.member_id == s.leader_id)
        .copied()
}
