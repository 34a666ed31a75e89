//! How instances.insert turns a request body into what GCE stores: the machine type as a full URL in the
//! instance's zone, and network interfaces with names, networks, subnetworks, internal IPs (from the subnetwork's
//! range) and access configs. Disks are in `disks.rs` (`attachment`).

use super::Req;
use super::access_configs;
use super::common;
use super::error::{ApiError, ApiResult};
use super::subnetworks;
use crate::app::Sim;
use crate::state::resources::NetworkInterface;
use crate::state::{Cloud, IpRange, ids};
use std::collections::BTreeSet;

/// `zones/z/machineTypes/t` (full or partial URL) → full URL in the instance's own zone.
pub fn machine_type(sim: &Sim, req: &Req, given: &str) -> ApiResult<String> {
    if given.is_empty() {
        return Err(ApiError::required("resource.machineType"));
    }
    let rel = common::reference(sim, req, "resource.machineType", given)?;
    let ok = crate::state::links::scope_of(&rel, "zones") == Some(req.p("zone"))
        && rel.contains("/machineTypes/");
    if !ok {
        return Err(ApiError::invalid_field(
            "resource.machineType",
            given,
            "Must be a URL to a valid Compute resource of the correct type.",
        ));
    }
    super::machine_types::check_offered("resource.machineType", given, req.p("zone"))?;
    Ok(sim.links.url(&rel))
}

#[allow(clippy::too_many_arguments)]
pub fn network_interface(
    sim: &Sim,
    cloud: &Cloud,
    req: &Req,
    region: &str,
    n: usize,
    nic: &mut NetworkInterface,
    holder: &str,
    taken: &mut BTreeSet<String>,
) -> ApiResult<()> {
    let field = format!("resource.networkInterfaces[{n}]");
    nic.kind = "compute#networkInterface".into();
    nic.name = format!("nic{n}");
    // The subnetwork first: an interface that names only a subnetwork is on that subnetwork's network.
    let sub_field = format!("{field}.subnetwork");
    let sub = match nic.subnetwork.as_deref().filter(|s| !s.is_empty()) {
        Some(given) => Some(subnetworks::resolve(
            sim, cloud, req, &sub_field, given, region,
        )?),
        None => None,
    };
    let network_field = format!("{field}.network");
    let network = match (nic.network.is_empty(), &sub) {
        (false, _) => common::reference(sim, req, &network_field, &nic.network)?,
        (true, Some(sub)) => sub.network.clone(),
        (true, None) => common::reference(sim, req, &network_field, "global/networks/default")?,
    };
    let sub = match sub {
        Some(sub) => {
            if sub.network != network {
                return Err(ApiError::invalid_field(
                    &sub_field,
                    nic.subnetwork.as_deref().unwrap_or_default(),
                    "Subnetwork should belong to the network.",
                ));
            }
            sub
        }
        // No subnetwork: the region's `default`. The sim lets an interface on any network take it (it has no
        // networks resource that could say which subnetworks a network has), as it always did.
        None => subnetworks::default_of(sim, cloud, req, region)?,
    };
    nic.network = sim.links.url(&network);
    nic.subnetwork = Some(sim.links.url(&sub.rel));
    let range = IpRange::Internal(sub.range);
    let ip = match nic.network_ip.take() {
        Some(ip) => {
            if !range.contains(&ip) {
                return Err(ApiError::invalid_field(
                    &format!("{field}.networkIP"),
                    &ip,
                    "Requested internal IP is outside the subnetwork CIDR range.",
                ));
            }
            // A reserved INTERNAL address of the region is meant to be used this way (a static internal IP);
            // any other holder, or an instance already on the address, is a conflict.
            let reserved_for_it = cloud.addresses.values().any(|a| {
                a.address == ip
                    && a.address_type == "INTERNAL"
                    && crate::state::links::name_of(&a.region) == region
            }) && cloud.users_of_ip(region, &ip).is_empty();
            if (cloud.ips_in_use().contains(&ip) && !reserved_for_it) || taken.contains(&ip) {
                return Err(ApiError::new(
                    400,
                    "invalid",
                    format!("IP '{ip}' is already being used by another resource."),
                ));
            }
            ip
        }
        None => cloud.allocate_ip(range, taken).ok_or_else(|| {
            ApiError::new(400, "invalid", "The subnetwork has no free addresses.")
        })?,
    };
    taken.insert(ip.clone());
    nic.network_ip = Some(ip);
    nic.fingerprint = ids::new_fingerprint();
    nic.stack_type.get_or_insert_with(|| "IPV4_ONLY".into());
    if nic.access_configs.len() > 1 {
        return Err(access_configs::at_most_one());
    }
    for (a, ac) in nic.access_configs.iter_mut().enumerate() {
        let f = format!("{field}.accessConfigs[{a}].natIP");
        access_configs::resolve(cloud, region, ac, holder, &f, taken)?;
    }
    Ok(())
}

/// `serviceAccounts` as GCE takes it: at most one account; `default` becomes the project's default Compute Engine
/// service account (`<project number>-compute@developer.gserviceaccount.com`); scopes must be URLs (gcloud expands
/// its aliases before calling; the API does not).
pub fn service_accounts(req: &Req, accounts: Option<&mut serde_json::Value>) -> ApiResult<()> {
    let Some(serde_json::Value::Array(accounts)) = accounts else {
        return Ok(());
    };
    if accounts.len() > 1 {
        return Err(ApiError::invalid(
            "Invalid value for field 'resource.serviceAccounts': ''. At most one service account can be specified.",
        ));
    }
    for (n, account) in accounts.iter_mut().enumerate() {
        let email = account["email"].as_str().unwrap_or_default().to_string();
        if email.is_empty() {
            return Err(ApiError::required(&format!(
                "resource.serviceAccounts[{n}].email"
            )));
        }
        if email == "default" {
            account["email"] = super::projects::default_service_account(&req.project).into();
        }
        let scopes = account["scopes"].as_array().cloned().unwrap_or_default();
        for (k, scope) in scopes.iter().enumerate() {
            let scope = scope.as_str().unwrap_or_default();
            if !scope.starts_with("https://") {
                return Err(ApiError::invalid_field(
                    &format!("resource.serviceAccounts[{n}].scopes[{k}]"),
                    scope,
                    "Scopes must be URLs",
                ));
            }
        }
    }
    Ok(())
}
