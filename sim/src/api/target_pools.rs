//! targetPools (regional): insert, get, list, delete, addInstance, removeInstance, getHealth.
//! Health comes from the load balancers the fabric runs for forwarding rules that target the pool.

use super::addresses::rel_of;
use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::TargetPool;
use crate::state::{Cloud, catalog, ids, links, under};
use serde::Deserialize;
use serde_json::{Value, json};

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "regions/{region}/targetPools",
        api: "targetPools.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/targetPools",
        api: "targetPools.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/targetPools/{pool}",
        api: "targetPools.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "regions/{region}/targetPools/{pool}",
        api: "targetPools.delete",
        handler: Handler::Mutate(delete),
    },
    Route {
        method: "POST",
        pattern: "regions/{region}/targetPools/{pool}/addInstance",
        api: "targetPools.addInstance",
        handler: Handler::Mutate(add_instance),
    },
    Route {
        method: "POST",
        pattern: "regions/{region}/targetPools/{pool}/removeInstance",
        api: "targetPools.removeInstance",
        handler: Handler::Mutate(remove_instance),
    },
    Route {
        method: "POST",
        pattern: "regions/{region}/targetPools/{pool}/getHealth",
        api: "targetPools.getHealth",
        handler: Handler::Read(get_health),
    },
];

fn key(req: &Req, name: &str) -> String {
    format!(
        "projects/{}/regions/{}/targetPools/{name}",
        req.project,
        req.p("region")
    )
}

fn op(req: &Req, op_type: &'static str, k: String, id: String, on_done: Transition) -> OpSpec {
    OpSpec {
        scope: Scope::Region(req.p("region").to_string()),
        op_type,
        target: k,
        target_id: id,
        on_running: Transition::Nothing,
        on_done,
    }
}

/// An instance reference → its full URL; it must exist and live in a zone of the pool's region.
fn instance_url(
    sim: &Sim,
    cloud: &Cloud,
    req: &Req,
    field: &str,
    reference: &str,
) -> ApiResult<String> {
    let rel = common::reference(sim, req, field, reference)?;
    let zone = links::scope_of(&rel, "zones").unwrap_or_default();
    if catalog::region_of(zone) != Some(req.p("region")) || !rel.contains("/instances/") {
        return Err(ApiError::invalid_field(
            field,
            reference,
            "Instances must be in a zone of the target pool's region.",
        ));
    }
    if !cloud.instances.contains_key(&rel) {
        return Err(ApiError::not_found(&rel));
    }
    Ok(sim.links.url(&rel))
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let mut p: TargetPool = body(req)?;
    check_name(&p.name)?;
    let k = key(req, &p.name);
    if cloud.target_pools.contains_key(&k) {
        return Err(ApiError::already_exists(&k));
    }
    if p.health_checks.len() > 1 {
        return Err(ApiError::invalid(
            "Only one health check may be specified for a target pool.",
        ));
    }
    for hc in p.health_checks.iter_mut() {
        let rel = common::reference(sim, req, "resource.healthChecks[0]", hc)?;
        if !cloud.http_health_checks.contains_key(&rel) {
            return Err(ApiError::not_found(&rel));
        }
        *hc = sim.links.url(&rel);
    }
    let given = std::mem::take(&mut p.instances);
    for (n, i) in given.iter().enumerate() {
        let url = instance_url(sim, cloud, req, &format!("resource.instances[{n}]"), i)?;
        if !p.instances.contains(&url) {
            p.instances.push(url);
        }
    }
    if p.session_affinity.is_empty() {
        p.session_affinity = "NONE".into();
    }
    if !matches!(
        p.session_affinity.as_str(),
        "NONE" | "CLIENT_IP" | "CLIENT_IP_PROTO"
    ) {
        return Err(ApiError::invalid_field(
            "resource.sessionAffinity",
            &p.session_affinity,
            "Unsupported session affinity.",
        ));
    }
    p.kind = "compute#targetPool".into();
    p.id = ids::new_id();
    p.creation_timestamp = ids::now_rfc3339();
    p.region = sim.links.url(&format!(
        "projects/{}/regions/{}",
        req.project,
        req.p("region")
    ));
    p.self_link = sim.links.url(&k);
    let id = p.id.clone();
    cloud.target_pools.insert(k.clone(), p);
    Ok(op(req, "insert", k, id, Transition::Nothing))
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req, req.p("pool"));
    cloud
        .target_pools
        .get(&k)
        .map(to_value)
        .unwrap_or_else(|| Err(ApiError::not_found(&k)))
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = format!(
        "projects/{}/regions/{}/targetPools",
        req.project,
        req.p("region")
    );
    let prefix = format!("{rel}/");
    let items = under(&cloud.target_pools, &prefix)
        .map(to_value)
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#targetPoolList", &rel, items)
}

/// A pool a forwarding rule still targets cannot go.
fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("pool"));
    let p = cloud
        .target_pools
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    if let Some(fr) = cloud
        .forwarding_rules
        .values()
        .find(|f| rel_of(&f.target) == k)
    {
        return Err(common::held_by(
            cloud,
            "target_pool",
            &k,
            rel_of(&fr.self_link),
        ));
    }
    let id = p.id.clone();
    Ok(op(
        req,
        "delete",
        k.clone(),
        id,
        Transition::Remove {
            collection: Collection::TargetPools,
            key: k,
        },
    ))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InstanceRefs {
    instances: Vec<InstanceRef>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InstanceRef {
    instance: String,
}

/// Adding a member twice is a no-op (simplification: GCE's exact answer is not documented).
fn add_instance(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let refs: InstanceRefs = body(req)?;
    let k = key(req, req.p("pool"));
    let mut urls = Vec::new();
    for (n, r) in refs.instances.iter().enumerate() {
        urls.push(instance_url(
            sim,
            cloud,
            req,
            &format!("resource.instances[{n}].instance"),
            &r.instance,
        )?);
    }
    let p = cloud
        .target_pools
        .get_mut(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    for u in urls {
        if !p.instances.contains(&u) {
            p.instances.push(u);
        }
    }
    let id = p.id.clone();
    Ok(op(req, "addInstance", k, id, Transition::Nothing))
}

/// Removing a non-member is a no-op; the instance need not exist any more (it may have been deleted).
fn remove_instance(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let refs: InstanceRefs = body(req)?;
    let k = key(req, req.p("pool"));
    let mut rels = Vec::new();
    for (n, r) in refs.instances.iter().enumerate() {
        rels.push(common::reference(
            sim,
            req,
            &format!("resource.instances[{n}].instance"),
            &r.instance,
        )?);
    }
    let p = cloud
        .target_pools
        .get_mut(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    p.instances.retain(|u| !rels.iter().any(|r| r == rel_of(u)));
    let id = p.id.clone();
    Ok(op(req, "removeInstance", k, id, Transition::Nothing))
}

/// One entry per forwarding rule that targets the pool: `ipAddress` is the rule's IP, as for real target pools.
/// Without a running balancer (API-only sim), RUNNING counts as HEALTHY.
fn get_health(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req, req.p("pool"));
    let pool = cloud
        .target_pools
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    let given = req
        .body
        .get("instance")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::required("resource.instance"))?;
    let rel = common::reference(sim, req, "resource.instance", given)?;
    if !pool.instances.iter().any(|u| rel_of(u) == rel) {
        return Err(ApiError::invalid_field(
            "resource.instance",
            given,
            "The instance is not a member of the target pool.",
        ));
    }
    let inst = cloud.instances.get(&rel);
    let running = inst.is_some_and(|i| i.status == "RUNNING");
    let internal = inst
        .and_then(|i| i.network_interfaces.first())
        .and_then(|n| n.network_ip.clone())
        .unwrap_or_default();
    let url = sim.links.url(&rel);
    let state = |healthy: bool| if healthy { "HEALTHY" } else { "UNHEALTHY" };
    let mut statuses = Vec::new();
    for (fr_key, fr) in cloud
        .forwarding_rules
        .iter()
        .filter(|(_, f)| rel_of(&f.target) == k)
    {
        let healthy = match sim.fabric.lb_health(fr_key) {
            Some(h) => h
                .backends
                .iter()
                .any(|(ip, ok)| ip.to_string() == internal && *ok),
            None => running,
        };
        let mut s =
            json!({"healthState": state(healthy), "instance": url, "ipAddress": fr.ip_address});
        if let Some(port) = fr.port_list().first() {
            s["port"] = json!(port);
        }
        statuses.push(s);
    }
    if statuses.is_empty() {
        statuses.push(json!({"healthState": state(running), "instance": url}));
    }
    Ok(json!({"kind": "compute#targetPoolInstanceHealth", "healthStatus": statuses}))
}
