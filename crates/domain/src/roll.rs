//! Rolling one replica onto new settings (machine type, image, boot disk, tags, the settings a master reads at
//! boot): what a master is made of changes one replica at a time, behind the load balancer, with no member added
//! or removed and no data moved. Decided from an observed snapshot, so a roll killed anywhere resumes: the VM's
//! own state (missing, stopped, its machine type, the build it carries as a label) says what is left to do.
//!
//! The cheapest safe change is taken: a machine type alone is stop, `setMachineType`, start (the boot disk and
//! etcd's data stay); anything else deletes the VM and creates it again with the new configuration on the same
//! data disk and internal IP, so etcd restarts as the same member with its data. Before either, every other
//! voter must be healthy (a roll makes this replica's member unavailable for a while) and the replica leaves the
//! pool and hands etcd leadership away; after, its member must be healthy and caught up and its API serving
//! before it rejoins the pool, and a soak of consecutive healthy checks ends the step.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::step::{ClusterStep, ReplicaStep, Step};
use super::topology::{Observed, Refusal, unknown_membership};

/// What a replica VM is built from. The machine type (GCE changes it in place on a stopped VM) and the data
/// disk's size (GCE grows a disk in place; it is read from the disk itself) are kept apart from the rest,
/// whose digest the VM carries as the label [`BUILD_LABEL`], so a resumed roll can tell an old VM from a
/// rebuilt one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub machine_type: String,
    /// The size of etcd's data disk, in GB. `None` in a state written before the size was part of a build.
    pub data_disk_gb: Option<i64>,
    /// Every other setting, by name, as the plan shows it (`image`, `api_port`, ...).
    pub settings: BTreeMap<String, String>,
}

/// The name `master_settings` shows the data disk's size under, as the cluster attribute is named.
pub const DATA_DISK_SIZE: &str = "data_disk_size_gb";

/// The name `master_settings` shows the etcd image under (absent for the default version's image).
pub const ETCD_IMAGE: &str = "etcd_image";

/// The name `master_settings` shows the Kubernetes release under (absent for 1.28.15, what masters ran before).
pub const KUBERNETES_VERSION: &str = "kubernetes_version";

/// The name a roll's warning lists a move to another subnetwork under (not part of a build: the VM's interface
/// says where it is).
pub const SUBNETWORK: &str = "subnetwork";

/// The VM label that records which build a replica VM was created from.
pub const BUILD_LABEL: &str = "ha-master-build";

impl Build {
    /// The settings as a replica's `master_settings` attribute shows them: the machine type among the rest.
    pub fn shown(&self) -> BTreeMap<String, String> {
        let mut all = self.settings.clone();
        all.insert("machine_type".into(), self.machine_type.clone());
        if let Some(gb) = self.data_disk_gb {
            all.insert(DATA_DISK_SIZE.into(), gb.to_string());
        }
        all
    }

    /// The inverse of [`Build::shown`].
    pub fn from_shown(shown: &BTreeMap<String, String>) -> Build {
        let mut settings = shown.clone();
        let machine_type = settings.remove("machine_type").unwrap_or_default();
        let data_disk_gb = settings.remove(DATA_DISK_SIZE).and_then(|v| v.parse().ok());
        Build {
            machine_type,
            data_disk_gb,
            settings,
        }
    }

    /// A stable digest of everything but the machine type, usable as a GCE label value (lowercase hex).
    /// FNV-1a: stable across Rust releases and platforms, unlike std's hasher; collisions only matter between
    /// two builds of one replica.
    pub fn digest(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (k, v) in &self.settings {
            for b in k.bytes().chain([0]).chain(v.bytes()).chain([0]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        format!("{h:016x}")
    }

    /// The setting names that differ from `old`, machine type included, in order. A data disk size that `old`
    /// does not record (a state from before it was part of a build) is no change: the disk has the size it has.
    pub fn changes_from(&self, old: &Build) -> Vec<String> {
        let (new, old) = (self.shown(), old.shown());
        let mut names: Vec<String> = new
            .keys()
            .chain(old.keys())
            .filter(|k| new.get(*k) != old.get(*k))
            .filter(|k| k.as_str() != DATA_DISK_SIZE || old.contains_key(*k))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// What the snapshot says about the rolling replica's VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmFacts {
    /// GCE's status (`RUNNING`, `TERMINATED`, ...).
    pub status: String,
    pub machine_type: String,
    /// The build digest the VM carries; `None` for a VM made before builds were recorded.
    pub build: Option<String>,
    /// Whether etcd's data disk is attached: without it etcd lives on the boot disk, which a rebuild deletes.
    pub has_data_disk: bool,
    /// Whether the certificates the VM runs with are within the cluster's renewal window
    /// (`domain::certificates`): a roll then rebuilds it, which issues new ones from the same CAs.
    pub certificates_due: bool,
    /// Whether this is the VM whose startup configuration refresh found edited by hand, which the plan showed
    /// rebuilt (`domain::metadata::must_rebuild`): the state keeps no copy to write back.
    pub startup_edited: bool,
    /// The name of the subnetwork its network interface is on.
    pub subnetwork: String,
    /// Its internal IP.
    pub internal_ip: Option<Ipv4Addr>,
}

/// Where the replica's internal IP lives, for a move to another subnetwork of the cluster's network: the VM is
/// rebuilt there on its data disk, its reserved internal address moves with it, and etcd is told the member's
/// new peer URL (`etcdctl member update`, etcd's documented way to change a member's peer address). The member
/// keeps its id and its data; nothing is streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The subnetwork the cluster's masters belong on, by name ([`subnetwork_name`]).
    pub want_subnetwork: String,
    /// The replica's reserved internal address (`<replica>-int`): its subnetwork's name and its IP; `None` when
    /// it is not reserved (a move killed between releasing it and reserving it again).
    pub reserved: Option<(String, Ipv4Addr)>,
    /// The peer IP etcd lists for the replica's member.
    pub peer_ip: Option<Ipv4Addr>,
}

/// The name of the subnetwork a setting or a URL names: its last path segment; none set is the subnetwork GCE
/// gives an auto-mode network in each region, named after the network.
pub fn subnetwork_name(subnetwork: Option<&str>, network: &str) -> String {
    let last = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    subnetwork
        .filter(|s| !s.is_empty())
        .map_or_else(|| last(network), last)
}

/// Siblings of `me` whose own roll was interrupted: their VM is stopped or gone and the target pool no longer
/// lists them, a state only a roll leaves a replica in (GCE keeps a stopped VM in its pool, and the cluster's
/// repairs put only running replicas back). Their replicas resume those rolls in the same apply, so at plan they
/// are no reason to refuse `me`'s roll; at apply it waits for them (`preflight` stays strict).
pub fn resuming_siblings(world: &Observed, me: &str) -> Vec<String> {
    let Some(pool) = &world.pool else {
        return Vec::new();
    };
    let members = world.members.as_deref().unwrap_or_default();
    members
        .iter()
        .filter(|m| m.name != me && !m.is_learner && !m.healthy && !pool.contains(&m.name))
        .filter(|m| world.stopped.contains(&m.name) || !world.instances.contains(&m.name))
        .map(|m| m.name.clone())
        .collect()
}

/// The plan's verdict on rolling `me`: a refusal for what this apply cannot mend, otherwise the siblings whose
/// interrupted rolls it resumes first (for the plan's warning).
pub fn plan_preflight(world: &Observed, me: &str) -> Result<Vec<String>, Refusal> {
    let resuming = resuming_siblings(world, me);
    if resuming.is_empty() {
        return preflight(world, me).map(|()| resuming);
    }
    // Judge the rest as if the resumed rolls had finished: those members healthy, their VMs back.
    let mut after = world.clone();
    for name in &resuming {
        after.instances.insert(name.clone());
        after.stopped.remove(name);
    }
    if let Some(members) = after.members.as_mut() {
        for m in members.iter_mut().filter(|m| resuming.contains(&m.name)) {
            m.healthy = true;
            m.answered = true;
        }
    }
    preflight(&after, me).map(|()| resuming)
}

/// Why the roll of `me` may not start: membership unknown, or another member not healthy (rolling makes this
/// member unavailable, so every other one must be able to carry quorum), or etcd not matching the replicas.
pub fn preflight(world: &Observed, me: &str) -> Result<(), Refusal> {
    let others: Vec<&String> = world.instances.iter().filter(|n| *n != me).collect();
    if let Some(r) = unknown_membership(world, &format!("roll replica {me}")) {
        return Err(r);
    }
    let Some(members) = &world.members else {
        // Nothing answers and nothing is known to be unreachable: every VM is stopped. A sole replica rolls
        // (its own restart is part of it); with others, quorum cannot be judged.
        return if others.is_empty() {
            Ok(())
        } else {
            Err(refusal(
                me,
                "no etcd member answered (every replica's VM is stopped?)".into(),
            ))
        };
    };
    if !members.iter().any(|m| m.name == me && !m.is_learner) {
        return Err((
            format!("Replica {me} cannot be rolled: it is not a voting etcd member"),
            format!(
                "etcd lists no voting member for {me}, so there is nothing to keep while its VM is rebuilt. Replace the replica instead: `terraform apply -replace=...` on the ha_master_replica named {me}."
            ),
        ));
    }
    let me_down = members.iter().any(|m| m.name == me && !m.healthy);
    // Its VM vanished (deleted by hand, or a roll killed between delete and create) while its member and data
    // disk stayed: the rebuild restarts the same member on its own data. That takes away nothing that is not
    // gone already, and the member needs no quorum to start, so the others' health does not matter. This is
    // how a cluster whose majority of VMs vanished with their disks kept gets quorum back: each such replica is
    // rebuilt regardless of the others, and etcd has quorum again once a majority runs.
    if me_down && !world.instances.contains(me) {
        return Ok(());
    }
    // A roll resumed after its own member went down: with two members (or half of an even cluster) the others
    // then have no quorum and answer without a leader. Alive is enough for them; the restart brings quorum back.
    let mut problems = Vec::new();
    for m in members.iter().filter(|m| m.name != me) {
        if m.is_learner {
            problems.push(format!("{} is a learner still joining", m.name));
        } else if !(m.healthy || me_down && m.answered) {
            problems.push(format!("{} is unhealthy", m.name));
        } else if !world.instances.contains(&m.name) {
            problems.push(format!("{} has no VM", m.name));
        }
    }
    for o in others {
        if !members.iter().any(|m| &m.name == o) {
            problems.push(format!("{o} has no etcd member"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(refusal(me, problems.join("; ")))
    }
}

fn refusal(me: &str, why: String) -> Refusal {
    (
        format!("Replica {me} cannot be rolled now: another etcd member is not healthy"),
        format!(
            "Rolling {me} takes its etcd member offline for a while, so every other member must be healthy first: {why}. Nothing was changed. Repair the others first (a plain `terraform apply` restarts a stopped VM; `terraform plan` names what is wrong), then apply again and the roll continues."
        ),
    )
}

/// The steps still needed to roll `me` onto `want`. `vm` is `None` when its VM does not exist (a roll killed
/// between deleting and creating it); `data_disk_gb` is the size of its data disk (`None`: no disk, or not
/// read). The target pool's listing says whether it is in the pool (no pool: the replica is alone and holds
/// the static IP).
///
/// A data disk smaller than wanted grows while its VM is deleted and the VM is rebuilt on it: the new VM's
/// first boot grows the filesystem (`master::render_user_data`), which a restart of the old VM would not do.
/// Growing after the delete keeps a killed roll honest: a grown disk with its old VM still there cannot be.
pub fn roll_steps(
    world: &Observed,
    me: &str,
    vm: Option<&VmFacts>,
    data_disk_gb: Option<i64>,
    want: &Build,
    place: &Placement,
) -> Result<Vec<Step>, Refusal> {
    preflight(world, me)?;
    let alone = world.instances.iter().all(|n| n == me);
    let in_pool = world.pool.as_ref().map(|p| p.contains(me));
    let digest = want.digest();
    let grow = matches!((want.data_disk_gb, data_disk_gb), (Some(w), Some(have)) if w > have);
    // Another subnetwork: the VM's interface says where it is; without a VM, its reserved address does.
    let moves = match vm {
        Some(v) => v.subnetwork != place.want_subnetwork,
        None => place
            .reserved
            .as_ref()
            .is_none_or(|(sub, _)| *sub != place.want_subnetwork),
    };
    // The IP the member will run on, when known now, against the one etcd lists: a move learns its new IP only
    // once the address is reserved again, and always tells etcd.
    let runs_on = vm
        .and_then(|v| v.internal_ip)
        .or(place.reserved.as_ref().map(|(_, ip)| *ip));
    let peer_stale = moves || runs_on.is_some_and(|ip| Some(ip) != place.peer_ip);
    if moves && let Some(refusal) = move_refusal(world, me) {
        return Err(refusal);
    }
    let rebuild = grow
        || moves
        || vm.is_none_or(|v| {
            v.build.as_deref() != Some(digest.as_str()) || v.certificates_due || v.startup_edited
        });
    let resize = vm.is_some_and(|v| v.machine_type != want.machine_type);
    let running = vm.is_some_and(|v| v.status == "RUNNING");
    let mut steps = Vec::new();
    if let Some(v) = vm
        && rebuild
        && !v.has_data_disk
    {
        return Err((
            format!("Replica {me} keeps etcd on its boot disk and cannot be rebuilt in place"),
            format!(
                "{me} was created before replicas got an etcd data disk, so deleting its VM would delete its etcd data. Replace it once, one replica at a time (`terraform apply -replace=...` on the ha_master_replica named {me}, then the next): the new replica joins as a new member with a data disk, and later changes roll in place."
            ),
        ));
    }
    let disruptive = vm.is_some() && (rebuild || resize);
    if disruptive && running && !alone {
        if in_pool == Some(true) {
            steps.push(ReplicaStep::RemoveFromPool.into());
        }
        steps.push(ReplicaStep::MoveLeadership.into());
    }
    if rebuild {
        if vm.is_some() {
            steps.push(ReplicaStep::DeleteInstance.into());
        }
        if moves {
            steps.push(ReplicaStep::MoveInternalAddress.into());
        }
        if grow {
            steps.push(ReplicaStep::GrowDataDisk.into());
        }
        steps.push(ReplicaStep::RebuildInstance.into());
    } else if resize {
        if vm.is_some_and(|v| v.status != "TERMINATED") {
            steps.push(ReplicaStep::StopInstance.into());
        }
        steps.push(ReplicaStep::SetMachineType.into());
        steps.push(ReplicaStep::StartInstance.into());
    } else if !running {
        steps.push(ReplicaStep::StartInstance.into());
    }
    // Once the VM runs on its new IP: with a majority of the others the update commits at once, and a sole or
    // second member needs its own restart for a quorum to commit it.
    if peer_stale {
        steps.push(ReplicaStep::UpdatePeerUrl.into());
    }
    let touched = !steps.is_empty();
    if touched {
        steps.push(ReplicaStep::AwaitMember.into());
    }
    if alone {
        if touched {
            steps.push(ClusterStep::AwaitEndpoint.into());
        }
    } else if touched || in_pool == Some(false) {
        steps.push(ReplicaStep::AwaitApi.into());
        if in_pool != Some(true) || steps.contains(&Step::Replica(ReplicaStep::RemoveFromPool)) {
            steps.push(ReplicaStep::AddToPool.into());
        }
    }
    if touched {
        steps.push(ReplicaStep::Soak.into());
    }
    Ok(steps)
}

/// Why replica `me` cannot follow its cluster to another VPC network (`from` and `to` name the networks). Members
/// on two networks cannot reach each other's peer port (GCE routes internal IPs within one network), so no roll
/// can move them one at a time; replacing every replica for it (what the plan used to do) loses etcd's data with
/// the last one. The plan refuses instead and says what the user can do. Another subnetwork of the same network
/// rolls ([`Placement`]).
pub fn network_move(me: &str, from: &str, to: &str) -> Option<Refusal> {
    let last = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    if last(from) == last(to) {
        return None;
    }
    Some((
        format!("Replica {me} cannot move to another network"),
        format!(
            "The cluster's masters are on network {from} and the configuration moves them to network {to}. Members on two VPC networks cannot reach each other's etcd peer port, so the masters cannot move one at a time, and replacing them all would lose etcd's data with the last one; nothing is planned. Set network back to {from}. Another subnetwork of {from} can be set instead: the replicas roll onto it one at a time, keeping their etcd members and data."
        ),
    ))
}

/// Why replica `me` cannot move to another subnetwork now: with two voting members, neither carries a quorum
/// alone, so etcd cannot commit the moved member's new peer URL until that member runs again, and the member at
/// its new address can reach the other only through whichever side still knows the right URL. A second failure
/// in that window (the other member's own restart, an interrupted apply) leaves both at addresses the other does
/// not know, and no quorum to say otherwise. A sole member commits its own change once it runs again, and three or
/// more keep a quorum without the one that moves.
pub fn move_refusal(world: &Observed, me: &str) -> Option<Refusal> {
    let voters = world.members.as_ref().map_or(world.instances.len(), |m| {
        m.iter().filter(|m| !m.is_learner).count()
    });
    (voters == 2).then(|| {
        (
            format!("Replica {me} cannot move to another subnetwork with two replicas"),
            format!(
                "Moving {me} changes its etcd member's peer address, which etcd must commit while the member is away: with two members neither has a quorum alone, so a second restart in that window could leave both at addresses the other does not know. Nothing was changed. Add a third replica first (three also keep the API up during every roll), then apply the subnetwork change; or move with one replica."
            ),
        )
    })
}

/// Why a change of `data_disk_size_gb` from `old` to `new` GB cannot be applied: GCE grows persistent disks
/// and never shrinks them, so a smaller size could only be had by replacing every disk, that is every copy of
/// etcd's data. Refused at plan, naming the way out.
pub fn data_disk_shrink(cluster: &str, old: i64, new: i64) -> Option<Refusal> {
    (new < old).then(|| {
        (
            format!("data_disk_size_gb cannot shrink from {old} to {new} GB"),
            format!(
                "GCE grows persistent disks but never shrinks them, so the etcd data disks of cluster {cluster}'s replicas stay at {old} GB. Set data_disk_size_gb = {old} (or larger: a larger size rolls the replicas one at a time, growing each disk). Nothing was changed."
            ),
        )
    })
}

/// What a roll means for the user, said at plan: how it is done and what they will see.
pub fn roll_warning(me: &str, changes: &[String], replicas: usize) -> (String, String) {
    let list = changes.join(", ");
    let how = if changes.iter().any(|c| c == SUBNETWORK) {
        "its VM is deleted and created again in the new subnetwork on the same etcd data disk: its reserved internal IP moves to that subnetwork, its certificates are issued for the new IP, and etcd is told the member's new peer URL (`member update`), so etcd restarts as the same member with its data (no member is added or removed, nothing is streamed)"
    } else if changes.iter().all(|c| c == "machine_type") {
        "its VM is stopped, its machine type set and the VM started again (same boot disk, same etcd member and data)"
    } else {
        "its VM is deleted and created again with the new settings on the same etcd data disk and internal IP, so etcd restarts as the same member with its data (no member is added or removed)"
    };
    let disk = if changes.iter().any(|c| c == DATA_DISK_SIZE) {
        " Its etcd data disk grows while the VM is away (GCE grows a disk in place and never shrinks one), and the new VM grows the filesystem at its first boot."
    } else {
        ""
    };
    let impact = if replicas <= 1 {
        "This is the only replica: the Kubernetes API is down while its VM restarts (about as long as a VM boot). Add a replica first to roll with no downtime."
            .to_string()
    } else if super::quorum::fault_tolerance(replicas as u64) == 0 {
        format!(
            "With {replicas} replicas etcd needs every member for a majority, so the Kubernetes API is down while each VM restarts. Add a replica first (three tolerate one member down) to roll with no downtime."
        )
    } else {
        format!(
            "The other {} replica(s) keep serving behind the load balancer, so no downtime is expected; replicas roll one at a time under the cluster lock, each rejoining the pool only once its etcd member is caught up and its API server answers.",
            replicas - 1
        )
    };
    (
        format!("Replica {me} will be rolled: {list} changes"),
        format!(
            "The apply rolls replica {me} in place: it leaves the load balancer, hands etcd leadership away if it leads, and {how}.{disk} {impact}"
        ),
    )
}

/// What a change of the cluster's settings means for masters no plan of this configuration may show: every replica
/// VM built from the old settings rolls when its replica next applies, including replicas kept in other states
/// (split states, Terragrunt units), whose plans read the new `spec` only after the cluster's apply has written it.
/// Said on the cluster's plan, so the one plan that sees the change also says how far it reaches. `masters` is
/// the cluster's replica VMs, or why they could not be listed. `None` when no setting a master is built from
/// changes, or the cluster has no master yet.
pub fn cluster_roll_notice(
    cluster: &str,
    old: &Build,
    new: &Build,
    masters: Result<&[String], &str>,
) -> Option<(String, String)> {
    let changes = new.changes_from(old);
    if changes.is_empty() || masters.is_ok_and(<[String]>::is_empty) {
        return None;
    }
    let (count, each, who) = match masters {
        Ok([one]) => ("1 master".to_string(), "it rolls", format!("({one})")),
        Ok(many) => (
            format!("{} masters", many.len()),
            "each rolls, one at a time under the cluster's lock,",
            format!("({})", super::protection::listed(many)),
        ),
        Err(why) => (
            "Every master".to_string(),
            "each rolls, one at a time under the cluster's lock,",
            format!("(Compute Engine did not list them: {why})"),
        ),
    };
    let verb = if changes.len() == 1 {
        "changes"
    } else {
        "change"
    };
    Some((
        format!(
            "{count} of cluster {cluster} will roll: {} {verb}",
            super::protection::listed(&changes)
        ),
        format!(
            "Every replica VM of cluster {cluster} {who} runs the settings this plan changes, so {each} when its `ha_master_replica` next applies. Replicas in this configuration show their roll in this plan. Replicas kept in other states (split states, Terragrunt units) read the new `spec` only once this apply has written it, so their plans show no change until then: plan and apply them after this apply."
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps;
    use crate::topology::{IpHolder, MemberView};

    fn build(machine_type: &str, image: &str) -> Build {
        Build {
            machine_type: machine_type.into(),
            data_disk_gb: Some(20),
            settings: [("image".to_string(), image.to_string())].into(),
        }
    }

    #[test]
    fn a_cluster_change_names_every_master_it_rolls_and_only_when_one_rolls() {
        let masters = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let old = build("e2-standard-2", "ubuntu-2404");
        let cases: [(Build, Vec<String>, Option<&str>); 5] = [
            (old.clone(), masters(&["a", "b"]), None),
            (build("e2-standard-4", "ubuntu-2404"), masters(&[]), None),
            (
                build("e2-standard-4", "ubuntu-2404"),
                masters(&["a"]),
                Some("1 master of cluster c will roll: machine_type changes"),
            ),
            (
                build("e2-standard-4", "ubuntu-2204"),
                masters(&["a", "b", "c"]),
                Some("3 masters of cluster c will roll: image and machine_type change"),
            ),
            (
                build("e2-standard-2", "ubuntu-2204"),
                masters(&["a", "b"]),
                Some("2 masters of cluster c will roll: image changes"),
            ),
        ];
        for (new, masters, want) in cases {
            let got = cluster_roll_notice("c", &old, &new, Ok(&masters));
            assert_eq!(
                got.as_ref().map(|(s, _)| s.as_str()),
                want,
                "{new:?} {masters:?}"
            );
            if let Some((_, detail)) = got {
                assert!(
                    detail.contains(&crate::protection::listed(&masters)),
                    "{detail}"
                );
                assert!(detail.contains("other states"), "{detail}");
            }
        }
        let unlisted = cluster_roll_notice("c", &old, &build("e2-standard-4", "x"), Err("403"));
        let (summary, detail) =
            unlisted.expect("a change is said even when the masters are not listed");
        assert_eq!(
            summary,
            "Every master of cluster c will roll: image and machine_type change"
        );
        assert!(detail.contains("did not list them: 403"), "{detail}");
        assert_eq!(cluster_roll_notice("c", &old, &old, Err("403")), None);
    }

    fn world(names: &[&str], unhealthy: &[&str]) -> Observed {
        Observed {
            instances: names.iter().map(|s| s.to_string()).collect(),
            ip_holder: Some(if names.len() > 1 {
                IpHolder::ForwardingRule
            } else {
                IpHolder::Instance(names[0].into())
            }),
            health_check: names.len() > 1,
            pool: (names.len() > 1).then(|| names.iter().map(|s| s.to_string()).collect()),
            forwarding_rule: names.len() > 1,
            members: Some(
                names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| MemberView {
                        name: n.to_string(),
                        id: i as u64 + 1,
                        is_learner: false,
                        healthy: !unhealthy.contains(n),
                        answered: !unhealthy.contains(n),
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn vm(status: &str, machine_type: &str, b: &Build) -> VmFacts {
        VmFacts {
            status: status.into(),
            machine_type: machine_type.into(),
            build: Some(b.digest()),
            has_data_disk: true,
            certificates_due: false,
            startup_edited: false,
            subnetwork: "default".into(),
            internal_ip: Some(HERE),
        }
    }

    const HERE: Ipv4Addr = Ipv4Addr::new(10, 128, 0, 2);

    /// Where the replica is and stays: its address in the cluster's subnetwork, the IP etcd lists.
    fn here() -> Placement {
        Placement {
            want_subnetwork: "default".into(),
            reserved: Some(("default".into(), HERE)),
            peer_ip: Some(HERE),
        }
    }

    fn with_etcd(version: &str) -> Build {
        with_account(
            version,
            "default",
            &["https://www.googleapis.com/auth/compute".into()],
        )
    }

    fn with_account(version: &str, account: &str, scopes: &[String]) -> Build {
        with_kubernetes(version, account, scopes, crate::kubernetes_version::LEGACY)
    }

    fn with_kubernetes(version: &str, account: &str, scopes: &[String], kubernetes: &str) -> Build {
        crate::master_spec::MasterSpec {
            machine_type: "e2-standard-2".into(),
            image: "cos".into(),
            boot_disk_size_gb: 20,
            data_disk_size_gb: 20,
            data_disk_type: crate::master_spec::DEFAULT_DATA_DISK_TYPE.into(),
            network: "default".into(),
            subnetwork: None,
            tags: vec![],
            labels: BTreeMap::new(),
            multizone: false,
            etcd_quorum_read: true,
            api_port: 443,
            service_range: "10.0.0.0/16".parse().unwrap(),
            dns_domain: "cluster.local".into(),
            etcd_version: version.into(),
            kubernetes_version: kubernetes.into(),
            service_account: account.into(),
            service_account_scopes: scopes.to_vec(),
            secrets_encryption_key: None,
            secrets_decryption_keys: Vec::new(),
            service_account_key_rotation: crate::rotation::Stage::Steady,
            ca_rotation: crate::rotation::Stage::Steady,
        }
        .build()
    }

    /// GCE sets a VM's service account only while it is stopped, and the kubelet reads its credentials at start:
    /// another account or other scopes are a roll, shown in `master_settings`.
    #[test]
    fn the_service_account_and_its_scopes_are_part_of_a_build() {
        let compute = vec!["https://www.googleapis.com/auth/compute".to_string()];
        let base = with_account("3.4", "default", &compute);
        assert_eq!(
            base.settings.get("service_account").map(String::as_str),
            Some("default")
        );
        let other = with_account("3.4", "masters@p.iam.gserviceaccount.com", &compute);
        assert_ne!(base.digest(), other.digest());
        let wider = with_account(
            "3.4",
            "default",
            &["https://www.googleapis.com/auth/cloud-platform".to_string()],
        );
        assert_ne!(base.digest(), wider.digest());
        assert_eq!(
            base.digest(),
            with_account("3.4", "default", &compute).digest()
        );
    }

    /// The release is part of a master; 1.28.15 (what every master ran before the setting) adds nothing, so
    /// older builds keep their digest, and `1.33` is the same master as its pinned `1.33.5`.
    #[test]
    fn the_kubernetes_release_is_part_of_a_build_and_the_legacy_one_keeps_older_builds() {
        let scopes = vec!["https://www.googleapis.com/auth/compute".to_string()];
        let k = |v: &str| with_kubernetes("3.4", "default", &scopes, v);
        assert!(!k("1.28.15").settings.contains_key(KUBERNETES_VERSION));
        assert_eq!(k("1.28").digest(), k("1.28.15").digest());
        assert_eq!(
            k("1.33")
                .settings
                .get(KUBERNETES_VERSION)
                .map(String::as_str),
            Some("1.33.5")
        );
        assert_eq!(k("1.33").digest(), k("1.33.5").digest());
        assert_ne!(k("1.33.5").digest(), k("1.34.1").digest());
        assert_ne!(k("1.28.14").digest(), k("1.28.15").digest());
    }

    #[test]
    fn the_etcd_image_is_part_of_a_build_and_the_default_keeps_the_builds_made_before_it() {
        let default = with_etcd(crate::etcd_version::LEGACY);
        // The default's image adds no setting, so the digest does not depend on how the version is spelled.
        assert!(!default.settings.contains_key(ETCD_IMAGE));
        assert_eq!(default.digest(), with_etcd("3.4.13").digest());
        assert_eq!(default.settings.len(), 10);
        let upgraded = with_etcd("3.5");
        assert_eq!(
            upgraded.settings.get(ETCD_IMAGE).map(String::as_str),
            Some("registry.k8s.io/etcd:3.5.24-0")
        );
        assert_ne!(upgraded.digest(), default.digest(), "a new etcd rolls");
        assert_eq!(
            upgraded.changes_from(&default),
            vec![ETCD_IMAGE.to_string()]
        );
        assert_eq!(
            default.changes_from(&upgraded),
            vec![ETCD_IMAGE.to_string()]
        );
        assert_eq!(with_etcd("3.5.24"), upgraded);
        // The older 3.5 pin is another build: a cluster that says "3.5" rolls onto the current patch.
        let old_pin = with_etcd("3.5.1");
        assert_eq!(
            old_pin.changes_from(&upgraded),
            vec![ETCD_IMAGE.to_string()]
        );
    }

    use crate::step::ClusterStep::*;
    use crate::step::ReplicaStep::*;
    use crate::step::{ReplicaStep, Step};

    #[test]
    fn a_sibling_whose_roll_was_interrupted_is_resumed_not_refused_at_plan() {
        let mut w = world(&["m1", "m2", "m3"], &["m2"]);
        // A crashed VM stays in the pool: plan refuses, naming it.
        w.stopped.insert("m2".into());
        let (_, detail) = plan_preflight(&w, "m1").unwrap_err();
        assert!(detail.contains("m2 is unhealthy"), "{detail}");
        // Stopped and out of the pool: only a roll leaves a replica so, and its own apply resumes it.
        w.pool.as_mut().unwrap().remove("m2");
        assert_eq!(plan_preflight(&w, "m1").unwrap(), vec!["m2".to_string()]);
        // Gone between delete and create: the same.
        w.instances.remove("m2");
        w.stopped.remove("m2");
        assert_eq!(plan_preflight(&w, "m1").unwrap(), vec!["m2".to_string()]);
        // Apply stays strict: it waits for m2 instead.
        assert!(preflight(&w, "m1").is_err());
        // Another member down as well is still a refusal.
        let mut both = world(&["m1", "m2", "m3"], &["m2", "m3"]);
        both.pool.as_mut().unwrap().remove("m2");
        both.stopped.insert("m2".into());
        let (_, detail) = plan_preflight(&both, "m1").unwrap_err();
        assert!(detail.contains("m3 is unhealthy"), "{detail}");
        assert!(!detail.contains("m2"), "{detail}");
    }

    #[test]
    fn a_vanished_vm_is_rebuilt_on_its_disk_whatever_the_others_health() {
        // Two of three VMs deleted by hand, disks kept: etcd lost quorum, the survivor answers unhealthy.
        let mut lost = world(&["m1", "m2", "m3"], &["m1", "m2", "m3"]);
        lost.instances.remove("m2");
        lost.instances.remove("m3");
        if let Some(m) = lost
            .members
            .as_mut()
            .unwrap()
            .iter_mut()
            .find(|m| m.name == "m1")
        {
            m.answered = true;
        }
        // Each vanished replica is rebuilt now (no waiting for the other: neither could ever come back).
        assert_eq!(preflight(&lost, "m2"), Ok(()));
        assert_eq!(preflight(&lost, "m3"), Ok(()));
        let want = build("e2-standard-2", "img-1");
        assert_eq!(
            roll_steps(&lost, "m2", None, Some(20), &want, &here()).unwrap(),
            steps![RebuildInstance, AwaitMember, AwaitApi, Soak]
        );
        // A running replica still needs the others healthy before it is taken down.
        let (_, detail) = preflight(&lost, "m1").unwrap_err();
        assert!(detail.contains("m2 is unhealthy"), "{detail}");
        // A vanished VM whose member is healthy cannot be (a VM list read before the VM came back): strict.
        let mut racing = world(&["m1", "m2", "m3"], &["m3"]);
        racing.instances.remove("m2");
        assert!(preflight(&racing, "m2").is_err());
        // A member etcd removed is not rebuilt: it is replaced.
        let mut removed = lost.clone();
        removed.members.as_mut().unwrap().retain(|m| m.name != "m2");
        assert!(preflight(&removed, "m2").is_err());
    }

    #[test]
    fn the_cheapest_safe_change_from_any_point_of_a_roll() {
        let old = build("e2-standard-2", "img-1");
        let bigger = build("e2-standard-4", "img-1");
        let newer = build("e2-standard-2", "img-2");
        let three = world(&["a", "b", "c"], &[]);
        let sole = world(&["a"], &[]);
        let mut a_out = three.clone();
        a_out.pool.as_mut().unwrap().remove("a");
        // (world, vm, want, steps)
        let cases: Vec<(&Observed, Option<VmFacts>, &Build, Vec<Step>)> = vec![
            // Nothing to do.
            (
                &three,
                Some(vm("RUNNING", "e2-standard-2", &old)),
                &old,
                vec![],
            ),
            // Machine type alone: stop, set, start.
            (
                &three,
                Some(vm("RUNNING", "e2-standard-2", &old)),
                &bigger,
                steps![
                    RemoveFromPool,
                    MoveLeadership,
                    StopInstance,
                    SetMachineType,
                    StartInstance,
                    AwaitMember,
                    AwaitApi,
                    AddToPool,
                    Soak
                ],
            ),
            // Killed after the stop: no second stop, nothing to hand away.
            (
                &a_out,
                Some(vm("TERMINATED", "e2-standard-2", &old)),
                &bigger,
                steps![
                    SetMachineType,
                    StartInstance,
                    AwaitMember,
                    AwaitApi,
                    AddToPool,
                    Soak
                ],
            ),
            // Killed after setMachineType: start it.
            (
                &a_out,
                Some(vm("TERMINATED", "e2-standard-4", &old)),
                &bigger,
                steps![StartInstance, AwaitMember, AwaitApi, AddToPool, Soak],
            ),
            // Killed after the start, before rejoining the pool.
            (
                &a_out,
                Some(vm("RUNNING", "e2-standard-4", &old)),
                &bigger,
                steps![AwaitApi, AddToPool],
            ),
            // Anything else: rebuild on the data disk.
            (
                &three,
                Some(vm("RUNNING", "e2-standard-2", &old)),
                &newer,
                steps![
                    RemoveFromPool,
                    MoveLeadership,
                    DeleteInstance,
                    RebuildInstance,
                    AwaitMember,
                    AwaitApi,
                    AddToPool,
                    Soak
                ],
            ),
            // Killed between delete and create.
            (
                &a_out,
                None,
                &newer,
                steps![RebuildInstance, AwaitMember, AwaitApi, AddToPool, Soak],
            ),
            // A sole replica: no pool, no leadership to move; the static IP must serve again.
            (
                &sole,
                Some(vm("RUNNING", "e2-standard-2", &old)),
                &newer,
                steps![
                    DeleteInstance,
                    RebuildInstance,
                    AwaitMember,
                    AwaitEndpoint,
                    Soak
                ],
            ),
        ];
        for (w, v, want, steps) in cases {
            assert_eq!(
                roll_steps(w, "a", v.as_ref(), Some(20), want, &here()),
                Ok(steps.clone()),
                "{v:?} -> {want:?}"
            );
        }
    }

    /// Certificates in the renewal window, or a startup configuration edited by hand, rebuild the VM although its
    /// build is current (the rebuild issues new certificates from the same CAs and writes the provider's startup
    /// configuration); otherwise the same VM is left alone.
    #[test]
    fn due_certificates_or_an_edited_startup_rebuild_a_current_vm_and_nothing_else_does() {
        let b = build("e2-standard-2", "img-1");
        let w = world(&["a", "b", "c"], &[]);
        let current = vm("RUNNING", "e2-standard-2", &b);
        assert_eq!(
            roll_steps(&w, "a", Some(&current), Some(20), &b, &here()),
            Ok(vec![])
        );
        let due = VmFacts {
            certificates_due: true,
            ..current.clone()
        };
        let edited = VmFacts {
            startup_edited: true,
            ..current
        };
        for v in [due, edited] {
            let steps = roll_steps(&w, "a", Some(&v), Some(20), &b, &here()).unwrap();
            assert_eq!(
                steps[..4],
                [
                    Step::Replica(ReplicaStep::RemoveFromPool),
                    Step::Replica(ReplicaStep::MoveLeadership),
                    Step::Replica(ReplicaStep::DeleteInstance),
                    Step::Replica(ReplicaStep::RebuildInstance)
                ],
                "{v:?}: {steps:?}"
            );
        }
    }

    #[test]
    fn a_roll_waits_for_every_other_member_and_names_the_unhealthy_one() {
        let old = build("e2-standard-2", "img-1");
        let want = build("e2-standard-4", "img-1");
        let v = vm("RUNNING", "e2-standard-2", &old);
        let (summary, detail) = roll_steps(
            &world(&["a", "b", "c"], &["c"]),
            "a",
            Some(&v),
            Some(20),
            &want,
            &here(),
        )
        .unwrap_err();
        assert!(
            summary.contains("Replica a cannot be rolled now"),
            "{summary}"
        );
        assert!(detail.contains("c is unhealthy"), "{detail}");
        // Its own member being down is part of a resumed roll, not a reason to stop.
        let stopped = vm("TERMINATED", "e2-standard-2", &old);
        assert!(
            roll_steps(
                &world(&["a", "b", "c"], &["a"]),
                "a",
                Some(&stopped),
                Some(20),
                &want,
                &here()
            )
            .is_ok()
        );
        // Two members, this one stopped by a killed roll: the other answers without a leader. That is the quorum
        // this roll took away, not a reason to stop; a member that does not answer at all is.
        let mut two = world(&["a", "b"], &["a", "b"]);
        two.members.as_mut().unwrap()[1].answered = true;
        assert!(roll_steps(&two, "a", Some(&stopped), Some(20), &want, &here()).is_ok());
        two.members.as_mut().unwrap()[1].answered = false;
        assert!(
            roll_steps(&two, "a", Some(&stopped), Some(20), &want, &here())
                .unwrap_err()
                .1
                .contains("b is unhealthy")
        );
        // While this member is healthy, the other must be healthy too.
        let mut running = world(&["a", "b"], &["b"]);
        running.members.as_mut().unwrap()[1].answered = true;
        assert!(roll_steps(&running, "a", Some(&v), Some(20), &want, &here()).is_err());
        // A learner mid-join, a member without a VM, a VM without a member: all refused, each named.
        let mut w = world(&["a", "b", "c"], &[]);
        w.members.as_mut().unwrap()[1].is_learner = true;
        w.instances.remove("c");
        w.instances.insert("d".into());
        let (_, detail) = roll_steps(&w, "a", Some(&v), Some(20), &want, &here()).unwrap_err();
        for needle in ["b is a learner", "c has no VM", "d has no etcd member"] {
            assert!(detail.contains(needle), "{needle}: {detail}");
        }
        // Unknown membership is refused like every membership decision.
        let mut w = world(&["a", "b"], &[]);
        w.members = None;
        w.etcd_unreachable = Some("connection refused".into());
        assert!(
            roll_steps(&w, "a", Some(&v), Some(20), &want, &here())
                .unwrap_err()
                .0
                .contains("Cannot roll replica a")
        );
    }

    #[test]
    fn a_vm_without_a_data_disk_is_never_rebuilt() {
        let old = build("e2-standard-2", "img-1");
        let mut legacy = vm("RUNNING", "e2-standard-2", &old);
        legacy.has_data_disk = false;
        legacy.build = None;
        let w = world(&["a", "b", "c"], &[]);
        let (summary, detail) = roll_steps(
            &w,
            "a",
            Some(&legacy),
            Some(20),
            &build("e2-standard-2", "img-2"),
            &here(),
        )
        .unwrap_err();
        assert!(summary.contains("keeps etcd on its boot disk"), "{summary}");
        assert!(detail.contains("-replace"), "{detail}");
        // A machine type change keeps the boot disk, so it is fine without a data disk, once the VM records its
        // build (the roll labels it).
        legacy.build = Some(old.digest());
        assert!(
            roll_steps(
                &w,
                "a",
                Some(&legacy),
                Some(20),
                &build("e2-standard-4", "img-1"),
                &here()
            )
            .is_ok()
        );
    }

    #[test]
    fn digests_ignore_the_machine_type_and_are_stable() {
        let a = build("e2-standard-2", "img-1");
        assert_eq!(a.digest(), build("n2-standard-8", "img-1").digest());
        assert_ne!(a.digest(), build("e2-standard-2", "img-2").digest());
        // Stable across releases: a VM labelled by an older provider must not look changed.
        assert_eq!(a.digest(), "8f09aa2dd63783f9");
        assert_eq!(
            build("e2-standard-4", "img-2").changes_from(&a),
            vec!["image", "machine_type"]
        );
    }

    #[test]
    fn the_warning_says_how_and_what_the_user_sees() {
        let (s, d) = roll_warning("a", &["machine_type".into()], 3);
        assert!(s.contains("Replica a will be rolled: machine_type changes"));
        assert!(
            d.contains("machine type set") && d.contains("no downtime is expected"),
            "{d}"
        );
        let (_, d) = roll_warning("a", &["image".into()], 1);
        assert!(
            d.contains("same etcd data disk") && d.contains("API is down"),
            "{d}"
        );
    }

    #[test]
    fn a_data_disk_grows_while_its_vm_is_away_and_never_shrinks() {
        let old = build("e2-standard-2", "img-1");
        let mut bigger = old.clone();
        bigger.data_disk_gb = Some(30);
        let three = world(&["a", "b", "c"], &[]);
        let running = vm("RUNNING", "e2-standard-2", &old);
        let rebuild_grown = steps![
            RemoveFromPool,
            MoveLeadership,
            DeleteInstance,
            GrowDataDisk,
            RebuildInstance,
            AwaitMember,
            AwaitApi,
            AddToPool,
            Soak
        ];
        assert_eq!(
            roll_steps(&three, "a", Some(&running), Some(20), &bigger, &here()),
            Ok(rebuild_grown)
        );
        // Killed after the delete, or after the grow: the VM is gone, so it is rebuilt (growing if still needed).
        let mut a_away = three.clone();
        a_away.pool.as_mut().unwrap().remove("a");
        a_away.members.as_mut().unwrap()[0].healthy = false;
        assert_eq!(
            roll_steps(&a_away, "a", None, Some(20), &bigger, &here()),
            Ok(steps![
                GrowDataDisk,
                RebuildInstance,
                AwaitMember,
                AwaitApi,
                AddToPool,
                Soak
            ])
        );
        assert_eq!(
            roll_steps(&a_away, "a", None, Some(30), &bigger, &here()),
            Ok(steps![
                RebuildInstance,
                AwaitMember,
                AwaitApi,
                AddToPool,
                Soak
            ])
        );
        // A disk already as large (grown by hand, or larger than asked): nothing to do for it.
        assert_eq!(
            roll_steps(&three, "a", Some(&running), Some(30), &bigger, &here()),
            Ok(vec![])
        );
        assert_eq!(
            roll_steps(&three, "a", Some(&running), Some(50), &bigger, &here()),
            Ok(vec![])
        );
        // The plan shows it, and a state from before sizes were recorded sees no change.
        assert_eq!(bigger.changes_from(&old), vec![DATA_DISK_SIZE]);
        assert_eq!(
            bigger.digest(),
            old.digest(),
            "the VM's label does not change"
        );
        let legacy = Build::from_shown(
            &[
                ("machine_type".to_string(), "e2-standard-2".to_string()),
                ("image".into(), "img-1".into()),
            ]
            .into(),
        );
        assert_eq!(legacy.data_disk_gb, None);
        assert!(bigger.changes_from(&legacy).is_empty());
        assert_eq!(Build::from_shown(&bigger.shown()), bigger);
        // The warning says what happens to the disk; a smaller size is refused at plan.
        let (_, d) = roll_warning("a", &[DATA_DISK_SIZE.into()], 3);
        assert!(
            d.contains("data disk grows") && d.contains("never shrinks"),
            "{d}"
        );
        assert!(data_disk_shrink("c", 20, 30).is_none());
        assert!(data_disk_shrink("c", 20, 20).is_none());
        let (s, d) = data_disk_shrink("c", 30, 20).unwrap();
        assert!(s.contains("cannot shrink from 30 to 20"), "{s}");
        assert!(d.contains("data_disk_size_gb = 30"), "{d}");
    }

    /// A move to another subnetwork from any point: the VM is rebuilt there on its disk, the address moves after
    /// the VM is gone, and etcd hears the new peer URL once the VM runs on it.
    #[test]
    fn a_subnetwork_move_from_any_point_of_a_roll() {
        let b = build("e2-standard-2", "img-1");
        let new_ip = Ipv4Addr::new(10, 129, 0, 5);
        let three = world(&["a", "b", "c"], &[]);
        let mut a_out = three.clone();
        a_out.pool.as_mut().unwrap().remove("a");
        // Its VM gone: its member is down, which the rebuild needs no quorum for.
        let mut a_gone = world(&["a", "b", "c"], &["a"]);
        a_gone.instances.remove("a");
        a_gone.pool.as_mut().unwrap().remove("a");
        let sole = world(&["a"], &[]);
        let moving = |reserved: Option<(&str, Ipv4Addr)>| Placement {
            want_subnetwork: "masters-b".into(),
            reserved: reserved.map(|(s, ip)| (s.to_string(), ip)),
            peer_ip: Some(HERE),
        };
        let mut moved_vm = vm("RUNNING", "e2-standard-2", &b);
        moved_vm.subnetwork = "masters-b".into();
        moved_vm.internal_ip = Some(new_ip);
        let old_vm = Some(vm("RUNNING", "e2-standard-2", &b));
        let after = [
            Step::Replica(ReplicaStep::AwaitMember),
            Step::Replica(ReplicaStep::AwaitApi),
            Step::Replica(ReplicaStep::AddToPool),
            Step::Replica(ReplicaStep::Soak),
        ];
        // (what, world, vm, placement, steps)
        type Case<'a> = (&'a str, &'a Observed, Option<VmFacts>, Placement, Vec<Step>);
        let cases: Vec<Case> = vec![
            (
                "from the start",
                &three,
                old_vm.clone(),
                moving(Some(("default", HERE))),
                [
                    steps![RemoveFromPool, MoveLeadership, DeleteInstance],
                    steps![MoveInternalAddress, RebuildInstance, UpdatePeerUrl],
                    after.to_vec(),
                ]
                .concat(),
            ),
            (
                "killed after the delete",
                &a_gone,
                None,
                moving(Some(("default", HERE))),
                [
                    steps![MoveInternalAddress, RebuildInstance, UpdatePeerUrl],
                    after.to_vec(),
                ]
                .concat(),
            ),
            (
                "killed between releasing the address and reserving it",
                &a_gone,
                None,
                moving(None),
                [
                    steps![MoveInternalAddress, RebuildInstance, UpdatePeerUrl],
                    after.to_vec(),
                ]
                .concat(),
            ),
            (
                "killed before the rebuild, the address moved",
                &a_gone,
                None,
                moving(Some(("masters-b", new_ip))),
                [steps![RebuildInstance, UpdatePeerUrl], after.to_vec()].concat(),
            ),
            (
                "killed before etcd heard the new peer URL",
                &a_out,
                Some(moved_vm.clone()),
                moving(Some(("masters-b", new_ip))),
                [steps![UpdatePeerUrl], after.to_vec()].concat(),
            ),
            (
                "done",
                &three,
                Some(moved_vm.clone()),
                Placement {
                    peer_ip: Some(new_ip),
                    ..moving(Some(("masters-b", new_ip)))
                },
                vec![],
            ),
            (
                "a sole replica: etcd commits its new peer URL once it runs again",
                &sole,
                old_vm,
                moving(Some(("default", HERE))),
                steps![
                    DeleteInstance,
                    MoveInternalAddress,
                    RebuildInstance,
                    UpdatePeerUrl,
                    AwaitMember,
                    AwaitEndpoint,
                    Soak
                ],
            ),
        ];
        for (what, w, v, place, steps) in cases {
            assert_eq!(
                roll_steps(w, "a", v.as_ref(), Some(20), &b, &place),
                Ok(steps),
                "{what}"
            );
        }
        // Two voters: neither has a quorum without the other, so the move is refused before anything moves.
        let two = world(&["a", "b"], &[]);
        let (summary, detail) = roll_steps(
            &two,
            "a",
            Some(&vm("RUNNING", "e2-standard-2", &b)),
            Some(20),
            &b,
            &moving(Some(("default", HERE))),
        )
        .unwrap_err();
        assert!(summary.contains("with two replicas"), "{summary}");
        assert!(detail.contains("Add a third replica first"), "{detail}");
        assert_eq!(move_refusal(&three, "a"), None);
        assert_eq!(move_refusal(&sole, "a"), None);
        // The plan's warning says what happens to the member.
        let (summary, detail) = roll_warning("a", &["subnetwork".to_string()], 3);
        assert!(summary.contains("subnetwork changes"), "{summary}");
        for part in [
            "same etcd data disk",
            "member update",
            "same member",
            "nothing is streamed",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
    }

    #[test]
    fn a_move_to_another_network_is_refused_not_planned_as_a_replacement() {
        assert!(network_move("a", "default", "default").is_none());
        assert!(network_move("a", "global/networks/n", "n").is_none());
        let (s, d) = network_move("a", "default", "prod").unwrap();
        assert!(s.contains("Replica a cannot move"), "{s}");
        assert!(
            d.contains("on network default") && d.contains("to network prod"),
            "{d}"
        );
        assert!(d.contains("nothing is planned"), "{d}");
        assert!(
            d.contains("Another subnetwork of default can be set"),
            "{d}"
        );
    }

    #[test]
    fn a_subnetwork_is_named_by_its_last_segment_and_none_is_the_networks_own() {
        assert_eq!(subnetwork_name(None, "default"), "default");
        assert_eq!(subnetwork_name(Some(""), "global/networks/prod"), "prod");
        assert_eq!(
            subnetwork_name(
                Some(
                    "https://compute.googleapis.com/compute/v1/projects/p/regions/r/subnetworks/s2"
                ),
                "default"
            ),
            "s2"
        );
        assert_eq!(subnetwork_name(Some("s2"), "default"), "s2");
    }
}
