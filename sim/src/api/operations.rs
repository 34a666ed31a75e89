//! zoneOperations, regionOperations, globalOperations: get, list, delete and `wait`; and
//! globalOperations.aggregatedList, every scope's operations at once (what `gcloud compute operations list` calls).
//!
//! `wait` long-polls: it returns as soon as the operation is DONE, or its current state when the configured
//! deadline (GCE: about 2 minutes; tests: much less) is reached, so clients must be ready to call it again.

use super::common::{self, to_value};
use super::error::{ApiError, ApiResult};
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::state::{Cloud, under};
use serde_json::Value;
use std::sync::Arc;

pub const ROUTES: &[Route] = &[
    Route {
        method: "GET",
        pattern: "zones/{zone}/operations",
        api: "zoneOperations.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "zones/{zone}/operations/{operation}",
        api: "zoneOperations.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "zones/{zone}/operations/{operation}",
        api: "zoneOperations.delete",
        handler: Handler::Write(delete),
    },
    Route {
        method: "POST",
        pattern: "zones/{zone}/operations/{operation}/wait",
        api: "zoneOperations.wait",
        handler: Handler::Wait,
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/operations",
        api: "regionOperations.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "regions/{region}/operations/{operation}",
        api: "regionOperations.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "regions/{region}/operations/{operation}",
        api: "regionOperations.delete",
        handler: Handler::Write(delete),
    },
    Route {
        method: "POST",
        pattern: "regions/{region}/operations/{operation}/wait",
        api: "regionOperations.wait",
        handler: Handler::Wait,
    },
    Route {
        method: "GET",
        pattern: "global/operations",
        api: "globalOperations.list",
        handler: Handler::Read(list),
    },
    Route {
        method: "GET",
        pattern: "global/operations/{operation}",
        api: "globalOperations.get",
        handler: Handler::Read(get),
    },
    Route {
        method: "DELETE",
        pattern: "global/operations/{operation}",
        api: "globalOperations.delete",
        handler: Handler::Write(delete),
    },
    Route {
        method: "POST",
        pattern: "global/operations/{operation}/wait",
        api: "globalOperations.wait",
        handler: Handler::Wait,
    },
    Route {
        method: "GET",
        pattern: "aggregated/operations",
        api: "globalOperations.aggregatedList",
        handler: Handler::Read(aggregated_list),
    },
];

/// Relative path of the scope's operations collection, from the request's path parameters.
fn collection(req: &Req) -> String {
    match (req.p("zone"), req.p("region")) {
        ("", "") => format!("projects/{}/global/operations", req.project),
        ("", r) => format!("projects/{}/regions/{r}/operations", req.project),
        (z, _) => format!("projects/{}/zones/{z}/operations", req.project),
    }
}

fn key(req: &Req) -> String {
    format!("{}/{}", collection(req), req.p("operation"))
}

fn get(_sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let k = key(req);
    cloud
        .operations
        .get(&k)
        .map(|r| to_value(&r.op))
        .unwrap_or_else(|| Err(ApiError::not_found(&k)))
}

fn list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let rel = collection(req);
    let prefix = format!("{rel}/");
    let items = under(&cloud.operations, &prefix)
        .map(|r| to_value(&r.op))
        .collect::<ApiResult<Vec<_>>>()?;
    common::list(sim, req, "compute#operationList", &rel, items)
}

/// Scopes as GCE names them: `global`, then every region, then every zone; each with its operations (the
/// same records `list` shows for that scope).
fn aggregated_list(sim: &Sim, cloud: &Cloud, req: &Req) -> ApiResult<Value> {
    let of = |rel: String| -> ApiResult<Vec<Value>> {
        under(&cloud.operations, &format!("{rel}/"))
            .map(|r| to_value(&r.op))
            .collect()
    };
    let mut scopes = vec![(
        "global".to_string(),
        of(format!("projects/{}/global/operations", req.project))?,
    )];
    scopes.extend(common::by_region(|r| {
        of(format!("projects/{}/regions/{r}/operations", req.project))
    })?);
    scopes.extend(common::by_zone(|z| {
        of(format!("projects/{}/zones/{z}/operations", req.project))
    })?);
    common::aggregated(
        sim,
        req,
        "compute#operationAggregatedList",
        "operations",
        scopes,
    )
}

/// Deleting an operation only forgets the record; the work it describes goes on (as on GCE).
fn delete(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<Option<Value>> {
    let k = key(req);
    cloud
        .operations
        .remove(&k)
        .ok_or_else(|| ApiError::not_found(&k))?;
    Ok(None)
}

pub async fn wait(sim: &Arc<Sim>, req: &Req) -> ApiResult<Value> {
    let k = key(req);
    // Subscribe before the first look so no change between the look and the await is missed.
    let mut changes = sim.watch_ops();
    let deadline = tokio::time::Instant::now() + sim.cfg.latency.wait_deadline;
    loop {
        let current = {
            let cloud = sim.cloud();
            let rec = cloud
                .operations
                .get(&k)
                .ok_or_else(|| ApiError::not_found(&k))?;
            (rec.is_done(), to_value(&rec.op)?)
        };
        if current.0 {
            return Ok(current.1);
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => continue,
            _ => return Ok(current.1),
        }
    }
}
