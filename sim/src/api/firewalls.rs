//! firewalls (global): insert, get, list, patch, delete. Stored and validated here; the fabric enforces them on
//! every connection it carries to a VM (`fabric::firewall`, docs/sim.md "Firewall").

use super::common::{self, body, check_name, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::ops::model::{Collection, Transition};
use crate::ops::{OpSpec, Scope};
use crate::state::resources::Firewall;
use crate::state::{Cloud, ids, under};
use serde_json::{Value, json};

pub const ROUTES: &[Route] = &[
    Route {
        method: "POST",
        pattern: "global/firewalls",
        api: "firewalls.insert",
        handler: Handler::Mutate(insert),
    },
    Route {
        method: "GET",
        pattern: "global/firewalls",
        api: "firewalls.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "global/firewalls/{firewall}",
        api: "firewalls.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "PATCH",
        pattern: "global/firewalls/{firewall}",
        api: "firewalls.patch",
        handler: Handler::Mutate(patch),
    },
    Route {
        method: "DELETE",
        pattern: "global/firewalls/{firewall}",
        api: "firewalls.delete",
        handler: Handler::Mutate(delete),
    },
];

fn key(req: &Req, name: &str) -> String {
    format!("projects/{}/global/firewalls/{name}", req.project)
}

fn global_op(op_type: &'static str, k: String, id: String, on_done: Transition) -> OpSpec {
    OpSpec {
        scope: Scope::Global,
        op_type,
        target: k,
        target_id: id,
        on_running: Transition::Nothing,
        on_done,
    }
}

/// Server defaults and the rules GCE enforces on a firewall's shape.
fn normalise(sim: &Sim, req: &Req, f: &mut Firewall) -> ApiResult<()> {
    let network = if f.network.is_empty() {
        "global/networks/default".to_string()
    } else {
        f.network.clone()
    };
    f.network = sim
        .links
        .url(&common::reference(sim, req, "resource.network", &network)?);
    if f.direction.is_empty() {
        f.direction = "INGRESS".into();
    }
    if !matches!(f.direction.as_str(), "INGRESS" | "EGRESS") {
        return Err(ApiError::invalid_field(
            "resource.direction",
            &f.direction,
            "Must be INGRESS or EGRESS.",
        ));
    }
    if !(0..=65535).contains(&f.priority) {
        return Err(ApiError::invalid_field(
            "resource.priority",
            &f.priority.to_string(),
            "Must be between 0 and 65535.",
        ));
    }
    let rules = |k: &str| f.extra.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    match (rules("allowed"), rules("denied")) {
        (0, 0) => {
            return Err(ApiError::invalid(
                "The firewall must have at least one 'allowed' or 'denied' rule.",
            ));
        }
        (a, d) if a > 0 && d > 0 => {
            return Err(ApiError::invalid(
                "A firewall cannot have both 'allowed' and 'denied' rules.",
            ));
        }
        _ => {}
    }
    for list in ["allowed", "denied"] {
        for rule in f
            .extra
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if rule
                .get("IPProtocol")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::required(&format!("resource.{list}[].IPProtocol")));
            }
        }
    }
    let has = |f: &Firewall, k: &str| {
        f.extra
            .get(k)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    let no_source =
        !has(f, "sourceRanges") && !has(f, "sourceTags") && !has(f, "sourceServiceAccounts");
    if f.direction == "INGRESS" && no_source {
        f.extra.insert("sourceRanges".into(), json!(["0.0.0.0/0"]));
    }
    if f.direction == "EGRESS" && !has(f, "destinationRanges") {
        f.extra
            .insert("destinationRanges".into(), json!(["0.0.0.0/0"]));
    }
    Ok(())
}

fn insert(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let mut f: Firewall = body(req)?;
    check_name(&f.name)?;
    let k = key(req, &f.name);
    if cloud.firewalls.contains_key(&k) {
        return Err(ApiError::already_exists(&k));
    }
    if req.body.get("priority").is_none() {
        f.priority = 1000;
    }
    normalise(sim, req, &mut f)?;
    f.kind = "compute#firewall".into();
    f.id = ids::new_id();
    f.creation_timestamp = ids::now_rfc3339();
    f.self_link = sim.links.url(&k);
    let id = f.id.clone();
    cloud.firewalls.insert(k.clone(), f);
    Ok(global_op("insert", k, id, Transition::Nothing))
}

/// JSON merge of the body's top-level fields into the stored firewall; the name cannot change.
fn patch(sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("firewall"));
    let old = cloud
        .firewalls
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    if let Some(name) = req
        .body
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| *n != old.name)
    {
        return Err(ApiError::invalid_field(
            "resource.name",
            name,
            "The name of a firewall cannot be changed.",
        ));
    }
    let mut merged = to_value(old)?;
    if let (Some(m), Some(b)) = (merged.as_object_mut(), req.body.as_object()) {
        for (field, v) in b {
            m.insert(field.clone(), v.clone());
        }
    }
    let mut f: Firewall = serde_json::from_value(merged)
        .map_err(|e| ApiError::invalid(format!("Invalid JSON payload received. {e}")))?;
    normalise(sim, req, &mut f)?;
    let id = f.id.clone();
    cloud.firewalls.insert(k.clone(), f);
    Ok(global_op("patch", k, id, Transition::Nothing))
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req, req.p("firewall"));
    cloud
        .firewalls
        .get(&k)
        .map(to_value)
        .unwrap_or_else(|| Err(ApiError::not_found(&k)))
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = format!("projects/{}/global/firewalls", req.project);
    let prefix = format!("{rel}/");
    let items = under(&cloud.firewalls, &prefix)
        .map(to_value)
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#firewallList", &rel, items)
}

fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let k = key(req, req.p("firewall"));
    let f = cloud
        .firewalls
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    let gone = Transition::Remove {
        collection: Collection::Firewalls,
        key: k.clone(),
    };
    Ok(global_op("delete", k, f.id.clone(), gone))
}
