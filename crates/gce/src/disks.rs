//! Zonal persistent disks: a replica's etcd data disk (`<replica>-pd`) outlives its VM, so the VM can be deleted
//! and created again on the same data. Get, grow and delete; a disk is made by (and attached at) instance insert.

use super::Compute;
use super::error::{Result, last_segment};
use super::types::DiskInfo;
use google_cloud_compute_v1::model::{Disk, DisksResizeRequest};
use google_cloud_gax::options::RequestOptionsBuilder;
use tokio::time::Instant;

fn info(d: &Disk) -> DiskInfo {
    DiskInfo {
        name: d.name.clone().unwrap_or_default(),
        size_gb: d.size_gb.unwrap_or_default(),
        disk_type: d
            .r#type
            .as_deref()
            .map(last_segment)
            .unwrap_or_default()
            .to_string(),
        users: d
            .users
            .iter()
            .map(|u| last_segment(u).to_string())
            .collect(),
        labels: d
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

impl Compute {
    fn disk_rel(&self, zone: &str, name: &str) -> String {
        format!("disk {}", self.rel(&format!("zones/{zone}/disks/{name}")))
    }

    /// The disk, or `None` if it does not exist.
    pub async fn get_disk(
        &self,
        zone: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<DiskInfo>> {
        let project = self.project()?;
        let resource = self.disk_rel(zone, name);
        let got = self
            .read_opt(&resource, deadline, || {
                self.clients
                    .disks
                    .get()
                    .set_project(project)
                    .set_zone(zone)
                    .set_disk(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got.as_ref().map(info))
    }

    /// Deletes the disk; an absent one is success. GCE refuses while a VM still has it attached.
    pub async fn delete_disk(&self, zone: &str, name: &str, deadline: Instant) -> Result<()> {
        let project = self.project()?;
        let resource = self.disk_rel(zone, name);
        self.delete_idempotent(&resource, deadline, |rid| {
            self.clients
                .disks
                .delete()
                .set_project(project)
                .set_zone(zone)
                .set_disk(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await
    }

    /// Grows the disk to `size_gb`, attached or not (GCE only grows disks; the guest grows its filesystem). A
    /// disk already that large is left alone, so a resumed roll does not fail on GCE's "must be larger".
    pub async fn grow_disk(
        &self,
        zone: &str,
        name: &str,
        size_gb: i64,
        deadline: Instant,
    ) -> Result<()> {
        let project = self.project()?;
        let resource = self.disk_rel(zone, name);
        if let Some(d) = self.get_disk(zone, name, deadline).await?
            && d.size_gb >= size_gb
        {
            return Ok(());
        }
        self.mutate(&resource, "resize", deadline, |rid| {
            self.clients
                .disks
                .resize()
                .set_project(project)
                .set_zone(zone)
                .set_disk(name)
                .set_body(DisksResizeRequest::new().set_size_gb(size_gb))
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await?;
        Ok(())
    }
}
