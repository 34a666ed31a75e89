//! A plan that replaces the cluster itself (a changed `name`, `project`, `region`, `zone` or `network`): the
//! replacement's destroy half is judged as a destroy would be, before anything is touched. Refused while the
//! cluster has replicas, and under deletion protection (`domain::protection::check_cluster_replacement`); the
//! replicas are looked up in Compute Engine (`ha_ops::cluster::replicas`), and a plan that cannot look is refused
//! too, since the apply would destroy whatever is there.

use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};

use super::cluster_model::ClusterModel;
use crate::config::Settings;
use ha_domain::protection::check_cluster_replacement;
use ha_ops::cloud::Cloud;
use ha_ops::plan_check::PATIENCE;

/// The attributes whose change replaces the cluster, in the order a refusal names them.
const REPLACING: [&str; 5] = ["name", "project", "region", "zone", "network"];

pub async fn check(
    settings: &Settings,
    prior: &ClusterModel,
    requires_replace: &[AttributePath],
    diags: &mut Diagnostics,
) {
    let changed: Vec<&str> = REPLACING
        .into_iter()
        .filter(|a| requires_replace.contains(&AttributePath::attr(*a)))
        .collect();
    let (Some(name), Some(project), Some(region)) = (
        prior.name.known(),
        prior.project.known(),
        prior.region.known(),
    ) else {
        return;
    };
    if changed.is_empty() {
        return;
    }
    let until = tokio::time::Instant::now() + PATIENCE;
    let replicas = match Cloud::connect(settings, project).await {
        Ok(cloud) => ha_ops::cluster::replicas(&cloud, region, name, until).await,
        Err(e) => Err(e),
    };
    let replicas = match replicas {
        Ok(replicas) => replicas,
        Err(e) => {
            diags.push(
                Diagnostic::error(
                    format!("Could not check whether cluster {name} has replicas before replacing it"),
                    format!(
                        "{e}. A replacement destroys every replica the cluster has, so nothing was planned: \
                         plan again once Compute Engine answers."
                    ),
                )
                .at(AttributePath::attr(changed[0])),
            );
            return;
        }
    };
    let protected = prior.deletion_protection.known() != Some(&false);
    if let Some((at, (summary, detail))) =
        check_cluster_replacement(name, &changed, &replicas, protected)
    {
        diags.push(Diagnostic::error(summary, detail).at(AttributePath::attr(at)));
    }
}
