//! Whether a cluster's load balancer and static IP are in the shape its replicas call for, decided from an observed
//! snapshot: what is wrong (one sentence per problem, recorded by refresh in the cluster's `drift`) and the steps
//! that put it right (run by the cluster's update). No I/O.
//!
//! The expected shape (see `topology`):
//! - no replica: nobody holds the static IP and no load-balancer object exists;
//! - one replica: it holds the static IP; no forwarding rule, target pool or health check;
//! - two or more: a health check, a target pool of exactly the replica VMs, and a forwarding rule on the static
//!   IP; no VM holds the static IP itself.
//!
//! A replica whose VM vanished still counts while its voting etcd member remains: refresh keeps it in state and
//! the plan replaces it, so the cluster should not tear its load balancer down in the meantime. Its stale entry
//! in the pool goes, since the pool can only hold VMs that exist.

use std::collections::BTreeSet;

use super::step::ClusterStep;
use super::topology::{IpHolder, Observed};

/// One way the cluster is out of shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// With at most one replica, a load-balancer object is left over.
    LeftoverForwardingRule,
    LeftoverPool,
    /// With at most one replica and no pool, the pool's health check is left over.
    LeftoverHealthCheck,
    /// The sole replica does not hold the static IP.
    SoleReplicaWithoutIp {
        replica: String,
        holder: IpHolder,
    },
    /// Two or more replicas, but a VM holds the static IP directly.
    IpOnVm {
        holder: String,
        replicas: usize,
    },
    MissingPool,
    MissingForwardingRule,
    NotInPool {
        replica: String,
    },
    StrangerInPool {
        name: String,
    },
    /// With two or more replicas, a VM has no external IP at all (an IP move stopped between removing its access
    /// config and adding the new one).
    NoExternalIp {
        replica: String,
    },
}

impl Drift {
    /// The sentence the plan shows.
    pub fn sentence(&self) -> String {
        match self {
            Drift::LeftoverForwardingRule => {
                "The load balancer's forwarding rule exists although the cluster has at most one replica.".into()
            }
            Drift::LeftoverPool => {
                "The load balancer's target pool exists although the cluster has at most one replica.".into()
            }
            Drift::LeftoverHealthCheck => {
                "The load balancer's health check exists although the cluster has at most one replica.".into()
            }
            Drift::SoleReplicaWithoutIp { replica, holder } => format!(
                "The sole replica {replica} does not hold the static IP ({}).",
                match holder {
                    IpHolder::Nobody => "nothing holds it".to_string(),
                    IpHolder::ForwardingRule => "a forwarding rule holds it".to_string(),
                    IpHolder::Instance(other) => format!("{other} holds it"),
                }
            ),
            Drift::IpOnVm { holder, replicas } => format!(
                "VM {holder} holds the static IP directly although the cluster has {replicas} replicas, which share it through the load balancer."
            ),
            Drift::MissingPool => {
                "The load balancer's target pool is missing.".into()
            }
            Drift::MissingForwardingRule => {
                "The forwarding rule that serves the static IP is missing.".into()
            }
            Drift::NotInPool { replica } => {
                format!("Replica {replica} is not in the load balancer's target pool.")
            }
            Drift::StrangerInPool { name } => format!(
                "The load balancer's target pool lists {name}, which is not an existing replica VM."
            ),
            Drift::NoExternalIp { replica } => format!(
                "Replica {replica} has no external IP (an IP move stopped half way), so its etcd member cannot be reached."
            ),
        }
    }
}

/// The cluster's replicas: VMs that exist, plus voting etcd members whose VM vanished.
fn replicas(world: &Observed) -> BTreeSet<String> {
    let mut out = world.instances.clone();
    for m in world.members.iter().flatten().filter(|m| !m.is_learner) {
        out.insert(m.name.clone());
    }
    out
}

/// What is out of shape, in the order the repairs go.
pub fn cluster_drift(world: &Observed) -> Vec<Drift> {
    let replicas = replicas(world);
    let holder = world.ip_holder.clone().unwrap_or(IpHolder::Nobody);
    let mut out = Vec::new();
    if replicas.len() <= 1 {
        if world.forwarding_rule {
            out.push(Drift::LeftoverForwardingRule);
        }
        // The sole replica must be a VM that exists to hold anything; a vanished one is replaced, and its
        // successor founds with the static IP.
        if let Some(sole) = world.instances.iter().next()
            && replicas.len() == 1
            && holder != IpHolder::Instance(sole.clone())
        {
            out.push(Drift::SoleReplicaWithoutIp {
                replica: sole.clone(),
                holder,
            });
        }
        if world.pool.is_some() {
            out.push(Drift::LeftoverPool);
        } else if world.health_check {
            out.push(Drift::LeftoverHealthCheck);
        }
        return out;
    }
    // First: until it has an IP again, its etcd member cannot be asked about anything that follows.
    for name in &world.without_external_ip {
        out.push(Drift::NoExternalIp {
            replica: name.clone(),
        });
    }
    match &world.pool {
        None => out.push(Drift::MissingPool),
        Some(pool) => {
            for name in world.instances.iter().filter(|n| !pool.contains(*n)) {
                out.push(Drift::NotInPool {
                    replica: name.clone(),
                });
            }
            for name in pool.iter().filter(|n| !world.instances.contains(*n)) {
                out.push(Drift::StrangerInPool { name: name.clone() });
            }
        }
    }
    if let IpHolder::Instance(vm) = &holder {
        out.push(Drift::IpOnVm {
            holder: vm.clone(),
            replicas: replicas.len(),
        });
    }
    if !world.forwarding_rule {
        out.push(Drift::MissingForwardingRule);
    }
    out
}

/// The sentences refresh records in the cluster's `drift` (empty when in shape).
pub fn drift_sentences(world: &Observed) -> Vec<String> {
    cluster_drift(world).iter().map(Drift::sentence).collect()
}

/// The repairs a membership change needs before it can judge quorum: VMs that lost their external IP to an
/// interrupted IP move get one back (the provider reaches etcd through it). A delete runs before the cluster's own
/// repair in the same apply (Terraform destroys dependents before it updates what they depend on), so it cannot
/// wait for that repair.
pub fn reachability_repairs(world: &Observed) -> Vec<ClusterStep> {
    cluster_drift(world)
        .into_iter()
        .filter_map(|d| match d {
            Drift::NoExternalIp { replica } => Some(ClusterStep::AttachEphemeralIp { to: replica }),
            _ => None,
        })
        .collect()
}

/// The steps that bring the cluster back into shape, in order; empty when it is in shape. The static IP moves
/// only once whatever will serve it exists (the rule after the pool, the VM's access config after the rule is
/// gone), and the endpoint is checked afterwards when a replica VM in `running` can answer: with every replica
/// stopped, nothing can, and the replicas' own plans start them.
pub fn cluster_repairs(world: &Observed, running: &BTreeSet<String>) -> Vec<ClusterStep> {
    let drift = cluster_drift(world);
    let mut steps = Vec::new();
    let mut moves_ip = false;
    for d in &drift {
        match d {
            Drift::LeftoverForwardingRule => {
                steps.push(ClusterStep::DeleteForwardingRule);
                moves_ip = true;
            }
            Drift::SoleReplicaWithoutIp { replica, .. } => {
                steps.push(ClusterStep::AttachStaticIp {
                    to: replica.clone(),
                });
                moves_ip = true;
            }
            Drift::LeftoverPool | Drift::LeftoverHealthCheck => {}
            Drift::NoExternalIp { replica } => steps.push(ClusterStep::AttachEphemeralIp {
                to: replica.clone(),
            }),
            Drift::MissingPool => {
                steps.push(ClusterStep::CreateHealthCheck);
                steps.push(ClusterStep::CreatePool {
                    instances: world.instances.iter().cloned().collect(),
                });
            }
            // A stopped replica is started by its own replica's apply, which puts it back once its API answers
            // (a roll that was interrupted, resumed); adding it here would put a dead backend in the pool.
            Drift::NotInPool { replica } if running.contains(replica) => {
                steps.push(ClusterStep::AddPoolMember {
                    name: replica.clone(),
                })
            }
            Drift::NotInPool { .. } => {}
            Drift::StrangerInPool { name } => {
                steps.push(ClusterStep::RemovePoolMember { name: name.clone() })
            }
            Drift::IpOnVm { holder, .. } => {
                steps.push(ClusterStep::DetachStaticIp {
                    from: holder.clone(),
                });
                moves_ip = true;
            }
            Drift::MissingForwardingRule => {
                steps.push(ClusterStep::CreateForwardingRule);
                moves_ip = true;
            }
        }
    }
    if moves_ip && world.instances.iter().any(|i| running.contains(i)) {
        steps.push(ClusterStep::AwaitEndpoint);
    }
    // Leftovers go once the IP is back on the sole replica and serving.
    if drift.contains(&Drift::LeftoverPool) {
        steps.push(ClusterStep::DeletePool);
    }
    if world.health_check
        && (drift.contains(&Drift::LeftoverPool) || drift.contains(&Drift::LeftoverHealthCheck))
    {
        steps.push(ClusterStep::DeleteHealthCheck);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MemberView;

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
        holder: IpHolder,
        pool: Option<&[&str]>,
        rule: bool,
        members: &[&str],
    ) -> Observed {
        Observed {
            instances: instances.iter().map(|s| s.to_string()).collect(),
            ip_holder: Some(holder),
            health_check: pool.is_some(),
            pool: pool.map(|p| p.iter().map(|s| s.to_string()).collect()),
            forwarding_rule: rule,
            members: Some(
                members
                    .iter()
                    .enumerate()
                    .map(|(i, n)| member(n, i as u64 + 1))
                    .collect(),
            ),
            stopped: BTreeSet::new(),
            without_external_ip: BTreeSet::new(),
            keys_in_metadata: BTreeSet::new(),
            etcd_unreachable: None,
        }
    }

    /// Every VM running.
    fn repairs(w: &Observed) -> Vec<ClusterStep> {
        cluster_repairs(w, &w.instances)
    }

    fn lb(instances: &[&str]) -> Observed {
        world(
            instances,
            IpHolder::ForwardingRule,
            Some(instances),
            true,
            instances,
        )
    }

    #[test]
    fn in_shape_clusters_need_nothing() {
        let none = Observed {
            ip_holder: Some(IpHolder::Nobody),
            ..Default::default()
        };
        let one = world(
            &["m1"],
            IpHolder::Instance("m1".into()),
            None,
            false,
            &["m1"],
        );
        for w in [none, one, lb(&["m1", "m2"]), lb(&["m1", "m2", "m3"])] {
            assert_eq!(cluster_drift(&w), vec![], "{w:?}");
            assert_eq!(repairs(&w), vec![], "{w:?}");
        }
    }

    #[test]
    fn a_sole_replica_that_lost_the_static_ip_gets_it_back() {
        let w = world(&["m1"], IpHolder::Nobody, None, false, &["m1"]);
        let sentences = drift_sentences(&w);
        assert_eq!(sentences.len(), 1);
        assert!(
            sentences[0].contains("sole replica m1") && sentences[0].contains("nothing holds it"),
            "{sentences:?}"
        );
        assert_eq!(
            repairs(&w),
            vec![
                ClusterStep::AttachStaticIp { to: "m1".into() },
                ClusterStep::AwaitEndpoint
            ]
        );
    }

    #[test]
    fn a_sole_replica_next_to_leftover_load_balancer_takes_the_ip_and_the_leftovers_go() {
        let w = world(
            &["m1"],
            IpHolder::ForwardingRule,
            Some(&["m1"]),
            true,
            &["m1"],
        );
        assert_eq!(
            repairs(&w),
            vec![
                ClusterStep::DeleteForwardingRule,
                ClusterStep::AttachStaticIp { to: "m1".into() },
                ClusterStep::AwaitEndpoint,
                ClusterStep::DeletePool,
                ClusterStep::DeleteHealthCheck,
            ]
        );
    }

    #[test]
    fn a_health_check_left_without_its_pool_goes() {
        // A shrink to one killed between deleting the pool and deleting its health check.
        let mut w = world(&["a"], IpHolder::Instance("a".into()), None, false, &["a"]);
        w.health_check = true;
        assert_eq!(cluster_drift(&w), [Drift::LeftoverHealthCheck]);
        assert_eq!(repairs(&w), [ClusterStep::DeleteHealthCheck]);
        // With no replica at all, the same.
        let mut empty = world(&[], IpHolder::Nobody, None, false, &[]);
        empty.health_check = true;
        assert_eq!(repairs(&empty), [ClusterStep::DeleteHealthCheck]);
    }

    #[test]
    fn a_dropped_pool_member_is_added_back_and_a_stranger_removed() {
        let mut w = lb(&["m1", "m2", "m3"]);
        w.pool = Some(["m1", "m3", "gone"].iter().map(|s| s.to_string()).collect());
        assert_eq!(
            drift_sentences(&w),
            vec![
                "Replica m2 is not in the load balancer's target pool.".to_string(),
                "The load balancer's target pool lists gone, which is not an existing replica VM."
                    .to_string(),
            ]
        );
        assert_eq!(
            repairs(&w),
            vec![
                ClusterStep::AddPoolMember { name: "m2".into() },
                ClusterStep::RemovePoolMember {
                    name: "gone".into()
                },
            ]
        );
    }

    #[test]
    fn a_stopped_replica_out_of_the_pool_waits_for_its_own_apply() {
        // A roll killed after its replica left the pool and stopped: the replica's own apply resumes the roll
        // and rejoins the pool once its API answers; the cluster's repair must not add a dead backend first.
        let mut w = lb(&["m1", "m2", "m3"]);
        w.pool = Some(["m1", "m3"].iter().map(|s| s.to_string()).collect());
        let running: BTreeSet<String> = ["m1", "m3"].iter().map(|s| s.to_string()).collect();
        assert_eq!(cluster_repairs(&w, &running), Vec::<ClusterStep>::new());
    }

    #[test]
    fn a_deleted_forwarding_rule_is_recreated_and_the_endpoint_checked() {
        let mut w = lb(&["m1", "m2"]);
        w.forwarding_rule = false;
        w.ip_holder = Some(IpHolder::Nobody);
        assert_eq!(
            drift_sentences(&w),
            vec!["The forwarding rule that serves the static IP is missing.".to_string()]
        );
        assert_eq!(
            repairs(&w),
            vec![
                ClusterStep::CreateForwardingRule,
                ClusterStep::AwaitEndpoint
            ]
        );
    }

    #[test]
    fn an_ip_move_stopped_half_way_gets_the_vm_an_ip_first_then_the_rule() {
        // Killed between deleting m1's access config (the static IP) and adding its ephemeral one: m1 has no
        // external IP and nothing serves the static IP.
        let mut w = lb(&["m1", "m2"]);
        w.forwarding_rule = false;
        w.ip_holder = Some(IpHolder::Nobody);
        w.without_external_ip.insert("m1".into());
        assert_eq!(
            drift_sentences(&w)[0],
            "Replica m1 has no external IP (an IP move stopped half way), so its etcd member cannot be reached."
        );
        assert_eq!(
            repairs(&w),
            vec![
                ClusterStep::AttachEphemeralIp { to: "m1".into() },
                ClusterStep::CreateForwardingRule,
                ClusterStep::AwaitEndpoint
            ]
        );
        // A join or leave first restores only what it needs to reach etcd.
        assert_eq!(
            reachability_repairs(&w),
            vec![ClusterStep::AttachEphemeralIp { to: "m1".into() }]
        );
        assert_eq!(reachability_repairs(&lb(&["m1", "m2"])), vec![]);
        // The sole replica without any IP is the cluster repair's: it gets the static IP, not an ephemeral one.
        let mut sole = world(&["m1"], IpHolder::Nobody, None, false, &["m1"]);
        sole.without_external_ip.insert("m1".into());
        assert_eq!(reachability_repairs(&sole), vec![]);
    }

    #[test]
    fn a_vm_holding_the_ip_among_several_replicas_gives_it_to_the_load_balancer() {
        let w = world(
            &["m1", "m2"],
            IpHolder::Instance("m1".into()),
            None,
            false,
            &["m1", "m2"],
        );
        assert_eq!(
            repairs(&w),
            vec![
                ClusterStep::CreateHealthCheck,
                ClusterStep::CreatePool {
                    instances: vec!["m1".into(), "m2".into()]
                },
                ClusterStep::DetachStaticIp { from: "m1".into() },
                ClusterStep::CreateForwardingRule,
                ClusterStep::AwaitEndpoint,
            ]
        );
    }

    #[test]
    fn a_vanished_vm_still_counts_while_its_member_remains() {
        // Two replicas, one VM deleted out of band: the load balancer stays; the pool loses the dead entry.
        let w = world(
            &["m1"],
            IpHolder::ForwardingRule,
            Some(&["m1", "m2"]),
            true,
            &["m1", "m2"],
        );
        assert_eq!(
            repairs(&w),
            vec![ClusterStep::RemovePoolMember { name: "m2".into() }]
        );
        // A learner left by an interrupted join is not a replica: one replica, which holds the IP, is in shape.
        let mut w = world(
            &["m1"],
            IpHolder::Instance("m1".into()),
            None,
            false,
            &["m1"],
        );
        let mut learner = member("m9", 9);
        learner.is_learner = true;
        w.members.as_mut().unwrap().push(learner);
        assert_eq!(repairs(&w), vec![]);
    }

    #[test]
    fn etcd_unreachable_judges_from_the_vms() {
        let mut w = world(&["m1"], IpHolder::Instance("m1".into()), None, false, &[]);
        w.members = None;
        assert_eq!(cluster_drift(&w), vec![]);
        // No replica at all: leftovers go, nothing needs the IP.
        let w = Observed {
            ip_holder: Some(IpHolder::ForwardingRule),
            forwarding_rule: true,
            pool: Some(BTreeSet::new()),
            health_check: true,
            ..Default::default()
        };
        assert_eq!(
            repairs(&w),
            vec![
                ClusterStep::DeleteForwardingRule,
                ClusterStep::DeletePool,
                ClusterStep::DeleteHealthCheck
            ]
        );
    }

    #[test]
    fn with_every_replica_stopped_the_ip_moves_but_nobody_can_answer_for_it() {
        let w = world(&["m1"], IpHolder::Nobody, None, false, &["m1"]);
        assert_eq!(
            cluster_repairs(&w, &BTreeSet::new()),
            vec![ClusterStep::AttachStaticIp { to: "m1".into() }]
        );
    }
}
