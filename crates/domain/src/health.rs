//! A cluster's health, judged from one read of the real APIs (`ops::health::read_cluster` gathers the facts): each replica's
//! VM, etcd's members and their health, the load balancer's view of its backends, who serves the static IP,
//! certificate expiry and the last backup. The verdict is one line, as `kops validate cluster` gives one: healthy,
//! or the problems that make the cluster unhealthy, each a sentence naming the replica or member and what is wrong.
//! Things that need attention but do not stop the cluster from serving (certificates due for renewal, a backup
//! policy with no snapshot yet) are notes, never problems, so a `check` or a `postcondition` on `healthy` fails
//! only when the control plane is in trouble.

use std::collections::BTreeSet;
use std::time::Duration;

use super::certificates::rfc3339;
use super::quorum;
use super::topology::IpHolder;

/// One replica VM, found by the cluster's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFacts {
    pub name: String,
    pub zone: String,
    /// Compute's status: RUNNING, STOPPING, TERMINATED, STAGING…
    pub vm_status: String,
    /// When the first of its certificates expires (Unix seconds), read from its public files; `None` when its
    /// metadata does not carry them.
    pub certificates_expire_at: Option<i64>,
    /// The load balancer's view of it: `None` when it is not in the target pool (or there is no pool),
    /// `Some(true)` when the balancer sends it traffic.
    pub backend_healthy: Option<bool>,
}

/// What one etcd member said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberState {
    /// Answered, knows a leader, no alarm, no error.
    Healthy,
    /// Answered, but something is wrong (no leader, an alarm, an error it reports).
    Unhealthy(String),
    /// Did not answer: its VM is down, or etcd is not running on it.
    Unreachable(String),
    /// Not asked: no running replica VM carries it (a learner that never started, or a member whose VM is gone).
    NotAsked,
}

/// One member of etcd's member list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberFacts {
    pub id: u64,
    /// The replica it belongs to; empty for a learner that never started and matches no VM.
    pub name: String,
    pub learner: bool,
    pub state: MemberState,
    /// The size of its database file in bytes, when it answered.
    pub db_size: Option<i64>,
    /// The leader it knows (0 when it knows none), when it answered.
    pub leader_id: Option<u64>,
}

/// Everything the verdict is judged from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub cluster: String,
    pub replicas: Vec<ReplicaFacts>,
    /// etcd's member list; `None` when no running replica's etcd answered (`etcd_unreachable` says why), or no
    /// replica runs at all.
    pub members: Option<Vec<MemberFacts>>,
    pub etcd_unreachable: Option<String>,
    /// Raised alarms, as `NOSPACE on member <id>`.
    pub alarms: Vec<String>,
    pub ip_holder: IpHolder,
    /// Whether a target pool exists (the cluster has a load balancer).
    pub load_balancer: bool,
    /// The newest snapshot, `gs://bucket/object`; `None` when there is none, or no backup policy (`backup_policy`).
    pub last_backup: Option<String>,
    pub backup_policy: bool,
    /// Why the backup location could not be listed, when it could not.
    pub backup_error: Option<String>,
    /// Why the cluster's CA keys cannot be used (their secret gone or overwritten), when they cannot: nothing can
    /// join, roll or be renewed until they are back.
    pub keys_error: Option<String>,
    /// When the first of the cluster's CAs expires (Unix seconds).
    pub ca_expires_at: Option<i64>,
    /// How long before expiry a roll renews a replica's certificates (the cluster's `certificate_renew_before`).
    pub renew_before: Duration,
}

/// The judgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub healthy: bool,
    /// One line: `healthy: …` or `unhealthy: …`. The same on every read of an unchanged healthy cluster.
    pub summary: String,
    /// What makes the cluster unhealthy, one sentence each; empty when healthy.
    pub problems: Vec<String>,
    /// What needs attention without making it unhealthy.
    pub notes: Vec<String>,
    /// The leader's member name, when the members agree on one that is listed.
    pub leader: Option<String>,
    /// Its member id.
    pub leader_id: Option<u64>,
    /// How many more voters may fail before etcd loses quorum (0 when it has none).
    pub fault_tolerance: u64,
    pub voters: u64,
    pub healthy_voters: u64,
}

/// Judges `facts` at `now` (Unix seconds).
pub fn judge(facts: &Facts, now: i64) -> Verdict {
    let mut problems = Vec::new();
    let mut notes = Vec::new();

    if facts.replicas.is_empty() {
        problems.push(format!(
            "No replica VM of cluster {:?} exists: nothing serves its API.",
            facts.cluster
        ));
    }
    for r in facts.replicas.iter().filter(|r| r.vm_status != "RUNNING") {
        problems.push(format!(
            "Replica {}'s VM is {} in {}: its etcd member and API server are down.",
            r.name, r.vm_status, r.zone
        ));
    }

    let members = facts.members.as_deref();
    if let Some(why) = &facts.etcd_unreachable {
        problems.push(format!("etcd did not answer through any replica: {why}"));
    }
    let (voters, healthy_voters, leader_id) = match members {
        Some(members) => judge_members(facts, members, &mut problems),
        None => (0, 0, None),
    };
    let leader = leader_id.and_then(|id| {
        members
            .into_iter()
            .flatten()
            .find(|m| m.id == id)
            .map(label_name)
    });
    let fault_tolerance = healthy_voters.saturating_sub(quorum::quorum(voters));
    for alarm in &facts.alarms {
        problems.push(format!(
            "etcd alarm {alarm}: etcd refuses writes until its cause is fixed and the alarm disarmed \
             (`etcdctl alarm disarm`)."
        ));
    }

    if let Some(why) = &facts.keys_error {
        problems.push(why.clone());
    }
    judge_serving(facts, &mut problems);
    judge_expiry(facts, now, &mut problems, &mut notes);
    if let Some(why) = &facts.backup_error {
        notes.push(format!("The backup location could not be listed: {why}"));
    } else if facts.backup_policy && facts.last_backup.is_none() {
        notes.push(
            "The backup location holds no snapshot of this cluster yet: one is taken before the next change \
             that touches etcd."
                .to_string(),
        );
    }

    let healthy = problems.is_empty();
    let summary = if healthy {
        // No leader or database size here: an election would change the line, and a plan showing an output
        // that holds it as changed would break a drift-detection pipeline.
        format!(
            "healthy: {healthy_voters} of {voters} etcd voters healthy, tolerates {fault_tolerance} failure{}",
            if fault_tolerance == 1 { "" } else { "s" }
        )
    } else {
        format!(
            "unhealthy: {} problem{}: {}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            problems.join(" ")
        )
    };
    Verdict {
        healthy,
        summary,
        problems,
        notes,
        leader,
        leader_id,
        fault_tolerance,
        voters,
        healthy_voters,
    }
}

/// Membership against the replica VMs, each member's health, learners, and quorum. Returns the voters, the
/// healthy voters and the leader's id, when the members that answered agree on one that is listed.
fn judge_members(
    facts: &Facts,
    members: &[MemberFacts],
    problems: &mut Vec<String>,
) -> (u64, u64, Option<u64>) {
    let named: BTreeSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
    for r in facts
        .replicas
        .iter()
        .filter(|r| r.vm_status == "RUNNING" && !named.contains(r.name.as_str()))
    {
        problems.push(format!(
            "Replica {}'s VM runs but is not an etcd member: a join stopped before adding it, or it was \
             removed; the next apply adds it.",
            r.name
        ));
    }
    let vms: BTreeSet<&str> = facts.replicas.iter().map(|r| r.name.as_str()).collect();
    let running: BTreeSet<&str> = facts
        .replicas
        .iter()
        .filter(|r| r.vm_status == "RUNNING")
        .map(|r| r.name.as_str())
        .collect();
    for m in members {
        let who = label(m);
        if m.learner {
            problems.push(format!(
                "{who} is a learner, not a voter: a join is in progress or stopped half way; the next apply of \
                 its replica promotes it or takes it out."
            ));
        } else if !m.name.is_empty() && !vms.contains(m.name.as_str()) {
            problems.push(format!(
                "{who} has no replica VM: its VM was deleted; the next apply rebuilds it on its data disk or \
                 removes the member."
            ));
        }
        match &m.state {
            MemberState::Healthy | MemberState::NotAsked => {}
            MemberState::Unhealthy(why) => problems.push(format!("{who} is unhealthy: {why}.")),
            // A member on a VM that is not running cannot answer; the VM's status already said so.
            MemberState::Unreachable(_)
                if !running.contains(m.name.as_str()) && vms.contains(m.name.as_str()) => {}
            MemberState::Unreachable(why) => {
                problems.push(format!("{who} does not answer: {why}."))
            }
        }
    }
    let voters: Vec<&MemberFacts> = members.iter().filter(|m| !m.learner).collect();
    let healthy_voters = voters
        .iter()
        .filter(|m| m.state == MemberState::Healthy)
        .count() as u64;
    let count = voters.len() as u64;
    if count > 0 && healthy_voters < quorum::quorum(count) {
        problems.push(format!(
            "etcd has no quorum: {healthy_voters} of {count} voters are healthy and {} are needed; the API \
             server cannot read or write. docs/guides/disaster-recovery.md says how to bring it back.",
            quorum::quorum(count)
        ));
    }
    // The leader the answering members agree on.
    let leaders: BTreeSet<u64> = members
        .iter()
        .filter_map(|m| m.leader_id)
        .filter(|id| *id != 0)
        .collect();
    let leader = match leaders.iter().collect::<Vec<_>>().as_slice() {
        [one] => members.iter().any(|m| m.id == **one).then_some(**one),
        _ => None,
    };
    (count, healthy_voters, leader)
}

/// Who serves the static IP, and the load balancer's view of each replica in its pool.
fn judge_serving(facts: &Facts, problems: &mut Vec<String>) {
    match &facts.ip_holder {
        IpHolder::Nobody if !facts.replicas.is_empty() => problems.push(
            "Nothing serves the cluster's static IP: no forwarding rule and no replica VM holds it; the next \
             apply of the cluster attaches it."
                .to_string(),
        ),
        IpHolder::Nobody | IpHolder::ForwardingRule | IpHolder::Instance(_) => {}
    }
    if !facts.load_balancer {
        return;
    }
    for r in &facts.replicas {
        match r.backend_healthy {
            None => problems.push(format!(
                "Replica {} is not in the load balancer's pool: the static IP never sends it traffic; the \
                 next apply of the replica adds it.",
                r.name
            )),
            Some(false) if r.vm_status == "RUNNING" => problems.push(format!(
                "The load balancer's health check fails on replica {}: its API server does not answer on \
                 /healthz.",
                r.name
            )),
            // A stopped VM fails the check too; its status already said so.
            Some(_) => {}
        }
    }
}

/// Expired certificates are problems; certificates due for renewal, and a CA that expires within a year, notes.
fn judge_expiry(facts: &Facts, now: i64, problems: &mut Vec<String>, notes: &mut Vec<String>) {
    let renew_before = facts.renew_before.as_secs() as i64;
    for r in &facts.replicas {
        let Some(at) = r.certificates_expire_at else {
            continue;
        };
        if at <= now {
            problems.push(format!(
                "Replica {}'s certificates expired at {}: its etcd peers and clients refuse it; apply the \
                 replica to roll it with new ones.",
                r.name,
                rfc3339(at)
            ));
        } else if at - now <= renew_before {
            notes.push(format!(
                "Replica {}'s certificates expire at {}: the next apply rolls it with new ones.",
                r.name,
                rfc3339(at)
            ));
        }
    }
    if let Some(at) = facts.ca_expires_at {
        if at <= now {
            problems.push(format!(
                "The cluster's CA expired at {}: no certificate it signed is valid.",
                rfc3339(at)
            ));
        } else if Duration::from_secs((at - now) as u64) <= super::certificates::CA_WARN_WITHIN {
            notes.push(format!(
                "The cluster's CA expires at {}, and with it every certificate it signed.",
                rfc3339(at)
            ));
        }
    }
}

fn label(m: &MemberFacts) -> String {
    if m.name.is_empty() {
        format!("etcd member {:x} (not started)", m.id)
    } else {
        format!("etcd member {}", m.name)
    }
}

fn label_name(m: &MemberFacts) -> String {
    if m.name.is_empty() {
        format!("{:x}", m.id)
    } else {
        m.name.clone()
    }
}

#[cfg(test)]
mod tests;
