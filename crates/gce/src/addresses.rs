//! Regional addresses: the cluster's EXTERNAL static IP, and each replica's INTERNAL IP, reserved before its VM
//! exists because etcd's `--initial-cluster` must name the new member's peer URL first.

use super::Compute;
use super::error::{Error, Result, last_segment};
use super::types::{AddressInfo, AddressKind, AddressSpec, Fingerprint};
use google_cloud_compute_v1::model::{Address, RegionSetLabelsRequest};
use google_cloud_gax::options::RequestOptionsBuilder;
use std::collections::BTreeMap;
use tokio::time::Instant;

fn info(region: &str, a: &Address) -> AddressInfo {
    let internal = a.address_type.as_ref().and_then(|t| t.name()) == Some("INTERNAL");
    AddressInfo {
        name: a.name.clone().unwrap_or_default(),
        region: region.to_string(),
        ip: a.address.clone().unwrap_or_default(),
        status: a
            .status
            .as_ref()
            .and_then(|s| s.name())
            .unwrap_or_default()
            .to_string(),
        users: a.users.clone(),
        kind: if internal {
            AddressKind::Internal {
                subnetwork: a.subnetwork.clone(),
            }
        } else {
            AddressKind::External
        },
        self_link: a.self_link.clone().unwrap_or_default(),
        description: a.description.clone().filter(|d| !d.is_empty()),
        labels: a
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        label_fingerprint: Fingerprint(a.label_fingerprint.clone().unwrap_or_default().to_vec()),
    }
}

/// Why an existing address is not the one asked for; `None` if it is.
fn mismatch(spec: &AddressSpec, have: &AddressInfo) -> Option<String> {
    match (&spec.kind, &have.kind) {
        (AddressKind::External, AddressKind::Internal { .. }) => {
            return Some("it is an INTERNAL address, EXTERNAL was asked for".into());
        }
        (AddressKind::Internal { .. }, AddressKind::External) => {
            return Some("it is an EXTERNAL address, INTERNAL was asked for".into());
        }
        (
            AddressKind::Internal {
                subnetwork: Some(want),
            },
            AddressKind::Internal {
                subnetwork: Some(got),
            },
        ) if last_segment(want) != last_segment(got) => {
            return Some(format!("it is in subnetwork {got}, not {want}"));
        }
        _ => {}
    }
    match &spec.ip {
        Some(ip) if *ip != have.ip => Some(format!("its IP is {}, not {ip}", have.ip)),
        _ => None,
    }
}

impl Compute {
    fn address_rel(&self, region: &str, name: &str) -> String {
        format!(
            "address {}",
            self.rel(&format!("regions/{region}/addresses/{name}"))
        )
    }

    /// Ensures the address exists as specified and returns it (with its IP).
    pub async fn reserve_address(
        &self,
        spec: &AddressSpec,
        deadline: Instant,
    ) -> Result<AddressInfo> {
        let project = self.project()?;
        let resource = self.address_rel(&spec.region, &spec.name);
        let mut body = Address::new();
        body.name = Some(spec.name.clone());
        body.address = spec.ip.clone();
        body.description = spec.description.clone();
        match &spec.kind {
            AddressKind::External => body.address_type = Some("EXTERNAL".into()),
            AddressKind::Internal { subnetwork } => {
                body.address_type = Some("INTERNAL".into());
                body.subnetwork = subnetwork
                    .as_ref()
                    .map(|s| self.regional_ref(&spec.region, "subnetworks", s));
            }
        }
        let inserted = self
            .mutate(&resource, "insert", deadline, |rid| {
                self.clients
                    .addresses
                    .insert()
                    .set_project(project)
                    .set_region(&spec.region)
                    .set_body(body.clone())
                    .set_request_id(rid)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await;
        match inserted {
            Ok(_) => {}
            // Already there (a retried apply): fine if it is the address asked for.
            Err(Error::Api { status: 409, .. }) => {}
            Err(e) => return Err(e),
        }
        let have = self
            .get_address(&spec.region, &spec.name, deadline)
            .await?
            .ok_or_else(|| Error::NotFound {
                resource: resource.clone(),
            })?;
        match mismatch(spec, &have) {
            None => Ok(have),
            Some(detail) => Err(Error::Conflict { resource, detail }),
        }
    }

    /// Reserves (or finds) a regional EXTERNAL static IP.
    pub async fn reserve_external_address(
        &self,
        region: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<AddressInfo> {
        let spec = AddressSpec {
            name: name.into(),
            region: region.into(),
            kind: AddressKind::External,
            ip: None,
            description: None,
        };
        self.reserve_address(&spec, deadline).await
    }

    /// Reserves (or finds) a regional INTERNAL IP in `subnetwork` (`None` = the region's default), described as
    /// `description` when it is made.
    pub async fn reserve_internal_address(
        &self,
        region: &str,
        name: &str,
        subnetwork: Option<&str>,
        description: &str,
        deadline: Instant,
    ) -> Result<AddressInfo> {
        let spec = AddressSpec {
            name: name.into(),
            region: region.into(),
            kind: AddressKind::Internal {
                subnetwork: subnetwork.map(str::to_string),
            },
            ip: None,
            description: Some(description.into()),
        };
        self.reserve_address(&spec, deadline).await
    }

    /// The address, or `None` if it does not exist.
    pub async fn get_address(
        &self,
        region: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<AddressInfo>> {
        let project = self.project()?;
        let resource = self.address_rel(region, name);
        let got = self
            .read_opt(&resource, deadline, || {
                self.clients
                    .addresses
                    .get()
                    .set_project(project)
                    .set_region(region)
                    .set_address(name)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        Ok(got.map(|a| info(region, &a)))
    }

    /// The region's addresses whose description is exactly `description` (filtered by the API, and checked
    /// again here, since GCE's `=` on strings is a pattern match).
    pub async fn list_addresses_described(
        &self,
        region: &str,
        description: &str,
        deadline: Instant,
    ) -> Result<Vec<AddressInfo>> {
        let project = self.project()?;
        let resource = format!("addresses in {}", self.rel(&format!("regions/{region}")));
        let filter = format!("description = \"{}\"", description.replace('"', "\\\""));
        let mut out = Vec::new();
        let mut page = String::new();
        loop {
            let list = self
                .attempt(&resource, "list", deadline, || {
                    let mut b = self
                        .clients
                        .addresses
                        .list()
                        .set_project(project)
                        .set_region(region)
                        .set_filter(&filter);
                    if !page.is_empty() {
                        b = b.set_page_token(&page);
                    }
                    b.with_user_agent(self.user_agent()).send()
                })
                .await?;
            out.extend(
                list.items
                    .iter()
                    .map(|a| info(region, a))
                    .filter(|a| a.description.as_deref() == Some(description)),
            );
            match list.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => page = t,
                None => break,
            }
        }
        Ok(out)
    }

    /// Replaces the address's labels if they still carry `fingerprint`: a compare-and-set. `Ok(false)` when the
    /// fingerprint is stale (someone changed the labels since they were read); the caller reads again and decides.
    pub async fn set_address_labels(
        &self,
        region: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
        fingerprint: &Fingerprint,
        deadline: Instant,
    ) -> Result<bool> {
        let project = self.project()?;
        let resource = self.address_rel(region, name);
        let mut body = RegionSetLabelsRequest::new();
        body.labels = labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        body.label_fingerprint = Some(fingerprint.0.clone().into());
        let done = self
            .mutate(&resource, "setLabels", deadline, |rid| {
                self.clients
                    .addresses
                    .set_labels()
                    .set_project(project)
                    .set_region(region)
                    .set_resource(name)
                    .set_body(body.clone())
                    .set_request_id(rid)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await;
        match done {
            Ok(_) => Ok(true),
            Err(e) if super::instance_ops::is_stale_fingerprint(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Releases the address; an absent one is success.
    pub async fn delete_address(&self, region: &str, name: &str, deadline: Instant) -> Result<()> {
        let project = self.project()?;
        let resource = self.address_rel(region, name);
        self.delete_idempotent(&resource, deadline, |rid| {
            self.clients
                .addresses
                .delete()
                .set_project(project)
                .set_region(region)
                .set_address(name)
                .set_request_id(rid)
                .with_user_agent(self.user_agent())
                .send()
        })
        .await
    }

    /// A reference to a regional resource: URLs and `projects/...` paths as given, names made partial URLs.
    pub(crate) fn regional_ref(&self, region: &str, collection: &str, given: &str) -> String {
        if given.contains('/') {
            given.to_string()
        } else {
            self.rel(&format!("regions/{region}/{collection}/{given}"))
        }
    }

    /// Same for global resources (`global/networks/x`).
    pub(crate) fn global_ref(&self, collection: &str, given: &str) -> String {
        if given.contains('/') {
            given.to_string()
        } else {
            self.rel(&format!("global/{collection}/{given}"))
        }
    }
}
