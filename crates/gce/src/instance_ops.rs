//! Changes to a live instance: its external IP (the cluster's static IP moves between a lone master's access
//! config and a forwarding rule), its labels and its metadata (optimistic concurrency with fingerprints).

use super::Compute;
use super::error::{Error, Result};
use super::instances::{access_config, items};
use super::types::{ExternalIp, InstanceInfo};
use google_cloud_compute_v1::model::{InstancesSetLabelsRequest, Metadata};
use google_cloud_gax::options::RequestOptionsBuilder;
use std::collections::BTreeMap;
use tokio::time::Instant;

/// How many times a fingerprinted update is re-read and retried after 412 before giving up (tpg uses 10).
const FINGERPRINT_ATTEMPTS: u32 = 10;

impl Compute {
    async fn must_get_instance(
        &self,
        zone: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<InstanceInfo> {
        self.get_instance(zone, name, deadline)
            .await?
            .ok_or_else(|| Error::NotFound {
                resource: self.instance_rel(zone, name),
            })
    }

    /// Makes nic0's access config what `want` says: deletes the existing one (if any, and if it differs), then
    /// adds `Static(ip)` or an ephemeral one. Already right = no call. Returns the instance afterwards.
    pub async fn set_external_ip(
        &self,
        zone: &str,
        name: &str,
        want: &ExternalIp,
        deadline: Instant,
    ) -> Result<InstanceInfo> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        let now = self.must_get_instance(zone, name, deadline).await?;
        let already = match (want, &now.access_config_name, &now.external_ip) {
            (ExternalIp::None, None, _) => true,
            (ExternalIp::Static(ip), Some(_), Some(have)) => ip == have,
            // An ephemeral swap is asked for to drop a static IP: any current config is replaced.
            _ => false,
        };
        if already {
            return Ok(now);
        }
        if let Some(ac_name) = &now.access_config_name {
            let deleted = self
                .mutate(&resource, "deleteAccessConfig", deadline, |rid| {
                    self.clients
                        .instances
                        .delete_access_config()
                        .set_project(project)
                        .set_zone(zone)
                        .set_instance(name)
                        .set_network_interface(&now.nic_name)
                        .set_access_config(ac_name)
                        .set_request_id(rid)
                        .with_user_agent(self.user_agent())
                        .send()
                })
                .await;
            match deleted {
                Ok(_) => {}
                // Someone else removed it in between: the goal of this step is reached.
                Err(Error::Api {
                    status: 400,
                    ref message,
                    ..
                }) if message.contains("does not exist") => {}
                Err(e) => return Err(e),
            }
        }
        let nat_ip = match want {
            ExternalIp::None => return self.must_get_instance(zone, name, deadline).await,
            ExternalIp::Ephemeral => None,
            ExternalIp::Static(ip) => Some(ip.as_str()),
        };
        let body = access_config(nat_ip);
        self.mutate(&resource, "addAccessConfig", deadline, |rid| {
            self.clients
                .instances
                .add_access_config()
                .set_project(project)
                .set_zone(zone)
                .set_instance(name)
                .set_network_interface(&now.nic_name)
                .set_body(body.clone())
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await?;
        self.must_get_instance(zone, name, deadline).await
    }

    /// The brief's shape of [`set_external_ip`](Self::set_external_ip): `Some(ip)` = that static IP,
    /// `None` = ephemeral.
    pub async fn swap_access_config(
        &self,
        zone: &str,
        name: &str,
        nat_ip: Option<&str>,
        deadline: Instant,
    ) -> Result<InstanceInfo> {
        let want = match nat_ip {
            Some(ip) => ExternalIp::Static(ip.to_string()),
            None => ExternalIp::Ephemeral,
        };
        self.set_external_ip(zone, name, &want, deadline).await
    }

    /// Replaces the instance's labels. A stale fingerprint (412, someone else changed them) is handled by
    /// re-reading and trying again.
    pub async fn set_labels(
        &self,
        zone: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
        deadline: Instant,
    ) -> Result<InstanceInfo> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        for _ in 0..FINGERPRINT_ATTEMPTS {
            let now = self.must_get_instance(zone, name, deadline).await?;
            if now.labels == *labels {
                return Ok(now);
            }
            let mut body = InstancesSetLabelsRequest::new();
            body.labels = labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            body.label_fingerprint = Some(now.label_fingerprint.0.clone().into());
            let done = self
                .mutate(&resource, "setLabels", deadline, |rid| {
                    self.clients
                        .instances
                        .set_labels()
                        .set_project(project)
                        .set_zone(zone)
                        .set_instance(name)
                        .set_body(body.clone())
                        .set_request_id(rid)
                        .with_user_agent(self.user_agent())
                        .send()
                })
                .await;
            match done {
                Ok(_) => return self.must_get_instance(zone, name, deadline).await,
                Err(e) if is_stale_fingerprint(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(fingerprint_race(resource, "labels"))
    }

    /// Replaces every metadata item (the provider owns the whole set), with the same fingerprint handling.
    pub async fn set_metadata(
        &self,
        zone: &str,
        name: &str,
        metadata: &[(String, String)],
        deadline: Instant,
    ) -> Result<InstanceInfo> {
        let project = self.project()?;
        let resource = self.instance_rel(zone, name);
        for _ in 0..FINGERPRINT_ATTEMPTS {
            let now = self.must_get_instance(zone, name, deadline).await?;
            if now.metadata == metadata {
                return Ok(now);
            }
            let mut body = Metadata::new();
            body.items = items(metadata);
            body.fingerprint = Some(now.metadata_fingerprint.0.clone().into());
            let done = self
                .mutate(&resource, "setMetadata", deadline, |rid| {
                    self.clients
                        .instances
                        .set_metadata()
                        .set_project(project)
                        .set_zone(zone)
                        .set_instance(name)
                        .set_body(body.clone())
                        .set_request_id(rid)
                        .with_user_agent(self.user_agent())
                        .send()
                })
                .await;
            match done {
                Ok(_) => return self.must_get_instance(zone, name, deadline).await,
                Err(e) if is_stale_fingerprint(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(fingerprint_race(resource, "metadata"))
    }
}

/// 412 conditionNotMet, synchronously or as the operation's CONDITION_NOT_MET.
pub(crate) fn is_stale_fingerprint(e: &Error) -> bool {
    match e {
        Error::Api { status: 412, .. } => true,
        Error::Operation { code, .. } => code == "CONDITION_NOT_MET",
        _ => false,
    }
}

fn fingerprint_race(resource: String, what: &str) -> Error {
    Error::Api {
        resource,
        action: format!("set {what}"),
        status: 412,
        reason: "conditionNotMet".into(),
        message: format!(
            "the {what} fingerprint changed on each of {FINGERPRINT_ATTEMPTS} attempts"
        ),
    }
}
