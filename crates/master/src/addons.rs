//! The RBAC a master installs for its own components through the addon manager (`paths::ADDONS`), by release.
//! Each grant covers an identity Kubernetes' bootstrap policy does not: cluster-autoscaler's user, the
//! cloud-controller-manager's user and the cloud node controller, the controller manager's leader-migration
//! lease, and the API server's client towards kubelets (bound to the bootstrap role made for it). The files live beside this one, one job each, with the upstream source they follow named at their top.

use super::{CloudProvider, KubernetesRelease};

const CLUSTER_AUTOSCALER: &str = include_str!("addons/cluster-autoscaler-rbac.yaml");
const CLOUD_CONTROLLER_MANAGER: &str = include_str!("addons/cloud-controller-manager-rbac.yaml");
const LEADER_MIGRATION: &str = include_str!("addons/leader-migration-rbac.yaml");
const KUBELET_API_ADMIN: &str = include_str!("addons/kubelet-api-admin-rbac.yaml");

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
