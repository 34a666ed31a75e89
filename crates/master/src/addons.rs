//! The RBAC a master installs for its own components through the addon manager (`paths::ADDONS`), by release.
//! Each grant covers an identity Kubernetes' bootstrap policy does not: cluster-autoscaler's user, the
//! cloud-controller-manager's user and the cloud node controller, the controller manager's leader-migration
//! lease, the API server's client towards kubelets (bound to the bootstrap role made for it), and admin credentials
//! in the cluster-admins group (bound to `cluster-admin`). The files live beside this one, one job each, with the upstream source they follow named at their top.

use super::{CloudProvider, KubernetesRelease};

const CLUSTER_AUTOSCALER: &str = include_str!("addons/cluster-autoscaler-rbac.yaml");
const CLOUD_CONTROLLER_MANAGER: &str = include_str!("addons/cloud-controller-manager-rbac.yaml");
const LEADER_MIGRATION: &str = include_str!("addons/leader-migration-rbac.yaml");
const KUBELET_API_ADMIN: &str = include_str!("addons/kubelet-api-admin-rbac.yaml");
const CLUSTER_ADMINS: &str = include_str!("addons/cluster-admins-rbac.yaml");

/// The group admin credentials are bound to cluster-admin through (`addons/cluster-admins-rbac.yaml`): a binding
/// that can be taken back, where `system:masters` cannot.
pub const CLUSTER_ADMINS_GROUP: &str = "ha-master:cluster-admins";

/// (file name under `paths::ADDONS`, content) for a master of `release`.
///
/// The addon manager prunes what its directory no longer holds, and during a roll between releases whichever
/// master leads it decides. So a grant that either side of a roll needs is installed on both: the
/// cloud-controller-manager's on the release before the one that starts it (leader migration), and the
/// leader-migration lease on both releases of that hand-over.
pub(super) fn rbac(release: &KubernetesRelease) -> Vec<(&'static str, &'static str)> {
    let external = matches!(release.cloud, CloudProvider::External { .. });
    let mut out = vec![
        ("cluster-autoscaler-rbac.yaml", CLUSTER_AUTOSCALER),
        ("kubelet-api-admin-rbac.yaml", KUBELET_API_ADMIN),
        ("cluster-admins-rbac.yaml", CLUSTER_ADMINS),
    ];
    if external || release.leader_migration {
        out.push((
            "cloud-controller-manager-rbac.yaml",
            CLOUD_CONTROLLER_MANAGER,
        ));
    }
    if release.leader_migration {
        out.push(("leader-migration-rbac.yaml", LEADER_MIGRATION));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binding names the group the constant names: a credential issued into `CLUSTER_ADMINS_GROUP` is one the
    /// masters bind.
    #[test]
    fn the_cluster_admins_binding_names_the_group_credentials_are_issued_into() {
        let doc: serde_norway::Value = serde_norway::from_str(CLUSTER_ADMINS).unwrap();
        assert_eq!(doc["roleRef"]["name"].as_str(), Some("cluster-admin"));
        let subjects = doc["subjects"].as_sequence().unwrap();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0]["kind"].as_str(), Some("Group"));
        assert_eq!(subjects[0]["name"].as_str(), Some(CLUSTER_ADMINS_GROUP));
        assert_eq!(
            doc["metadata"]["labels"]["addonmanager.kubernetes.io/mode"].as_str(),
            Some("EnsureExists"),
            "Reconcile would write a revocation back"
        );
    }
}
