//! The admin API under `/_sim/` (no token needed): failpoints, out-of-band events, the request log, status,
//! the state (or one instance of it), shutdown. Everything `ha-sim fault|requests|status|stop` does goes through here.

use crate::app::Sim;
use crate::faults::Failpoint;
use crate::faults::events::{self, Event};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;

pub fn router() -> Router<Arc<Sim>> {
    Router::new()
        .route("/_sim/health", get(|| async { Json(json!({"ok": true})) }))
        .route("/_sim/status", get(status))
        .route("/_sim/state", get(state))
        .route("/_sim/instance", get(instance))
        .route("/_sim/shutdown", post(shutdown))
        .route("/_sim/requests", get(requests).delete(reset_requests))
        .route("/_sim/requests/reset", post(reset_requests))
        .route(
            "/_sim/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/_sim/faults/{id}", delete(clear_fault))
        .route("/_sim/events", post(event))
}

/// How long an out-of-band event waits for the VMs to reflect it before answering anyway.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(15);

fn bad(status: StatusCode, message: String) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

async fn status(State(sim): State<Arc<Sim>>) -> Response {
    Json(crate::status::collect(&sim).await).into_response()
}

async fn state(State(sim): State<Arc<Sim>>) -> Response {
    let cloud = sim.cloud().clone();
    match serde_json::to_value(&cloud) {
        Ok(v) => Json(v).into_response(),
        Err(e) => bad(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding state: {e}"),
        ),
    }
}

#[derive(serde::Deserialize)]
struct InstanceQuery {
    /// A name, `zone/name` or a link, as `ha-sim fault` takes them.
    name: String,
}

/// One instance as the sim holds it now: what `ha-sim ssh` needs (its zone, id and status) without the cost of
/// the whole state.
async fn instance(
    State(sim): State<Arc<Sim>>,
    axum::extract::Query(q): axum::extract::Query<InstanceQuery>,
) -> Response {
    let cloud = sim.cloud();
    match events::instance(&cloud, &q.name) {
        Ok(i) => Json(i).into_response(),
        Err(e) => bad(StatusCode::NOT_FOUND, e),
    }
}

async fn shutdown(State(sim): State<Arc<Sim>>) -> Response {
    sim.stop.send_replace(true);
    Json(json!({"stopping": true})).into_response()
}

async fn requests(State(sim): State<Arc<Sim>>) -> Response {
    Json(sim.reqlog().summary()).into_response()
}

async fn reset_requests(State(sim): State<Arc<Sim>>) -> Response {
    sim.reqlog().reset();
    Json(json!({"reset": true})).into_response()
}

async fn list_faults(State(sim): State<Arc<Sim>>) -> Response {
    Json(json!({"faults": sim.faults().list()})).into_response()
}

/// Body: a [`Failpoint`], e.g. `{"when":{"on":"request","api":"instances.insert"},"then":{"effect":"status","status":503},"times":1}`.
async fn add_fault(State(sim): State<Arc<Sim>>, body: axum::body::Bytes) -> Response {
    let fp: Failpoint = match serde_json::from_slice(&body) {
        Ok(f) => f,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("not a failpoint: {e}")),
    };
    match sim.faults().add(fp) {
        Ok(added) => {
            tracing::info!(failpoint = %added.name, "failpoint added");
            Json(added).into_response()
        }
        Err(e) => bad(StatusCode::BAD_REQUEST, e),
    }
}

async fn clear_faults(State(sim): State<Arc<Sim>>) -> Response {
    Json(json!({"cleared": sim.clear_faults(None)})).into_response()
}

async fn clear_fault(State(sim): State<Arc<Sim>>, Path(id): Path<u64>) -> Response {
    match sim.clear_faults(Some(id)) {
        0 => bad(StatusCode::NOT_FOUND, format!("no failpoint {id}")),
        n => Json(json!({"cleared": n})).into_response(),
    }
}

/// Body: an [`Event`], e.g. `{"event":"crashVm","instance":"us-central1-a/master-1"}`.
async fn event(State(sim): State<Arc<Sim>>, body: axum::body::Bytes) -> Response {
    let ev: Event = match serde_json::from_slice(&body) {
        Ok(e) => e,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("not an event: {e}")),
    };
    let applied = {
        let mut cloud = sim.cloud();
        events::apply(&mut cloud, &ev).inspect(|_| sim.commit(&cloud))
    };
    match applied {
        Ok(what) => {
            tracing::info!(event = %what, "out-of-band event");
            // Answer once the VMs reflect it (a crashed VM's processes are gone), so whoever caused it sees it.
            let fabric = sim.fabric.clone();
            let settled = tokio::task::spawn_blocking(move || fabric.settle(SETTLE))
                .await
                .unwrap_or(false);
            if !settled {
                tracing::warn!(event = %what, "the VMs did not reflect the event within {SETTLE:?}");
            }
            Json(json!({"result": what})).into_response()
        }
        Err(e) => bad(StatusCode::NOT_FOUND, e),
    }
}
