//! Who holds the cluster's static IP and which steps a join or a leave still needs, decided from an observed
//! snapshot of the world. Steps already true in the snapshot are not returned, so an interrupted apply resumes
//! where it stopped. No I/O: resources observe, this decides, backends act.
//!
//! The shape of a cluster:
//! - one replica: the static IP is that VM's access config; no load balancer.
//! - two or more: the static IP is a forwarding rule to a target pool of every replica, with a health check;
//!   each VM has an ephemeral IP (never in a certificate).

use std::collections::BTreeSet;

use super::quorum;
use super::step::{ClusterStep, ReplicaStep, Step};

/// What holds the static IP now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpHolder {
    Nobody,
    Instance(String),
    ForwardingRule,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    pub name: String,
    pub id: u64,
    pub is_learner: bool,
    /// Whether the member answered a health check.
    pub healthy: bool,
    /// Whether it answered at all (healthy or not): a member that answers without a leader is alive, and may only
    /// be waiting for a quorum that another member's restart took away.
    pub answered: bool,
}

/// A snapshot of one cluster, read once per operation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Replica VMs that exist (any status), by name.
    pub instances: BTreeSet<String>,
    pub ip_holder: Option<IpHolder>,
    pub health_check: bool,
    /// `None` when there is no target pool.
    pub pool: Option<BTreeSet<String>>,
    pub forwarding_rule: bool,
    /// `None` when etcd could not be reached (no replica yet, or every member down).
    pub members: Option<Vec<MemberView>>,
    /// Why `members` is `None` although replica VMs run: no running replica's etcd answered from where the
    /// provider runs (a firewall, a network path, or etcd down on every one). Membership is then *unknown*, not
    /// empty, and no membership change may be decided from it.
    pub etcd_unreachable: Option<String>,
    /// Replica VMs that exist but are not RUNNING (stopped, crashed, being stopped or started).
    pub stopped: BTreeSet<String>,
    /// Replica VMs with no external IP at all: an IP move (delete the access config, then add one) stopped half
    /// way. The provider reaches etcd through external IPs, so their members cannot be asked.
    pub without_external_ip: BTreeSet<String>,
    /// Replica VMs that keep their keys in instance metadata (`key_placement::in_metadata`): made by an earlier
    /// release, they have no secret in Secret Manager.
    pub keys_in_metadata: BTreeSet<String>,
}

impl Observed {
    /// The voting members etcd listed (learners excluded); none when the list could not be read.
    pub fn voters(&self) -> impl Iterator<Item = &MemberView> {
        self.members.iter().flatten().filter(|m| !m.is_learner)
    }
}

/// A refusal: the summary and what to do.
pub type Refusal = (String, String);

/// The refusal of any membership change while etcd's member list is unknown: guessing "no members" would skip
/// the quorum check and the member's removal (a leave), or found a second cluster (a join).
pub fn unknown_membership(world: &Observed, change: &str) -> Option<Refusal> {
    let why = world.etcd_unreachable.as_ref()?;
    let running: Vec<&str> = world.instances.iter().map(String::as_str).collect();
    Some((
        format!("Cannot {change}: etcd's member list could not be read from where Terraform runs"),
        format!(
            "No etcd member of the cluster's replicas ({}) answered on its client port (2379): {why}. Without the member list the provider cannot check quorum or add or remove a member, so it changed nothing. The provider reaches each replica's etcd from this host, through the replica's external IP (or its internal IP with the provider's `etcd_via_internal_ip = true`, for Terraform inside the VPC). Make sure this host's address is in the cluster's `etcd_client_source_ranges` and that no other firewall or route blocks port 2379, then apply again. If etcd itself is down on every replica, `terraform plan` shows the replicas' state; restart them first.",
            running.join(", ")
        ),
    ))
}

/// What a refresh says when etcd did not answer: the state then holds what Compute Engine shows, and nothing of
/// etcd's membership or health, so a plan from here (a drift job outside the network) would report "no changes"
/// without having looked. `None` when etcd answered, or no replica runs to ask.
pub fn unread_etcd(world: &Observed, cluster: &str) -> Option<Refusal> {
    let why = world.etcd_unreachable.as_ref()?;
    let running: Vec<&str> = world
        .instances
        .iter()
        .filter(|n| !world.stopped.contains(*n))
        .map(String::as_str)
        .collect();
    if running.is_empty() {
        return None;
    }
    Some((
        format!("etcd of cluster {cluster} could not be read: this plan cannot see drift in etcd"),
        format!(
            "No etcd member of the running replicas ({}) answered on its client port (2379): {why}. The refresh recorded what Compute Engine shows (VMs, load balancer, metadata) but not etcd's members or their health, so a removed, stopped or unhealthy member does not show in this plan, and any change of membership would be refused at apply. Run plans from a host whose address is in the cluster's `etcd_client_source_ranges` (or inside the VPC with the provider's `etcd_via_internal_ip = true`); `ha_cluster_health` names each fault once it can look.",
            running.join(", ")
        ),
    ))
}

fn unhealthy(members: &[MemberView]) -> Vec<&str> {
    members
        .iter()
        .filter(|m| !m.healthy)
        .map(|m| m.name.as_str())
        .collect()
}

/// The steps to bring replica `me` into the cluster. `others` are the other replicas the configuration declares.
pub fn join_steps(world: &Observed, me: &str) -> Result<Vec<Step>, Refusal> {
    let mut steps = Vec::new();
    let members = world.members.clone().unwrap_or_default();
    let voting: Vec<&MemberView> = members.iter().filter(|m| !m.is_learner).collect();
    let me_member = members.iter().find(|m| m.name == me);

    for stale in members
        .iter()
        .filter(|m| m.is_learner && m.name != me && !world.instances.contains(&m.name))
    {
        steps.push(
            ClusterStep::RemoveStaleMember {
                name: stale.name.clone(),
                id: stale.id,
            }
            .into(),
        );
    }

    let others: BTreeSet<&String> = world
        .instances
        .iter()
        .filter(|n| n.as_str() != me)
        .collect();
    if !others.is_empty()
        && let Some(refusal) = unknown_membership(world, &format!("add replica {me}"))
    {
        return Err(refusal);
    }
    let founding = others.is_empty() && voting.iter().all(|m| m.name == me);
    if founding {
        if !world.instances.contains(me) {
            steps.push(
                ReplicaStep::CreateFoundingInstance {
                    with_static_ip: world.ip_holder != Some(IpHolder::ForwardingRule),
                }
                .into(),
            );
        }
        // Also when the VM is there already and etcd answers: an apply killed before the binding existed resumes
        // here. A resumed replica whose etcd does not answer has nothing to decide from, as before.
        if !world.instances.contains(me) || world.members.is_some() {
            steps.push(ReplicaStep::AwaitAdminBinding.into());
        }
        return Ok(steps);
    }

    // Joining an existing cluster: quorum first.
    let healthy = voting.iter().filter(|m| m.healthy).count() as u64;
    let n = voting.len() as u64;
    if me_member.is_none_or(|m| m.is_learner) && !quorum::can_add_member(n, healthy) {
        let down = unhealthy(&members);
        return Err((
            "Adding a replica now would risk etcd's quorum".into(),
            format!(
                "{healthy} of {n} etcd members are healthy (unhealthy: {}). Repair or replace the unhealthy replicas first (`terraform apply -replace=...`), then add this one.",
                down.join(", ")
            ),
        ));
    }
    if me_member.is_none() {
        steps.push(ReplicaStep::AddLearner.into());
    }
    if !world.instances.contains(me) {
        steps.push(ReplicaStep::CreateJoiningInstance.into());
    }
    if me_member.is_none_or(|m| m.is_learner) {
        steps.push(ReplicaStep::AwaitCaughtUpAndPromote.into());
    }

    // Load balancer: created with the second replica, joined by later ones.
    let everyone: Vec<String> = others
        .iter()
        .map(|s| s.to_string())
        .chain(std::iter::once(me.to_string()))
        .collect();
    if !world.health_check {
        steps.push(ClusterStep::CreateHealthCheck.into());
    }
    match &world.pool {
        None => steps.push(
            ClusterStep::CreatePool {
                instances: everyone,
            }
            .into(),
        ),
        Some(pool) if !pool.contains(me) => steps.push(ReplicaStep::AddToPool.into()),
        Some(_) => {}
    }
    let mut moves_ip = false;
    if let Some(IpHolder::Instance(holder)) = &world.ip_holder {
        steps.push(
            ClusterStep::DetachStaticIp {
                from: holder.clone(),
            }
            .into(),
        );
        moves_ip = true;
    }
    if !world.forwarding_rule {
        steps.push(ClusterStep::CreateForwardingRule.into());
        moves_ip = true;
    }
    if moves_ip {
        steps.push(ClusterStep::AwaitEndpoint.into());
    }
    Ok(steps)
}

/// The steps to take replica `me` out of the cluster, leaving the survivors in shape.
pub fn leave_steps(world: &Observed, me: &str) -> Result<Vec<Step>, Refusal> {
    // The last replica takes etcd with it and has no member to remove; any other leave must see the members.
    if world.instances.iter().any(|n| n != me)
        && let Some(refusal) = unknown_membership(world, &format!("remove replica {me}"))
    {
        return Err(refusal);
    }
    let mut steps = Vec::new();
    let members = world.members.clone().unwrap_or_default();
    let me_member = members.iter().find(|m| m.name == me);
    let voting: Vec<&MemberView> = members.iter().filter(|m| !m.is_learner).collect();
    let n = voting.len() as u64;
    let healthy = voting.iter().filter(|m| m.healthy).count() as u64;

    if let Some(m) = me_member
        && !m.is_learner
        && n > 1
    {
        // Removing a healthy member must leave a healthy majority; removing a dead one only helps.
        let ok = if m.healthy {
            quorum::can_remove_healthy_member(n, healthy)
        } else {
            healthy >= quorum::quorum(n - 1)
        };
        if !ok {
            let down = unhealthy(&members);
            return Err((
                format!("Removing replica {me} would lose etcd's quorum"),
                format!(
                    "{healthy} of {n} etcd members are healthy (unhealthy: {}). Removing {me} leaves too few to agree. Repair or replace the unhealthy replicas first (`terraform apply -replace=...`), then remove this one.",
                    down.join(", ")
                ),
            ));
        }
    }

    let survivors: Vec<&String> = world
        .instances
        .iter()
        .filter(|n| n.as_str() != me)
        .collect();
    if world.pool.as_ref().is_some_and(|p| p.contains(me)) && !survivors.is_empty() {
        steps.push(ReplicaStep::RemoveFromPool.into());
    }
    if let Some(m) = me_member
        && survivors
            .iter()
            .any(|s| members.iter().any(|x| &x.name == *s))
    {
        steps.push(ReplicaStep::MoveLeadership.into());
        steps.push(ReplicaStep::RemoveMember { id: m.id }.into());
    }
    if world.instances.contains(me) {
        steps.push(ReplicaStep::DeleteInstance.into());
    }
    // Back to one replica: the static IP goes back to the survivor, and the load balancer goes.
    if survivors.len() <= 1 {
        if world.forwarding_rule {
            steps.push(ClusterStep::DeleteForwardingRule.into());
        }
        if let Some(last) = survivors.first()
            && world.ip_holder.as_ref() != Some(&IpHolder::Instance(last.to_string()))
        {
            steps.push(
                ClusterStep::AttachStaticIp {
                    to: last.to_string(),
                }
                .into(),
            );
            steps.push(ClusterStep::AwaitEndpoint.into());
        }
        if world.pool.is_some() {
            steps.push(ClusterStep::DeletePool.into());
        }
        if world.health_check {
            steps.push(ClusterStep::DeleteHealthCheck.into());
        }
    }
    // Once the VM is gone GCE lets its data disk go (a replica leaving takes its etcd data with it), and its
    // internal IP; its keys go with it. None is observed: each step accepts "already gone".
    steps.push(ReplicaStep::DeleteDataDisk.into());
    steps.push(ReplicaStep::ReleaseInternalAddress.into());
    // A VM made before keys moved to Secret Manager has no secret, and its project may not have the API enabled.
    if !world.keys_in_metadata.contains(me) {
        steps.push(ReplicaStep::DeleteKeys.into());
    }
    Ok(steps)
}

/// Warnings about a cluster's shape at the end of an apply: the summary and what to do.
pub fn shape_warnings(replicas: usize, zones: usize) -> Vec<Refusal> {
    let mut out = Vec::new();
    if replicas == 2 {
        out.push((
            "Two replicas tolerate no more failures than one".to_string(),
            "etcd needs a majority, which with two members is both: losing either replica stops the control plane, so two masters fail about twice as often as one. Add a third replica (or go back to one).".to_string(),
        ));
    }
    if replicas >= 2 && zones == 1 {
        out.push((
            "All replicas are in one zone".to_string(),
            "A zone outage takes the whole control plane down. Set `multizone = true` on the cluster and give replicas different zones of its region.".to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps;

    fn member(name: &str, id: u64) -> MemberView {
        MemberView {
            name: name.into(),
            id,
            is_learner: false,
            healthy: true,
            answered: true,
        }
    }

    fn world(
        instances: &[&str],
        holder: Option<IpHolder>,
        pool: Option<&[&str]>,
        rule: bool,
        members: &[MemberView],
    ) -> Observed {
        Observed {
            instances: instances.iter().map(|s| s.to_string()).collect(),
            ip_holder: holder,
            health_check: pool.is_some(),
            pool: pool.map(|p| p.iter().map(|s| s.to_string()).collect()),
            forwarding_rule: rule,
            members: Some(members.to_vec()),
            stopped: BTreeSet::new(),
            without_external_ip: BTreeSet::new(),
            keys_in_metadata: BTreeSet::new(),
            etcd_unreachable: None,
        }
    }

    #[test]
    fn unknown_membership_is_not_empty() {
        let a = member("a", 1);
        let b = member("b", 2);
        let mut w = world(
            &["a", "b"],
            Some(IpHolder::ForwardingRule),
            Some(&["a", "b"]),
            true,
            &[a, b],
        );
        w.members = None;
        w.etcd_unreachable = Some("connection refused".into());
        // A leave must not skip the member's removal; a join must not found a second cluster.
        let leave = leave_steps(&w, "a").unwrap_err();
        assert!(leave.0.contains("Cannot remove replica a"), "{leave:?}");
        let join = join_steps(&w, "c").unwrap_err();
        assert!(join.0.contains("Cannot add replica c"), "{join:?}");
        // Every VM stopped is not "unreachable": nothing answers because nothing runs (the plan shows them).
        w.etcd_unreachable = None;
        assert!(leave_steps(&w, "a").is_ok());
        // The only replica, resumed: its own VM exists, so there is nothing to decide from membership.
        let mut sole = world(
            &["a"],
            Some(IpHolder::Instance("a".into())),
            None,
            false,
            &[],
        );
        sole.members = None;
        sole.etcd_unreachable = Some("connection refused".into());
        assert_eq!(join_steps(&sole, "a"), Ok(vec![]));
        assert!(leave_steps(&sole, "a").is_ok());
    }

    #[test]
    fn a_refresh_that_could_not_read_etcd_says_so_and_names_the_running_replicas() {
        let mut w = world(&["a", "b"], Some(IpHolder::ForwardingRule), None, true, &[]);
        w.members = None;
        assert_eq!(unread_etcd(&w, "walk"), None, "etcd answered");
        w.etcd_unreachable = Some("tried a, b; connection refused".into());
        let (summary, detail) = unread_etcd(&w, "walk").expect("a warning");
        assert!(
            summary.contains("etcd of cluster walk could not be read"),
            "{summary}"
        );
        assert!(
            detail.contains("(a, b)") && detail.contains("etcd_client_source_ranges"),
            "{detail}"
        );
        w.stopped = ["a", "b"].map(String::from).into();
        assert_eq!(unread_etcd(&w, "walk"), None, "nothing runs to ask");
    }

    #[test]
    fn shape_warnings_name_two_replicas_and_one_zone() {
        assert!(shape_warnings(1, 1).is_empty());
        assert!(shape_warnings(3, 3).is_empty());
        let two = shape_warnings(2, 2);
        assert_eq!(two.len(), 1);
        assert!(two[0].0.contains("Two replicas"));
        let one_zone = shape_warnings(3, 1);
        assert_eq!(one_zone.len(), 1);
        assert!(one_zone[0].1.contains("multizone = true"));
        assert_eq!(shape_warnings(2, 1).len(), 2);
    }

    #[test]
    fn first_replica_founds_etcd_and_holds_the_ip() {
        let w = Observed::default();
        assert_eq!(
            join_steps(&w, "m1").unwrap(),
            steps![
                ReplicaStep::CreateFoundingInstance {
                    with_static_ip: true
                },
                ReplicaStep::AwaitAdminBinding
            ]
        );
        // Done already: only the binding is looked for again.
        let w = world(
            &["m1"],
            Some(IpHolder::Instance("m1".into())),
            None,
            false,
            &[member("m1", 1)],
        );
        assert_eq!(
            join_steps(&w, "m1").unwrap(),
            steps![ReplicaStep::AwaitAdminBinding]
        );
    }

    #[test]
    fn second_replica_builds_the_load_balancer_and_moves_the_ip() {
        let w = world(
            &["m1"],
            Some(IpHolder::Instance("m1".into())),
            None,
            false,
            &[member("m1", 1)],
        );
        assert_eq!(
            join_steps(&w, "m2").unwrap(),
            steps![
                ReplicaStep::AddLearner,
                ReplicaStep::CreateJoiningInstance,
                ReplicaStep::AwaitCaughtUpAndPromote,
                ClusterStep::CreateHealthCheck,
                ClusterStep::CreatePool {
                    instances: vec!["m1".into(), "m2".into()]
                },
                ClusterStep::DetachStaticIp { from: "m1".into() },
                ClusterStep::CreateForwardingRule,
                ClusterStep::AwaitEndpoint
            ]
        );
    }

    #[test]
    fn interrupted_join_resumes_where_it_stopped() {
        // Learner added and VM created, then the apply died.
        let mut learner = member("m2", 2);
        learner.is_learner = true;
        let w = world(
            &["m1", "m2"],
            Some(IpHolder::Instance("m1".into())),
            None,
            false,
            &[member("m1", 1), learner],
        );
        assert_eq!(
            join_steps(&w, "m2").unwrap()[0],
            Step::Replica(ReplicaStep::AwaitCaughtUpAndPromote)
        );
        // IP detached but no rule yet: only the rule and the endpoint check remain.
        let w = world(
            &["m1", "m2"],
            Some(IpHolder::Nobody),
            Some(&["m1", "m2"]),
            false,
            &[member("m1", 1), member("m2", 2)],
        );
        assert_eq!(
            join_steps(&w, "m2").unwrap(),
            steps![
                ClusterStep::CreateForwardingRule,
                ClusterStep::AwaitEndpoint
            ]
        );
    }

    #[test]
    fn third_replica_joins_the_pool() {
        let w = world(
            &["m1", "m2"],
            Some(IpHolder::ForwardingRule),
            Some(&["m1", "m2"]),
            true,
            &[member("m1", 1), member("m2", 2)],
        );
        assert_eq!(
            join_steps(&w, "m3").unwrap(),
            steps![
                ReplicaStep::AddLearner,
                ReplicaStep::CreateJoiningInstance,
                ReplicaStep::AwaitCaughtUpAndPromote,
                ReplicaStep::AddToPool
            ]
        );
    }

    #[test]
    fn a_stale_learner_is_removed_before_a_new_join() {
        let mut stale = member("m9", 9);
        stale.is_learner = true;
        let w = world(
            &["m1"],
            Some(IpHolder::Instance("m1".into())),
            None,
            false,
            &[member("m1", 1), stale],
        );
        assert_eq!(
            join_steps(&w, "m2").unwrap()[0],
            Step::Cluster(ClusterStep::RemoveStaleMember {
                name: "m9".into(),
                id: 9
            })
        );
    }

    #[test]
    fn joining_with_a_dead_member_is_refused() {
        let mut dead = member("m2", 2);
        dead.healthy = false;
        let w = world(
            &["m1", "m2", "m3"],
            Some(IpHolder::ForwardingRule),
            Some(&["m1", "m2", "m3"]),
            true,
            &[member("m1", 1), dead, member("m3", 3)],
        );
        let (summary, detail) = join_steps(&w, "m4").unwrap_err();
        assert!(summary.contains("quorum"));
        assert!(detail.contains("unhealthy: m2"), "{detail}");
    }

    #[test]
    fn leaving_three_to_two_keeps_the_load_balancer() {
        let w = world(
            &["m1", "m2", "m3"],
            Some(IpHolder::ForwardingRule),
            Some(&["m1", "m2", "m3"]),
            true,
            &[member("m1", 1), member("m2", 2), member("m3", 3)],
        );
        assert_eq!(
            leave_steps(&w, "m3").unwrap(),
            steps![
                ReplicaStep::RemoveFromPool,
                ReplicaStep::MoveLeadership,
                ReplicaStep::RemoveMember { id: 3 },
                ReplicaStep::DeleteInstance,
                ReplicaStep::DeleteDataDisk,
                ReplicaStep::ReleaseInternalAddress,
                ReplicaStep::DeleteKeys
            ]
        );
    }

    #[test]
    fn leaving_two_to_one_gives_the_ip_back() {
        let w = world(
            &["m1", "m2"],
            Some(IpHolder::ForwardingRule),
            Some(&["m1", "m2"]),
            true,
            &[member("m1", 1), member("m2", 2)],
        );
        assert_eq!(
            leave_steps(&w, "m2").unwrap(),
            steps![
                ReplicaStep::RemoveFromPool,
                ReplicaStep::MoveLeadership,
                ReplicaStep::RemoveMember { id: 2 },
                ReplicaStep::DeleteInstance,
                ClusterStep::DeleteForwardingRule,
                ClusterStep::AttachStaticIp { to: "m1".into() },
                ClusterStep::AwaitEndpoint,
                ClusterStep::DeletePool,
                ClusterStep::DeleteHealthCheck,
                ReplicaStep::DeleteDataDisk,
                ReplicaStep::ReleaseInternalAddress,
                ReplicaStep::DeleteKeys
            ]
        );
    }

    #[test]
    fn removing_a_healthy_member_next_to_a_dead_one_is_refused() {
        let mut dead = member("m2", 2);
        dead.healthy = false;
        let w = world(
            &["m1", "m2", "m3"],
            Some(IpHolder::ForwardingRule),
            Some(&["m1", "m2", "m3"]),
            true,
            &[member("m1", 1), dead.clone(), member("m3", 3)],
        );
        let (summary, detail) = leave_steps(&w, "m3").unwrap_err();
        assert!(summary.contains("lose etcd's quorum"), "{summary}");
        assert!(detail.contains("unhealthy: m2"), "{detail}");
        // Removing the dead one is fine: 2 healthy of the 2 that remain.
        assert!(leave_steps(&w, "m2").is_ok());
    }

    #[test]
    fn a_replica_whose_keys_are_in_metadata_leaves_without_touching_secret_manager() {
        let mut w = world(
            &["m1"],
            Some(IpHolder::Instance("m1".into())),
            None,
            false,
            &[member("m1", 1)],
        );
        w.keys_in_metadata.insert("m1".into());
        assert_eq!(
            leave_steps(&w, "m1").unwrap(),
            steps![
                ReplicaStep::DeleteInstance,
                ReplicaStep::DeleteDataDisk,
                ReplicaStep::ReleaseInternalAddress
            ]
        );
    }

    #[test]
    fn last_replica_leaves_without_touching_etcd_membership() {
        let w = world(
            &["m1"],
            Some(IpHolder::Instance("m1".into())),
            None,
            false,
            &[member("m1", 1)],
        );
        assert_eq!(
            leave_steps(&w, "m1").unwrap(),
            steps![
                ReplicaStep::DeleteInstance,
                ReplicaStep::DeleteDataDisk,
                ReplicaStep::ReleaseInternalAddress,
                ReplicaStep::DeleteKeys
            ]
        );
    }
}
