//! Each step as a user reads it in a progress line or an error: what the change was doing when it logged, waited
//! or stopped ("creating its VM again", "putting walk-b into the load balancer"). A step about the replica is said
//! of "it" (the line names the replica first); a cluster step names what it acts on.

use super::step::{ClusterStep, ReplicaStep, Step};

/// What `step` does, in a few words.
pub fn doing(step: &Step) -> String {
    match step {
        Step::Replica(s) => replica(s).into(),
        Step::Cluster(s) => cluster(s),
    }
}

fn replica(s: &ReplicaStep) -> &'static str {
    use ReplicaStep::*;
    match s {
        AddLearner => "adding its etcd member as a learner",
        AwaitCaughtUpAndPromote => "waiting for its learner to catch up, then promoting it",
        MoveLeadership => "handing etcd leadership to another member",
        RemoveMember { .. } => "removing its etcd member",
        AwaitMember => "waiting for its etcd member to be healthy and caught up",
        Soak => "watching it stay healthy before the next replica",
        CreateFoundingInstance { .. } => "creating the first master, which founds etcd",
        CreateJoiningInstance => "creating its VM",
        RebuildInstance => "creating its VM again on its etcd data disk",
        RecoverAsSoleMember => "creating its VM again as etcd's only member (recovery)",
        RestoreFromSnapshot { .. } => "creating its VM to restore etcd from a snapshot",
        GrowDataDisk => "growing its etcd data disk",
        StopInstance => "stopping its VM",
        SetMachineType => "setting its machine type",
        StartInstance => "starting its VM",
        AwaitRestarted => "waiting for its restarted VM and etcd member",
        WriteMetadata { .. } => "writing its startup configuration back",
        DeleteInstance => "deleting its VM",
        DeleteDataDisk => "deleting its etcd data disk",
        ReleaseInternalAddress => "releasing its internal IP",
        DeleteKeys => "deleting its keys secret",
        MoveInternalAddress => "moving its internal IP to the cluster's subnetwork",
        UpdatePeerUrl => "telling etcd its member's new peer address",
        AwaitApi => "waiting for its API server to answer",
        AwaitAdminBinding => "waiting for the API server to serve the admin binding",
        AddToPool => "putting it into the load balancer",
        RemoveFromPool => "taking it out of the load balancer",
        LabelVm => "labelling its VM",
    }
}

fn cluster(s: &ClusterStep) -> String {
    use ClusterStep::*;
    match s {
        TakeBackup { .. } => "taking a snapshot of etcd to the backup bucket".into(),
        RemoveStaleMember { name, .. } => {
            format!("removing the learner {name} an interrupted join left")
        }
        AttachEphemeralIp { to } => format!("giving {to} an ephemeral external IP"),
        CreateHealthCheck => "creating the load balancer's health check".into(),
        CreatePool { .. } => "creating the load balancer's target pool".into(),
        AddPoolMember { name } => format!("putting {name} back into the load balancer"),
        RemovePoolMember { name } => format!("taking {name} out of the load balancer"),
        CreateForwardingRule => "creating the load balancer's forwarding rule".into(),
        DeleteForwardingRule => "deleting the load balancer's forwarding rule".into(),
        DeletePool => "deleting the load balancer's target pool".into(),
        DeleteHealthCheck => "deleting the load balancer's health check".into(),
        DetachStaticIp { from } => format!("moving the static IP off {from}"),
        AttachStaticIp { to } => format!("giving the static IP to {to}"),
        AwaitEndpoint => "waiting for the static IP to serve the API".into(),
        ReserveAddressOf { replica } => format!("reserving {replica}'s internal IP"),
        ReleaseAddressOf { replica } => {
            format!("releasing the internal IP an interrupted join of {replica} reserved")
        }
        DeleteSecret { id } => format!("deleting secret {id}, which an interrupted join left"),
    }
}

/// A change's steps as one progress line: `what` ("roll of replica walk-b") and each step numbered, so the lines
/// and the error that follow can say "step 4 of 9".
pub fn plan_line(what: &str, steps: &[Step]) -> String {
    if steps.is_empty() {
        return format!("{what}: nothing to do");
    }
    let listed: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {}", i + 1, doing(s)))
        .collect();
    format!("{what}: {} steps: {}", steps.len(), listed.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_says_what_it_does_and_a_change_numbers_them() {
        let steps: Vec<Step> = vec![
            ClusterStep::TakeBackup {
                change: "roll".into(),
            }
            .into(),
            ReplicaStep::RemoveFromPool.into(),
            ReplicaStep::DeleteInstance.into(),
            ReplicaStep::RebuildInstance.into(),
            ClusterStep::AddPoolMember {
                name: "walk-b".into(),
            }
            .into(),
        ];
        assert_eq!(
            plan_line("roll of replica walk-a", &steps),
            "roll of replica walk-a: 5 steps: 1. taking a snapshot of etcd to the backup bucket; 2. taking it out \
             of the load balancer; 3. deleting its VM; 4. creating its VM again on its etcd data disk; 5. putting \
             walk-b back into the load balancer"
        );
        assert_eq!(
            plan_line("roll of replica walk-a", &[]),
            "roll of replica walk-a: nothing to do"
        );
    }
}
