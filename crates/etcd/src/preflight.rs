//! The check before every membership change, additions and removals alike, as Cluster API's control plane
//! makes it: the members are exactly the replicas we know, every member that answers reports the same member
//! list, no alarm is raised, and no learner is left from an interrupted join. Membership changes on a cluster
//! that fails any of these can lose quorum for good, so the change waits; the error names what is wrong and
//! what to do. A removal waives the rules for the member that leaves: it is often dead, unreachable, a learner
//! that never started or without a VM, and removing it is how such a member is repaired.

use std::fmt;

use super::client::Etcd;
use super::error::{EndpointFailure, FailureKind};
use super::{Alarm, AlarmKind, EtcdTarget, Member};

/// Everything the preflight found wrong, in a stable order (reachability, agreement, members, alarms).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("etcd is not ready for a membership change: {}", join(.problems))]
pub struct PreflightError {
    pub problems: Vec<PreflightProblem>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreflightProblem {
    /// No endpoint answered with a member list.
    NoneReachable {
        failures: Vec<EndpointFailure>,
    },
    /// This member's list differs from what most members report: the cluster is mid-change or split.
    DifferentMemberList {
        name: String,
    },
    /// A learner remains, from a join that stopped before promotion.
    LeftoverLearner {
        name: String,
    },
    /// A voting member was added but never started; it counts towards quorum without voting.
    NeverStarted {
        id: u64,
        peer_url: String,
    },
    /// etcd has a member that no replica accounts for.
    NotInConfiguration {
        name: String,
        id: u64,
    },
    /// A replica we know has no etcd member.
    MissingMember {
        name: String,
    },
    Alarm {
        kind: AlarmKind,
        member: String,
    },
    /// The alarm list could not be read, so "no alarms" cannot be claimed.
    AlarmsUnknown {
        reason: String,
    },
}

impl fmt::Display for PreflightProblem {
    /// What is wrong, then what to do about it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreflightProblem::NoneReachable { failures } => write!(
                f,
                "no etcd member answered ({}): check that the replica VMs run and that the cluster's `etcd_client_source_ranges` admit this machine",
                join(failures)
            ),
            PreflightProblem::DifferentMemberList { name } => write!(
                f,
                "{name} reports a different member list: etcd is mid-change or split; wait until `etcdctl member list` agrees on every replica, then apply again"
            ),
            PreflightProblem::LeftoverLearner { name } => write!(
                f,
                "a learner {name} from an interrupted join is still present: the next apply removes it"
            ),
            PreflightProblem::NeverStarted { id, peer_url } => write!(
                f,
                "member {id:x} ({peer_url}) was added but never started: remove it with `etcdctl member remove {id:x}`, then apply again"
            ),
            PreflightProblem::NotInConfiguration { name, id } => write!(
                f,
                "member {name} is not in the configuration (no replica VM of the cluster has its name): bring its replica back, or if it is gone for good remove it with `etcdctl member remove {id:x}`"
            ),
            PreflightProblem::MissingMember { name } => write!(
                f,
                "replica {name} has no etcd member: its join did not finish; the next apply replaces it (or name it with `-replace`)"
            ),
            PreflightProblem::Alarm { kind, member } => write!(
                f,
                "alarm {kind} on {member}: resolve it (NOSPACE: compact and defragment; CORRUPT: replace that replica), then `etcdctl alarm disarm`"
            ),
            PreflightProblem::AlarmsUnknown { reason } => write!(
                f,
                "could not list etcd alarms ({reason}): check that etcd answers, then apply again"
            ),
        }
    }
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The membership change the preflight guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// A member is added: every member must be a started, voting, known replica.
    Add,
    /// The members with these ids are removed, one after the other; the rules about them are waived (see the
    /// module doc). Several only when a join clears the learners that interrupted joins left.
    Remove(&'a [u64]),
}

/// One endpoint's answer to "who are the members?".
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub name: String,
    pub members: Result<Vec<Member>, EndpointFailure>,
}

impl Etcd {
    /// Checks that adding a member is safe to start. `expected_names` are the replicas we know (by member
    /// name); `endpoints` should be every one of them that may answer.
    pub async fn preflight(
        &self,
        expected_names: &[String],
        endpoints: &[EtcdTarget],
    ) -> Result<(), PreflightError> {
        self.preflight_for(Change::Add, expected_names, endpoints)
            .await
    }

    /// Checks that removing members `ids` is safe to start: as [`Etcd::preflight`], except that a leaving
    /// member may be dead, unreachable, a learner, never started, or without a VM. `expected_names` are the
    /// replicas that stay.
    pub async fn preflight_removal(
        &self,
        ids: &[u64],
        expected_names: &[String],
        endpoints: &[EtcdTarget],
    ) -> Result<(), PreflightError> {
        self.preflight_for(Change::Remove(ids), expected_names, endpoints)
            .await
    }

    async fn preflight_for(
        &self,
        change: Change<'_>,
        expected_names: &[String],
        endpoints: &[EtcdTarget],
    ) -> Result<(), PreflightError> {
        let lists = self.member_lists(endpoints).await;
        let views: Vec<View> = endpoints
            .iter()
            .zip(lists)
            .map(|(t, members)| View {
                name: t.server_name.clone(),
                members,
            })
            .collect();
        let alarms =
            self.alarms(endpoints)
                .await
                .map_err(|e| match std::error::Error::source(&e) {
                    Some(cause) => cause.to_string(),
                    None => e.to_string(),
                });
        let problems = problems(change, expected_names, &views, &alarms);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(PreflightError { problems })
        }
    }
}

/// The rules, with the data already fetched (so they are testable on their own).
pub(crate) fn problems(
    change: Change<'_>,
    expected: &[String],
    views: &[View],
    alarms: &Result<Vec<Alarm>, String>,
) -> Vec<PreflightProblem> {
    let answered: Vec<(&str, &Vec<Member>)> = views
        .iter()
        .filter_map(|v| v.members.as_ref().ok().map(|m| (v.name.as_str(), m)))
        .collect();
    let Some(mut reference) = most_common(&answered).cloned() else {
        // A learner refuses member lists by design; it is not a reachability failure of the cluster.
        let failures = views
            .iter()
            .filter_map(|v| v.members.as_ref().err())
            .filter(|f| f.kind != FailureKind::Learner)
            .cloned()
            .collect();
        return vec![PreflightProblem::NoneReachable { failures }];
    };

    // A member learns a newcomer's name when the newcomer publishes it; take the name from whoever has it.
    for m in reference.iter_mut().filter(|m| !m.started()) {
        if let Some(named) = answered
            .iter()
            .flat_map(|(_, l)| l.iter())
            .find(|o| o.id == m.id && o.started())
        {
            m.name = named.name.clone();
        }
    }
    let reference = &reference;
    let leaving = |id: u64| matches!(change, Change::Remove(ids) if ids.contains(&id));

    let mut out = Vec::new();
    for (name, list) in &answered {
        if signature(list) != signature(reference) {
            out.push(PreflightProblem::DifferentMemberList {
                name: name.to_string(),
            });
        }
    }
    for m in reference.iter().filter(|m| !leaving(m.id)) {
        if m.is_learner {
            out.push(PreflightProblem::LeftoverLearner { name: m.label() });
        } else if !m.started() {
            out.push(PreflightProblem::NeverStarted {
                id: m.id,
                peer_url: m.label(),
            });
        } else if !expected.contains(&m.name) {
            out.push(PreflightProblem::NotInConfiguration {
                name: m.name.clone(),
                id: m.id,
            });
        }
    }
    for name in expected {
        // A learner with the name counts as present: it is reported as a leftover, not also as missing.
        if !reference.iter().any(|m| &m.name == name) {
            out.push(PreflightProblem::MissingMember { name: name.clone() });
        }
    }
    match alarms {
        Ok(alarms) => {
            for a in alarms.iter().filter(|a| !leaving(a.member_id)) {
                let member = reference
                    .iter()
                    .find(|m| m.id == a.member_id)
                    .map(Member::label)
                    .unwrap_or_else(|| format!("member {:x}", a.member_id));
                out.push(PreflightProblem::Alarm {
                    kind: a.kind,
                    member,
                });
            }
        }
        Err(reason) => out.push(PreflightProblem::AlarmsUnknown {
            reason: reason.clone(),
        }),
    }
    out
}

/// What makes two member lists "the same": ids and roles. Names and URLs fill in as members start, so a
/// member that has not yet seen a newcomer's name is not in disagreement.
fn signature(list: &[Member]) -> Vec<(u64, bool)> {
    let mut sig: Vec<(u64, bool)> = list.iter().map(|m| (m.id, m.is_learner)).collect();
    sig.sort_unstable();
    sig
}

/// The list most endpoints report; on a tie, the one reported first.
fn most_common<'a>(answered: &[(&str, &'a Vec<Member>)]) -> Option<&'a Vec<Member>> {
    let mut best: Option<(&'a Vec<Member>, usize)> = None;
    for (_, list) in answered {
        let count = answered
            .iter()
            .filter(|(_, other)| signature(other) == signature(list))
            .count();
        if best.is_none_or(|(_, n)| count > n) {
            best = Some((list, count));
        }
    }
    best.map(|(list, _)| list)
}
