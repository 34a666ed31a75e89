//! What a dead apply left behind under a name no Terraform state holds. A replica create that is killed
//! (SIGKILL, a crash, a lost CI runner) before Terraform saved anything leaves its objects under the name it
//! generated: the next apply generates another and would never look at them. Joins mark what they make until
//! they are done (the VM carries `ha-master-joining` until its join finishes; its internal address is described as
//! a replica's of this cluster), so a later join, holding the cluster's lock and therefore sure that no other join
//! is running, can tell a dead join's leftovers from live replicas and remove them before it starts.
//!
//! The rules are conservative: only what cannot belong to a replica that any state tracks is an orphan.
//! - A VM still marked joining, not the joiner's own: a finished join clears the mark before it returns, and a
//!   failed one is tainted in its state and replaced anyway (removing it first changes nothing but the order).
//! - An internal address of the cluster whose replica has no VM and whose IP is no voting member's: a replica whose
//!   VM vanished still has its dead member, and its own delete (the replacement) removes both, so it is left alone.
//!   A learner at that IP is a join that never finished: it does not keep the address, and the join's own
//!   `RemoveStaleMember` step removes it.
//! - A replica's keys secret whose replica has no VM and no address this rule keeps: a join writes the secret
//!   after it reserves the address and before it makes the VM, so a join killed in between leaves both, and they
//!   go together. A replica whose VM vanished keeps its address, and so its secret, for its own replacement (which
//!   writes the secret again anyway). An orphan VM's secret goes with its replica (`ops::leave`).

use std::collections::BTreeSet;

use crate::step::ClusterStep;

/// A replica VM of the cluster as the join observes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSeen {
    pub name: String,
    /// Carries the joining mark.
    pub joining: bool,
}

/// An internal address reserved for a replica of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressSeen {
    /// The replica it was reserved for (`<replica>-int`).
    pub replica: String,
    pub ip: String,
}

/// An etcd member, by the IP of its peer URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSeen {
    pub peer_ip: String,
    pub is_learner: bool,
}

/// A Secret Manager secret holding a replica's keys, labelled with the cluster and the replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSeen {
    pub id: String,
    pub replica: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Orphans {
    /// Replica VMs to take out of the cluster as a delete would (pool, member, VM, address, keys).
    pub replicas: Vec<String>,
    /// Addresses (by replica name) with no VM: delete them.
    pub addresses: Vec<String>,
    /// Keys secrets (by id) of replicas with neither a VM nor a kept address: delete them.
    pub secrets: Vec<String>,
}

impl Orphans {
    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty() && self.addresses.is_empty() && self.secrets.is_empty()
    }

    /// What the join of `me` does before it reads the cluster: remove the dead joins' addresses and secrets, then
    /// reserve its own internal IP. Orphan replicas are not among the steps: each is taken out of the cluster as a
    /// delete would (`ops::leave`), a change of its own, before these.
    pub fn before_join(&self, me: &str) -> Vec<ClusterStep> {
        let addresses = self
            .addresses
            .iter()
            .map(|replica| ClusterStep::ReleaseAddressOf {
                replica: replica.clone(),
            });
        let secrets = self
            .secrets
            .iter()
            .map(|id| ClusterStep::DeleteSecret { id: id.clone() });
        let reserve = ClusterStep::ReserveAddressOf {
            replica: me.to_string(),
        };
        addresses.chain(secrets).chain([reserve]).collect()
    }
}

/// The leftovers of dead joins, as seen by the join of `me`.
pub fn orphans(
    me: &str,
    vms: &[VmSeen],
    addresses: &[AddressSeen],
    members: &[MemberSeen],
    secrets: &[SecretSeen],
) -> Orphans {
    let replicas: Vec<String> = vms
        .iter()
        .filter(|v| v.joining && v.name != me)
        .map(|v| v.name.clone())
        .collect();
    let with_vm: BTreeSet<&str> = vms.iter().map(|v| v.name.as_str()).collect();
    let mut out = Orphans {
        replicas,
        ..Default::default()
    };
    for a in addresses {
        if a.replica == me || with_vm.contains(a.replica.as_str()) {
            continue;
        }
        let voting_on_ip = members.iter().any(|m| m.peer_ip == a.ip && !m.is_learner);
        if !voting_on_ip {
            out.addresses.push(a.replica.clone());
        }
    }
    let kept_address = |replica: &str| {
        addresses.iter().any(|a| a.replica == replica)
            && !out.addresses.iter().any(|r| r == replica)
    };
    out.secrets = secrets
        .iter()
        .filter(|s| {
            s.replica != me && !with_vm.contains(s.replica.as_str()) && !kept_address(&s.replica)
        })
        .map(|s| s.id.clone())
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(name: &str, joining: bool) -> VmSeen {
        VmSeen {
            name: name.into(),
            joining,
        }
    }
    fn addr(replica: &str, ip: &str) -> AddressSeen {
        AddressSeen {
            replica: replica.into(),
            ip: ip.into(),
        }
    }
    fn member(ip: &str, is_learner: bool) -> MemberSeen {
        MemberSeen {
            peer_ip: ip.into(),
            is_learner,
        }
    }

    fn secret(replica: &str) -> SecretSeen {
        SecretSeen {
            id: format!("{replica}-keys"),
            replica: replica.into(),
        }
    }

    /// (what the case shows, VMs, addresses, members, expected orphans of the join of "me")
    type Case = (
        &'static str,
        Vec<VmSeen>,
        Vec<AddressSeen>,
        Vec<MemberSeen>,
        Orphans,
    );

    /// (what the case shows, VMs, addresses, members, secrets, the secrets expected to go)
    type SecretCase = (
        &'static str,
        Vec<VmSeen>,
        Vec<AddressSeen>,
        Vec<MemberSeen>,
        Vec<SecretSeen>,
        Vec<&'static str>,
    );

    #[test]
    fn secrets_table() {
        let cases: Vec<SecretCase> = vec![
            (
                "every replica with a VM keeps its keys",
                vec![vm("a", false), vm("b", false)],
                vec![addr("a", "10.0.0.2"), addr("b", "10.0.0.3")],
                vec![member("10.0.0.2", false), member("10.0.0.3", false)],
                vec![secret("a"), secret("b")],
                vec![],
            ),
            (
                "killed after writing its keys, before its VM: the keys go with the address",
                vec![vm("a", false)],
                vec![addr("a", "10.0.0.2"), addr("dead", "10.0.0.9")],
                vec![member("10.0.0.2", false), member("10.0.0.9", true)],
                vec![secret("a"), secret("dead")],
                vec!["dead-keys"],
            ),
            (
                "keys whose address is already gone go too",
                vec![vm("a", false)],
                vec![addr("a", "10.0.0.2")],
                vec![member("10.0.0.2", false)],
                vec![secret("a"), secret("dead")],
                vec!["dead-keys"],
            ),
            (
                "a replica whose VM vanished keeps its keys with its address, for its replacement",
                vec![vm("a", false)],
                vec![addr("a", "10.0.0.2"), addr("gone", "10.0.0.9")],
                vec![member("10.0.0.2", false), member("10.0.0.9", false)],
                vec![secret("a"), secret("gone")],
                vec![],
            ),
            (
                "the joiner's own keys are its to resume",
                vec![vm("a", false)],
                vec![addr("a", "10.0.0.2"), addr("me", "10.0.0.9")],
                vec![member("10.0.0.2", false)],
                vec![secret("a"), secret("me")],
                vec![],
            ),
            (
                "an orphan VM's keys leave with its replica, not on their own",
                vec![vm("a", false), vm("dead", true)],
                vec![addr("a", "10.0.0.2"), addr("dead", "10.0.0.9")],
                vec![member("10.0.0.2", false), member("10.0.0.9", false)],
                vec![secret("a"), secret("dead")],
                vec![],
            ),
        ];
        for (what, vms, addresses, members, secrets, want) in cases {
            let found = orphans("me", &vms, &addresses, &members, &secrets);
            assert_eq!(found.secrets, want, "{what}");
        }
    }

    #[test]
    fn table() {
        let cases: Vec<Case> = vec![
            (
                "a healthy cluster has none",
                vec![vm("a", false), vm("b", false)],
                vec![addr("a", "10.0.0.2"), addr("b", "10.0.0.3")],
                vec![member("10.0.0.2", false), member("10.0.0.3", false)],
                Orphans::default(),
            ),
            (
                "killed after reserving its address: the address goes",
                vec![vm("a", false)],
                vec![addr("a", "10.0.0.2"), addr("dead", "10.0.0.9")],
                vec![member("10.0.0.2", false)],
                Orphans {
                    addresses: vec!["dead".into()],
                    ..Default::default()
                },
            ),
            (
                "killed after adding its learner: learner and address go",
                vec![vm("a", false)],
                vec![addr("a", "10.0.0.2"), addr("dead", "10.0.0.9")],
                vec![member("10.0.0.2", false), member("10.0.0.9", true)],
                Orphans {
                    addresses: vec!["dead".into()],
                    ..Default::default()
                },
            ),
            (
                "killed once its VM existed: the replica leaves as a delete would",
                vec![vm("a", false), vm("dead", true)],
                vec![addr("a", "10.0.0.2"), addr("dead", "10.0.0.9")],
                vec![member("10.0.0.2", false), member("10.0.0.9", false)],
                Orphans {
                    replicas: vec!["dead".into()],
                    ..Default::default()
                },
            ),
            (
                "the joiner's own leftovers are its to resume, not to remove",
                vec![vm("a", false), vm("me", true)],
                vec![addr("a", "10.0.0.2"), addr("me", "10.0.0.9")],
                vec![member("10.0.0.2", false), member("10.0.0.9", true)],
                Orphans::default(),
            ),
            (
                "a tracked replica whose VM vanished keeps its address and dead member for its own replacement",
                vec![vm("a", false)],
                vec![addr("a", "10.0.0.2"), addr("gone", "10.0.0.9")],
                vec![member("10.0.0.2", false), member("10.0.0.9", false)],
                Orphans::default(),
            ),
            (
                "a replica made before joins were marked is never an orphan",
                vec![vm("a", false), vm("old", false)],
                vec![addr("a", "10.0.0.2")],
                vec![member("10.0.0.2", false)],
                Orphans::default(),
            ),
        ];
        for (what, vms, addresses, members, want) in cases {
            assert_eq!(
                orphans("me", &vms, &addresses, &members, &[]),
                want,
                "{what}"
            );
        }
    }

    /// A kill anywhere in the list resumes: a secret whose address is gone is still an orphan to the next join,
    /// an address never depends on a secret, and the join's own reservation comes last, after everything it might
    /// collide with is gone.
    #[test]
    fn before_a_join_the_addresses_go_then_the_secrets_then_its_own_address_is_reserved() {
        let found = Orphans {
            replicas: vec!["x".into()],
            addresses: vec!["a".into(), "b".into()],
            secrets: vec!["a-keys".into()],
        };
        assert_eq!(
            found.before_join("c"),
            vec![
                ClusterStep::ReleaseAddressOf {
                    replica: "a".into()
                },
                ClusterStep::ReleaseAddressOf {
                    replica: "b".into()
                },
                ClusterStep::DeleteSecret {
                    id: "a-keys".into()
                },
                ClusterStep::ReserveAddressOf {
                    replica: "c".into()
                },
            ]
        );
        assert_eq!(
            Orphans::default().before_join("c"),
            vec![ClusterStep::ReserveAddressOf {
                replica: "c".into()
            }]
        );
    }
}
