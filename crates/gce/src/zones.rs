//! Zones and regions: whether a zone exists and is UP, which zones a region has (replica placement), whether a
//! zone offers a machine type, and whether a boot image exists.

use super::Compute;
use super::error::{Error, Result, last_segment};
use super::types::{RegionInfo, ZoneInfo};
use google_cloud_gax::options::RequestOptionsBuilder;
use tokio::time::Instant;

impl Compute {
    pub async fn get_zone(&self, zone: &str, deadline: Instant) -> Result<ZoneInfo> {
        let project = self.project()?;
        let resource = format!("zone {}", self.rel(&format!("zones/{zone}")));
        let z = self
            .attempt(&resource, "get", deadline, || {
                self.clients
                    .zones
                    .get()
                    .set_project(project)
                    .set_zone(zone)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(ZoneInfo {
            name: z.name.unwrap_or_default(),
            region: z
                .region
                .as_deref()
                .map(last_segment)
                .unwrap_or_default()
                .to_string(),
            status: z
                .status
                .as_ref()
                .and_then(|s| s.name())
                .unwrap_or_default()
                .to_string(),
        })
    }

    pub async fn get_region(&self, region: &str, deadline: Instant) -> Result<RegionInfo> {
        let project = self.project()?;
        let resource = format!("region {}", self.rel(&format!("regions/{region}")));
        let r = self
            .attempt(&resource, "get", deadline, || {
                self.clients
                    .regions
                    .get()
                    .set_project(project)
                    .set_region(region)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await
            .map_err(|e| match e {
                // GCE answers an unknown region with 400 invalid rather than 404.
                Error::Api { status: 400, .. } => Error::NotFound {
                    resource: resource.clone(),
                },
                e => e,
            })?;
        let mut zones: Vec<String> = r
            .zones
            .iter()
            .map(|z| last_segment(z).to_string())
            .collect();
        zones.sort();
        Ok(RegionInfo {
            name: r.name.unwrap_or_default(),
            zones,
            status: r
                .status
                .as_ref()
                .and_then(|s| s.name())
                .unwrap_or_default()
                .to_string(),
        })
    }

    /// Whether `zone` offers the predefined machine type `name`: `machineTypes.get`, false on 404.
    pub async fn machine_type_offered(
        &self,
        zone: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<bool> {
        let project = self.project()?;
        let resource = format!(
            "machine type {}",
            self.rel(&format!("zones/{zone}/machineTypes/{name}"))
        );
        let got = self
            .attempt(&resource, "get", deadline, || {
                self.clients
                    .machine_types
                    .get()
                    .set_project(project)
                    .set_zone(zone)
                    .set_machine_type(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await;
        match got {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Compute {
    /// Whether `project` has the image `name` (`images.get`), false on 404.
    pub async fn image_exists(&self, project: &str, name: &str, deadline: Instant) -> Result<bool> {
        let resource = format!("image projects/{project}/global/images/{name}");
        let got = self
            .attempt(&resource, "get", deadline, || {
                self.clients
                    .images
                    .get()
                    .set_project(project)
                    .set_image(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await;
        found(got.map(|_| ()))
    }

    /// Whether `project` publishes an image in `family` (`images.getFromFamily`), false on 404.
    pub async fn image_family_exists(
        &self,
        project: &str,
        family: &str,
        deadline: Instant,
    ) -> Result<bool> {
        let resource = format!("image family projects/{project}/global/images/family/{family}");
        let got = self
            .attempt(&resource, "getFromFamily", deadline, || {
                self.clients
                    .images
                    .get_from_family()
                    .set_project(project)
                    .set_family(family)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await;
        found(got.map(|_| ()))
    }
}

fn found(got: Result<()>) -> Result<bool> {
    match got {
        Ok(()) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}
