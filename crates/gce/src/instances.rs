//! Instances: insert (idempotent), get, list by labels, start, stop, setMachineType, delete. Access configs, labels and metadata are in
//! `instance_ops.rs`.

use super::Compute;
use super::error::{Error, Result, last_segment};
use super::types::{DataDisk, ExternalIp, Fingerprint, InstanceInfo, InstanceSpec};
use google_cloud_compute_v1::model::{
    AccessConfig, AttachedDisk, AttachedDiskInitializeParams, Instance, Metadata, NetworkInterface,
    ServiceAccount, Tags, metadata::Items,
};
use google_cloud_gax::options::RequestOptionsBuilder;
use std::collections::BTreeMap;
use tokio::time::Instant;

/// GCE's recommended (and default) access config name.
pub(crate) const NAT_NAME: &str = "External NAT";

pub(crate) fn info(i: &Instance) -> InstanceInfo {
    let nic = i.network_interfaces.first();
    let ac = nic.and_then(|n| n.access_configs.first());
    let metadata = i.metadata.as_ref();
    InstanceInfo {
        name: i.name.clone().unwrap_or_default(),
        zone: i
            .zone
            .as_deref()
            .map(last_segment)
            .unwrap_or_default()
            .to_string(),
        id: i.id.unwrap_or_default(),
        self_link: i.self_link.clone().unwrap_or_default(),
        status: i
            .status
            .as_ref()
            .and_then(|s| s.name())
            .unwrap_or_default()
            .to_string(),
        machine_type: i
            .machine_type
            .as_deref()
            .map(last_segment)
            .unwrap_or_default()
            .to_string(),
        internal_ip: nic.and_then(|n| n.network_ip.clone()),
        external_ip: ac
            .and_then(|a| a.nat_ip.clone())
            .filter(|ip| !ip.is_empty()),
        access_config_name: ac.and_then(|a| a.name.clone()),
        nic_name: nic
            .and_then(|n| n.name.clone())
            .unwrap_or_else(|| "nic0".into()),
        network: nic.and_then(|n| n.network.clone()).unwrap_or_default(),
        subnetwork: nic.and_then(|n| n.subnetwork.clone()),
        tags: i.tags.as_ref().map(|t| t.items.clone()).unwrap_or_default(),
        labels: i
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        label_fingerprint: Fingerprint(i.label_fingerprint.clone().unwrap_or_default().to_vec()),
        metadata: metadata
            .map(|m| {
                m.items
                    .iter()
                    .map(|it| {
                        (
                            it.key.clone().unwrap_or_default(),
                            it.value.clone().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        metadata_fingerprint: Fingerprint(
            metadata
                .and_then(|m| m.fingerprint.clone())
                .unwrap_or_default()
                .to_vec(),
        ),
        attached_disks: i
            .disks
            .iter()
            .filter(|d| d.boot != Some(true))
            .filter_map(|d| {
                Some((
                    d.device_name.clone()?,
                    last_segment(d.source.as_deref()?).to_string(),
                ))
            })
            .collect(),
    }
}

pub(crate) fn items(kv: &[(String, String)]) -> Vec<Items> {
    kv.iter()
        .map(|(k, v)| {
            let mut it = Items::new();
            it.key = Some(k.clone());
            it.value = Some(v.clone());
            it
        })
        .collect()
}

pub(crate) fn access_config(nat_ip: Option<&str>) -> AccessConfig {
    let mut ac = AccessConfig::new();
    ac.name = Some(NAT_NAME.into());
    ac.r#type = Some("ONE_TO_ONE_NAT".into());
    ac.nat_ip = nat_ip.map(str::to_string);
    ac
}

/// Why an existing instance of that name is not the one asked for (what a replica depends on: its machine type
/// and its reserved internal IP); `None` if it is.
fn mismatch(spec: &InstanceSpec, have: &InstanceInfo) -> Option<String> {
    let mut diffs = Vec::new();
    if last_segment(&spec.machine_type) != have.machine_type {
        diffs.push(format!(
            "machine type {} (want {})",
            have.machine_type,
            last_segment(&spec.machine_type)
        ));
    }
    if let Some(ip) = &spec.network_ip
        && have.internal_ip.as_deref() != Some(ip.as_str())
    {
        diffs.push(format!("internal IP {:?} (want {ip})", have.internal_ip));
    }
    (!diffs.is_empty()).then(|| diffs.join(", "))
}

/// A filter expression matching every label (`labels.k = "v" AND ...`).
fn label_filter(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("(labels.{k} = \"{v}\")"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

impl Compute {
    pub(crate) fn instance_rel(&self, zone: &str, name: &str) -> String {
        format!(
            "instance {}",
            self.rel(&format!("zones/{zone}/instances/{name}"))
        )
    }

    fn instance_body(&self, spec: &InstanceSpec) -> Instance {
        let region = spec
            .zone
            .rsplit_once('-')
            .map_or(spec.zone.as_str(), |(r, _)| r);
        let mut i = Instance::new();
        i.name = Some(spec.name.clone());
        i.machine_type = Some(if spec.machine_type.contains('/') {
            spec.machine_type.clone()
        } else {
            format!("zones/{}/machineTypes/{}", spec.zone, spec.machine_type)
        });
        let mut params = AttachedDiskInitializeParams::new();
        params.source_image = Some(spec.image.clone());
        params.disk_size_gb = Some(spec.disk_size_gb);
        params.disk_type = spec.disk_type.as_ref().map(|t| {
            if t.contains('/') {
                t.clone()
            } else {
                format!("zones/{}/diskTypes/{t}", spec.zone)
            }
        });
        let mut disk = AttachedDisk::new();
        disk.boot = Some(true);
        disk.auto_delete = Some(true);
        disk.initialize_params = Some(params);
        i.disks = vec![disk];
        if let Some(data) = &spec.data_disk {
            let mut d = AttachedDisk::new();
            d.mode = Some("READ_WRITE".into());
            d.auto_delete = Some(false);
            match data {
                DataDisk::Create {
                    name,
                    size_gb,
                    disk_type,
                    device_name,
                    labels,
                } => {
                    let mut p = AttachedDiskInitializeParams::new();
                    p.labels = labels.clone().into_iter().collect();
                    p.disk_name = Some(name.clone());
                    p.disk_size_gb = Some(*size_gb);
                    p.disk_type = Some(format!("zones/{}/diskTypes/{disk_type}", spec.zone));
                    d.initialize_params = Some(p);
                    d.device_name = Some(device_name.clone());
                }
                DataDisk::Attach { name, device_name } => {
                    d.source = Some(format!("zones/{}/disks/{name}", spec.zone));
                    d.device_name = Some(device_name.clone());
                }
            }
            i.disks.push(d);
        }
        let mut nic = NetworkInterface::new();
        nic.network = Some(self.global_ref("networks", &spec.network));
        nic.subnetwork = spec
            .subnetwork
            .as_ref()
            .map(|s| self.regional_ref(region, "subnetworks", s));
        nic.network_ip = spec.network_ip.clone();
        nic.access_configs = match &spec.external_ip {
            ExternalIp::None => vec![],
            ExternalIp::Ephemeral => vec![access_config(None)],
            ExternalIp::Static(ip) => vec![access_config(Some(ip))],
        };
        i.network_interfaces = vec![nic];
        let mut tags = Tags::new();
        tags.items = spec.tags.clone();
        i.tags = Some(tags);
        i.labels = spec
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut md = Metadata::new();
        md.items = items(&spec.metadata);
        i.metadata = Some(md);
        if let Some(sa) = &spec.service_account {
            let mut s = ServiceAccount::new();
            s.email = Some(sa.email.clone());
            s.scopes = sa.scopes.clone();
            i.service_accounts = vec![s];
        }
        i
    }

    /// Creates the instance and waits for the insert operation; an existing instance of that name is accepted
    /// if its machine type and internal IP match. Returns the instance as GCE then shows it.
    pub async fn insert_instance(
        &self,
        spec: &InstanceSpec,
        deadline: Instant,
    ) -> Result<InstanceInfo> {
        let project = self.project()?;
        let resource = self.instance_rel(&spec.zone, &spec.name);
        let body = self.instance_body(spec);
        match self
            .mutate(&resource, "insert", deadline, |rid| {
                self.clients
                    .instances
                    .insert()
                    .set_project(project)
                    .set_zone(&spec.zone)
                    .set_body(body.clone())
                    .set_request_id(rid)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await
        {
            Ok(_) | Err(Error::Api { status: 409, .. }) => {}
            Err(e) => return Err(e),
        }
        // A stock-out can surface as an instance that vanishes after its operation: report it as not found.
        let have = self
            .get_instance(&spec.zone, &spec.name, deadline)
            .await?
            .ok_or_else(|| Error::NotFound {
                resource: resource.clone(),
            })?;
        match mismatch(spec, &have) {
            None => Ok(have),
            Some(detail) => Err(Error::Conflict { resource, detail }),
        }
    }

    pub async fn get_instance(
        &self,
        zone: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<InstanceInfo>> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        let got = self
            .read_opt(&resource, deadline, || {
                self.clients
                    .instances
                    .get()
                    .set_project(project)
                    .set_zone(zone)
                    .set_instance(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got.as_ref().map(info))
    }

    /// Instances of `zone` carrying every label in `labels` (all instances if empty), all pages. The filter is
    /// sent to GCE and also applied here, so a server that ignores it cannot widen the result.
    pub async fn list_instances(
        &self,
        zone: &str,
        labels: &BTreeMap<String, String>,
        deadline: Instant,
    ) -> Result<Vec<InstanceInfo>> {
        let project = self.project()?;
        let resource = format!("instances in {}", self.rel(&format!("zones/{zone}")));
        let filter = label_filter(labels);
        let mut out = Vec::new();
        let mut page = String::new();
        loop {
            let list = self
                .attempt(&resource, "list", deadline, || {
                    let mut b = self
                        .clients
                        .instances
                        .list()
                        .set_project(project)
                        .set_zone(zone);
                    if !filter.is_empty() {
                        b = b.set_filter(&filter);
                    }
                    if !page.is_empty() {
                        b = b.set_page_token(&page);
                    }
                    b.with_user_agent(self.user_agent()).send()
                })
                .await?;
            out.extend(
                list.items
                    .iter()
                    .filter(|i| labels.iter().all(|(k, v)| i.labels.get(k) == Some(v)))
                    .map(info),
            );
            match list.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => page = t,
                None => return Ok(out),
            }
        }
    }

    /// Instances carrying every label in `labels`, in every zone of `region` (one aggregatedList per page), sorted
    /// by zone and name: a cluster's replicas may be spread over the region's zones.
    pub async fn list_instances_in_region(
        &self,
        region: &str,
        labels: &BTreeMap<String, String>,
        deadline: Instant,
    ) -> Result<Vec<InstanceInfo>> {
        let project = self.project()?;
        let resource = format!("instances in {}", self.rel(&format!("regions/{region}")));
        let filter = label_filter(labels);
        let prefix = format!("zones/{region}-");
        let mut out = Vec::new();
        let mut page = String::new();
        loop {
            let list = self
                .attempt(&resource, "aggregatedList", deadline, || {
                    let mut b = self
                        .clients
                        .instances
                        .aggregated_list()
                        .set_project(project);
                    if !filter.is_empty() {
                        b = b.set_filter(&filter);
                    }
                    if !page.is_empty() {
                        b = b.set_page_token(&page);
                    }
                    b.with_user_agent(self.user_agent()).send()
                })
                .await?;
            for (scope, scoped) in &list.items {
                if !scope.starts_with(&prefix) {
                    continue;
                }
                out.extend(
                    scoped
                        .instances
                        .iter()
                        .filter(|i| labels.iter().all(|(k, v)| i.labels.get(k) == Some(v)))
                        .map(info),
                );
            }
            match list.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => page = t,
                None => break,
            }
        }
        out.sort_by(|a, b| (&a.zone, &a.name).cmp(&(&b.zone, &b.name)));
        Ok(out)
    }

    /// Starts a stopped (TERMINATED) instance and waits for the operation; a running one is left as it is (GCE
    /// accepts the call and does nothing). Returns the instance as GCE then shows it.
    pub async fn start_instance(
        &self,
        zone: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<InstanceInfo> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        self.mutate(&resource, "start", deadline, |rid| {
            self.clients
                .instances
                .start()
                .set_project(project)
                .set_zone(zone)
                .set_instance(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await?;
        self.get_instance(zone, name, deadline)
            .await?
            .ok_or(Error::NotFound { resource })
    }

    /// Stops the instance and waits until it is TERMINATED (GCE's "stopped"); a stopped one stays as it is. The
    /// boot disk and attached disks stay.
    pub async fn stop_instance(&self, zone: &str, name: &str, deadline: Instant) -> Result<()> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        self.mutate(&resource, "stop", deadline, |rid| {
            self.clients
                .instances
                .stop()
                .set_project(project)
                .set_zone(zone)
                .set_instance(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await?;
        Ok(())
    }

    /// Sets a stopped instance's machine type (GCE refuses it on a running one).
    pub async fn set_machine_type(
        &self,
        zone: &str,
        name: &str,
        machine_type: &str,
        deadline: Instant,
    ) -> Result<()> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        let mut body = google_cloud_compute_v1::model::InstancesSetMachineTypeRequest::new();
        body.machine_type = Some(format!("zones/{zone}/machineTypes/{machine_type}"));
        self.mutate(&resource, "setMachineType", deadline, |rid| {
            self.clients
                .instances
                .set_machine_type()
                .set_project(project)
                .set_zone(zone)
                .set_instance(name)
                .set_body(body.clone())
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await?;
        Ok(())
    }

    /// Deletes the instance (its boot disk goes with it); an absent one is success.
    pub async fn delete_instance(&self, zone: &str, name: &str, deadline: Instant) -> Result<()> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        self.delete_idempotent(&resource, deadline, |rid| {
            self.clients
                .instances
                .delete()
                .set_project(project)
                .set_zone(zone)
                .set_instance(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_filters_join_every_label() {
        let labels = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "x".to_string()),
        ]);
        assert_eq!(
            label_filter(&labels),
            "(labels.a = \"1\") AND (labels.b = \"x\")"
        );
        assert_eq!(label_filter(&BTreeMap::new()), "");
    }
}
