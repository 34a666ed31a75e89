//! The handle resources hold for one project's Compute and Secret Manager APIs when no cluster context exists yet
//! (creating, deleting or importing a cluster). Resources pass it to `ops` functions; its clients are visible only
//! inside `ops`, so the compiler keeps resources from calling the backends through it.

use super::error::Result;
use ha_gce::Compute;
use ha_settings::Settings;

pub struct Cloud {
    pub(crate) compute: Compute,
    /// Where a dead join may have left a replica's keys (`cluster::delete` removes them).
    pub(crate) secrets: ha_secrets::Secrets,
}

impl Cloud {
    pub async fn connect(settings: &Settings, project: &str) -> Result<Cloud> {
        Ok(Cloud {
            compute: Compute::new(settings)
                .await?
                .for_project(project.to_string()),
            secrets: ha_secrets::Secrets::connect(settings, project).await?,
        })
    }
}
