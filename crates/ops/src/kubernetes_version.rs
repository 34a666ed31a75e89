//! Reads the Kubernetes release each replica's master was built with, for the plan of a `kubernetes_version`
//! change: the kube-apiserver image in the startup configuration on the VM (what the master runs, whatever the
//! state says, so a roll that stopped half way shows as the mixed control plane it is). `domain::kubernetes_version`
//! judges it.

use super::context::ClusterCtx;
use super::error::Result;
use super::refresh::observe_shared;
use ha_domain::kubernetes_version::{ReplicaVersion, version_of_image};

pub async fn read(ctx: &ClusterCtx) -> Result<Vec<ReplicaVersion>> {
    let snap = observe_shared(ctx).await?;
    Ok(snap
        .instances
        .values()
        .map(|vm| ReplicaVersion {
            replica: vm.name.clone(),
            version: super::adopt::files_of(vm)
                .ok()
                .and_then(|files| files.apiserver_image())
                .and_then(|image| version_of_image(&image)),
        })
        .collect())
}
