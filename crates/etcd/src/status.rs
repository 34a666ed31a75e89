//! Status, alarms and best-effort health: what each member says about itself.

use etcd_client::{AlarmAction, AlarmOptions, AlarmType};

use super::client::Etcd;
use super::error::{EtcdError, Result};
use super::{Alarm, AlarmKind, EtcdTarget, MemberStatus};

/// How long health waits for the alarm list. With quorum it takes one raft round (milliseconds, even across
/// zones); past this the cluster is judged without alarms, as when no member lists them.
const ALARMS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// One endpoint's health. Never an error: an unhealthy member is a fact to report, not a failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointHealth {
    pub target: EtcdTarget,
    pub health: Health,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Answered, knows a leader, reports no errors, and no alarm is raised on it.
    Healthy(MemberStatus),
    /// Answered, but something is wrong; the status says what it knows.
    Unhealthy {
        status: MemberStatus,
        reason: String,
    },
    /// Did not answer (refused, timed out, TLS failed).
    Unreachable { reason: String },
}

impl Health {
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy(_))
    }

    /// The member id that answered, if any.
    pub fn member_id(&self) -> Option<u64> {
        match self {
            Health::Healthy(s) | Health::Unhealthy { status: s, .. } => Some(s.member_id),
            Health::Unreachable { .. } => None,
        }
    }
}

impl Etcd {
    /// What `target` says about itself. Learners answer this too.
    pub async fn status(&self, target: &EtcdTarget) -> Result<MemberStatus> {
        self.status_of(target).await.map_err(|f| EtcdError::Status {
            target: target.to_string(),
            source: f.into(),
        })
    }

    /// The cluster's raised alarms, from the first endpoint that answers.
    pub async fn alarms(&self, endpoints: &[EtcdTarget]) -> Result<Vec<Alarm>> {
        let resp = self
            .call_any(endpoints, |mut c| async move {
                // GET with type NONE and member 0 lists every alarm on every member.
                c.alarm(AlarmAction::Get, AlarmType::None, None::<AlarmOptions>)
                    .await
            })
            .await
            .map_err(EtcdError::Alarms)?;
        Ok(resp
            .alarms()
            .iter()
            .filter(|a| a.alarm() != AlarmType::None)
            .map(|a| Alarm {
                member_id: a.member_id(),
                kind: alarm_kind(a.alarm()),
            })
            .collect())
    }

    /// The health of every endpoint, in the order given. Best effort: an unreachable or sick member is a
    /// value in the result, and if no member lists alarms, health is judged without them.
    pub async fn health(&self, endpoints: &[EtcdTarget]) -> Vec<EndpointHealth> {
        let statuses = self.statuses(endpoints).await;
        // etcd answers the alarm list through raft: without quorum it waits out its own request timeout (7 s)
        // for nothing, on every read of a cluster that lost quorum. With no leader every member is unhealthy
        // anyway; a leader that has not yet noticed it lost quorum gets `ALARMS_WAIT`.
        let led = statuses
            .iter()
            .any(|s| s.as_ref().is_ok_and(|s| s.leader_id != 0));
        let alarms = if led {
            tokio::time::timeout(ALARMS_WAIT, self.alarms(endpoints))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        endpoints
            .iter()
            .zip(statuses)
            .map(|(target, status)| EndpointHealth {
                target: target.clone(),
                health: judge(status, &alarms),
            })
            .collect()
    }
}

fn judge(
    status: std::result::Result<MemberStatus, super::EndpointFailure>,
    alarms: &[Alarm],
) -> Health {
    let status = match status {
        Ok(s) => s,
        Err(f) => return Health::Unreachable { reason: f.message },
    };
    let mut problems = Vec::new();
    // Without a leader a member serves no linearizable request: for an apiserver it is down.
    if status.leader_id == 0 {
        problems.push("no leader".to_string());
    }
    problems.extend(status.errors.iter().cloned());
    for alarm in alarms.iter().filter(|a| a.member_id == status.member_id) {
        problems.push(format!("alarm {}", alarm.kind));
    }
    if problems.is_empty() {
        Health::Healthy(status)
    } else {
        Health::Unhealthy {
            status,
            reason: problems.join("; "),
        }
    }
}

fn alarm_kind(t: AlarmType) -> AlarmKind {
    match t {
        AlarmType::Nospace => AlarmKind::NoSpace,
        AlarmType::Corrupt => AlarmKind::Corrupt,
        other => AlarmKind::Other(other as i32),
    }
}
