//! The handle resources hold for one project's Compute and Secret Manager APIs when no cluster context exists yet
//! (creating, deleting or importing a cluster). Resources pass it to `ops` functions; its clients are visible only
//! inside `ops`, so the compiler keeps resources from calling the backends through it.

use super::error::Result;
use ha_gce::Compute;
use ha_settings::Settings;

pub struct Cloud {
    pub(crate) compute: Compute,
    pub(crate) settings: Settings,
    pub(crate) project: String,
}

impl Cloud {
    pub async fn connect(settings: &Settings, project: &str) -> Result<Cloud> {
        Ok(Cloud {
            compute: Compute::new(settings)
                .await?
                .for_project(project.to_string()),
            settings: settings.clone(),
            project: project.to_string(),
        })
    }

    /// The project's Secret Manager, where a dead join may have left a replica's keys (`cluster::delete` removes
    /// them). Made on demand: every replica's plan connects a `Cloud` to check its zone, and building a second
    /// Google client there cost ~20 ms of CPU per replica (`make bench`, 2026-11-27).
    pub(crate) async fn secrets(&self) -> Result<ha_secrets::Secrets> {
        Ok(ha_secrets::Secrets::connect(&self.settings, &self.project).await?)
    }
}
