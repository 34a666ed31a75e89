//! The check before every membership change, as Cluster API's control plane makes it: the members are
//! exactly the replicas we know, every member that answers reports the same member list, no alarm is
//! raised, and no learner is left from an interrupted join. Membership changes on a cluster that fails
//! any of these can lose quorum for good, so the change waits; the error names what is wrong.

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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreflightProblem::NoneReachable { failures } => {
                write!(f, "no etcd member answered ({})", join(failures))
            }
            PreflightProblem::DifferentMemberList { name } => {
                write!(f, "{name} reports a different member list")
            }
            PreflightProblem::LeftoverLearner { name } => {
                write!(
                    f,
                    "a learner {name} from an interrupted join is still present: the next apply removes it"
                )
            }
            PreflightProblem::NeverStarted { id, peer_url } => {
                write!(f, "member {id:x} ({peer_url}) was added but never started")
            }
            PreflightProblem::NotInConfiguration { name } => {
                write!(f, "member {name} is not in the configuration")
            }
            PreflightProblem::MissingMember { name } => {
                write!(f, "replica {name} has no etcd member")
            }
            PreflightProblem::Alarm { kind, member } => write!(f, "alarm {kind} on {member}"),
            PreflightProblem::AlarmsUnknown { reason } => {
                write!(f, "could not list etcd alarms: {reason}")
            }
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

/// One endpoint's answer to "who are the members?".
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub name: String,
    pub members: Result<Vec<Member>, EndpointFailure>,
}

impl Etcd {
    /// Checks that a membership change is safe to start. `expected_names` are the replicas we know (by
    /// member name); `endpoints` should be every one of them that may answer.
    pub async fn preflight(
        &self,
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
        let problems = problems(expected_names, &views, &alarms);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(PreflightError { problems })
        }
    }
}

/// The rules, with the data already fetched (so they are testable on their own).
pub(crate) fn problems(
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

    let mut out = Vec::new();
    for (name, list) in &answered {
        if signature(list) != signature(reference) {
            out.push(PreflightProblem::DifferentMemberList {
                name: name.to_string(),
            });
        }
    }
    for m in reference {
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
            for a in alarms {
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
