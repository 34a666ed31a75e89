//! A cluster plan that changes what its masters are built from says how many masters will roll, and that replicas
//! in other states (split states, Terragrunt units) show their roll only after this apply: their plans read the
//! `spec` this apply writes (`domain::roll::cluster_roll_notice`). The masters are the cluster's replica VMs as
//! Compute Engine lists them (`ha_ops::cluster::replicas`), so replicas in every state are counted.

use tfplugin::diag::{Diagnostic, Diagnostics};

use super::cluster_model::ClusterModel;
use crate::config::Settings;
use ha_domain::roll::cluster_roll_notice;
use ha_ops::cloud::Cloud;
use ha_ops::plan_check::PATIENCE;

pub async fn say(
    settings: &Settings,
    prior: &ClusterModel,
    p: &ClusterModel,
    diags: &mut Diagnostics,
) {
    let (Some(old), Some(new)) = (
        prior.spec.known().and_then(|s| s.build()),
        p.spec.known().and_then(|s| s.build()),
    ) else {
        return;
    };
    let (Some(name), Some(project), Some(region)) =
        (p.name.known(), p.project.known(), p.region.known())
    else {
        return;
    };
    if new.changes_from(&old).is_empty() {
        return;
    }
    let until = tokio::time::Instant::now() + PATIENCE;
    let masters = match Cloud::connect(settings, project).await {
        Ok(cloud) => ha_ops::cluster::replicas(&cloud, region, name, until).await,
        Err(e) => Err(e),
    };
    let masters = masters.map_err(|e| e.to_string());
    let listed = masters.as_deref().map_err(String::as_str);
    if let Some((summary, detail)) = cluster_roll_notice(name, &old, &new, listed) {
        diags.push(Diagnostic::warning(summary, detail));
    }
}
