//! instances.addAccessConfig / deleteAccessConfig, and the natIP rules shared with instances.insert:
//! one access config per interface; a given natIP must be a RESERVED address of the instance's region that
//! nothing else holds; no natIP = a fresh ephemeral IP.

use super::Req;
use super::common::body;
use super::error::{ApiError, ApiResult};
use super::instance_request::{find, op};
use crate::app::Sim;
use crate::ops::OpSpec;
use crate::ops::model::Transition;
use crate::state::resources::AccessConfig;
use crate::state::{Cloud, IpRange, catalog, links};
use std::collections::BTreeSet;

/// GCE's answer to a second access config on one interface.
pub fn at_most_one() -> ApiError {
    ApiError::new(
        400,
        "badRequest",
        "At most one access config currently supported.",
    )
}

/// Fills server defaults and checks or allocates the natIP. `holder` is the instance's selfLink (an address
/// the instance itself already holds is not "in use elsewhere"); `field` names natIP in error messages.
pub fn resolve(
    cloud: &Cloud,
    region: &str,
    ac: &mut AccessConfig,
    holder: &str,
    field: &str,
    taken: &mut BTreeSet<String>,
) -> ApiResult<()> {
    ac.kind = "compute#accessConfig".into();
    if ac.type_.is_empty() {
        ac.type_ = "ONE_TO_ONE_NAT".into();
    }
    if ac.type_ != "ONE_TO_ONE_NAT" {
        return Err(ApiError::invalid_field(
            "resource.type",
            &ac.type_,
            "Only ONE_TO_ONE_NAT is supported.",
        ));
    }
    if ac.name.is_empty() {
        ac.name = "External NAT".into();
    }
    let tier = ac
        .network_tier
        .get_or_insert_with(|| "PREMIUM".into())
        .clone();
    match ac.nat_ip.clone() {
        Some(ip) if !ip.is_empty() => {
            let address = cloud.addresses.values().find(|a| {
                a.address == ip
                    && links::name_of(&a.region) == region
                    && a.address_type == "EXTERNAL"
            });
            let Some(address) = address else {
                return Err(ApiError::invalid_field(
                    field,
                    &ip,
                    &format!(
                        "The specified external IP address '{ip}' was not found in region '{region}'."
                    ),
                ));
            };
            if address.network_tier.as_deref().unwrap_or("PREMIUM") != tier {
                return Err(ApiError::invalid_field(
                    field,
                    &ip,
                    &format!(
                        "The network tier of the address must match the access config's tier {tier}."
                    ),
                ));
            }
            let users: Vec<String> = cloud
                .users_of_ip(region, &ip)
                .into_iter()
                .filter(|u| u != holder)
                .collect();
            if let Some(user) = users.first().or(taken.get(&ip)) {
                let addr_rel = address
                    .self_link
                    .find("projects/")
                    .map_or(address.self_link.as_str(), |i| &address.self_link[i..]);
                let user_rel = user.find("projects/").map_or(user.as_str(), |i| &user[i..]);
                return Err(ApiError::in_use("address", addr_rel, user_rel));
            }
            taken.insert(ip);
        }
        _ => {
            let ip = cloud.allocate_ip(IpRange::External, taken).ok_or_else(|| {
                ApiError::new(400, "invalid", "No external IP addresses are available.")
            })?;
            taken.insert(ip.clone());
            ac.nat_ip = Some(ip);
        }
    }
    Ok(())
}

/// The interface named by the `networkInterface` query parameter (required).
fn nic_index(req: &Req, nics: usize) -> ApiResult<usize> {
    let name = req
        .q("networkInterface")
        .ok_or_else(|| ApiError::required("networkInterface"))?;
    name.strip_prefix("nic")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n < nics)
        .ok_or_else(|| {
            ApiError::invalid_field(
                "networkInterface",
                name,
                "The network interface does not exist.",
            )
        })
}

pub fn add(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let mut ac: AccessConfig = body(req)?;
    let region = catalog::region_of(req.p("zone"))
        .unwrap_or_default()
        .to_string();
    let snapshot = cloud.clone();
    let (k, i) = find(cloud, req)?;
    let n = nic_index(req, i.network_interfaces.len())?;
    if !i.network_interfaces[n].access_configs.is_empty() {
        return Err(at_most_one());
    }
    let holder = sim.links.url(&k);
    resolve(
        &snapshot,
        &region,
        &mut ac,
        &holder,
        "resource.natIP",
        &mut BTreeSet::new(),
    )?;
    i.network_interfaces[n].access_configs.push(ac);
    i.network_interfaces[n].fingerprint = crate::state::ids::new_fingerprint();
    let id = i.id.clone();
    Ok(op(
        req,
        "addAccessConfig",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}

pub fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let name = req
        .q("accessConfig")
        .ok_or_else(|| ApiError::required("accessConfig"))?
        .to_string();
    let (k, i) = find(cloud, req)?;
    let n = nic_index(req, i.network_interfaces.len())?;
    let nic = &mut i.network_interfaces[n];
    let before = nic.access_configs.len();
    nic.access_configs.retain(|a| a.name != name);
    if nic.access_configs.len() == before {
        return Err(ApiError::invalid_field(
            "accessConfig",
            &name,
            "The access config does not exist.",
        ));
    }
    nic.fingerprint = crate::state::ids::new_fingerprint();
    let id = i.id.clone();
    Ok(op(
        req,
        "deleteAccessConfig",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}
