//! The handle resources hold for one project's Compute API when no cluster context exists yet (creating,
//! deleting or importing a cluster). Resources pass it to `ops` functions; its client is visible only inside
//! `ops`, so the compiler keeps resources from calling the backend through it.

use super::error::Result;
use ha_gce::Compute;
use ha_settings::Settings;

pub struct Cloud {
    pub(crate) compute: Compute,
}

impl Cloud {
    pub async fn connect(settings: &Settings, project: &str) -> Result<Cloud> {
        Ok(Cloud {
            compute: Compute::new(settings)
                .await?
                .for_project(project.to_string()),
        })
    }
}
