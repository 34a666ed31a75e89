//! Operations: every mutation returns one at PENDING; a driver task moves it to RUNNING and DONE after the
//! kind's latency, applying its transitions. State lives in the `Cloud`, so a restart resumes in-flight ops.

pub mod model;

use crate::api::error::reason_phrase;
use crate::app::Sim;
use crate::faults::Effect;
use crate::state::{Cloud, catalog, ids};
use model::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Where an operation lives: its collection is `zoneOperations`, `regionOperations` or `globalOperations`.
#[derive(Clone, Debug, PartialEq)]
pub enum Scope {
    Zone(String),
    Region(String),
    Global,
}

impl Scope {
    /// Relative path of the scope's operations collection.
    pub fn ops_prefix(&self, project: &str) -> String {
        match self {
            Scope::Zone(z) => format!("projects/{project}/zones/{z}/operations/"),
            Scope::Region(r) => format!("projects/{project}/regions/{r}/operations/"),
            Scope::Global => format!("projects/{project}/global/operations/"),
        }
    }
}

/// What a mutating handler hands back: the operation to create.
#[derive(Clone, Debug)]
pub struct OpSpec {
    pub scope: Scope,
    /// `insert`, `delete`, `setMetadata`...
    pub op_type: &'static str,
    /// Relative path of the target resource.
    pub target: String,
    pub target_id: String,
    pub on_running: Transition,
    pub on_done: Transition,
}

/// The operation-level outcome failpoints decided for one accepted mutation.
#[derive(Default)]
pub struct Planned {
    pub failure: Option<(String, Option<String>)>,
    pub stall: bool,
    pub extra: Duration,
}

impl Planned {
    pub fn from_effects(effects: Vec<Effect>) -> Self {
        let mut p = Planned::default();
        for e in effects {
            match e {
                Effect::Fail { code, message } => p.failure = Some((code, message)),
                Effect::Stall => p.stall = true,
                Effect::Delay { ms } => p.extra += Duration::from_millis(ms),
                Effect::Status { .. } => {}
            }
        }
        p
    }
}

/// GCE's wording for the operation error codes the sim injects.
pub fn failure(code: &str, message: Option<String>, project: &str, scope: &Scope) -> OpFailure {
    let (region, zone) = match scope {
        Scope::Zone(z) => (
            catalog::region_of(z).unwrap_or("global").to_string(),
            z.clone(),
        ),
        Scope::Region(r) => (r.clone(), format!("{r}-b")),
        Scope::Global => ("global".to_string(), "global".to_string()),
    };
    let (http, default_msg, details) = match code {
        "QUOTA_EXCEEDED" => (
            403,
            format!("Quota 'CPUS' exceeded.  Limit: 8.0 in region {region}."),
            vec![
                json!({"quotaInfo": {"metricName": "compute.googleapis.com/cpus", "limitName": "CPUS-per-project-region",
                "dimensions": {"region": region}, "limit": 8.0}}),
            ],
        ),
        "ZONE_RESOURCE_POOL_EXHAUSTED" | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS" => (
            503,
            format!(
                "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill \
                 the request.  Try a different zone, or try again later."
            ),
            vec![],
        ),
        "CONDITION_NOT_MET" => (
            412,
            "Supplied fingerprint does not match current fingerprint.".into(),
            vec![],
        ),
        "RESOURCE_NOT_READY" => (400, "The resource is not ready".into(), vec![]),
        _ => (400, format!("Operation failed with {code}."), vec![]),
    };
    let message = message.unwrap_or(default_msg);
    let mut details = details;
    details.push(json!({"localizedMessage": {"locale": "en-US", "message": message}}));
    OpFailure {
        code: code.to_string(),
        message,
        http_status: http,
        http_message: reason_phrase(http as u16),
        details,
    }
}

/// Creates the operation record for an accepted mutation and returns its key. The caller commits and
/// spawns the driver.
pub fn create(
    sim: &Sim,
    cloud: &mut Cloud,
    project: &str,
    kind: &str,
    spec: OpSpec,
    plan: &Planned,
    request_id: Option<&str>,
) -> String {
    let name = ids::new_operation_name();
    let key = format!("{}{name}", spec.scope.ops_prefix(project));
    let now = ids::now_millis();
    let latency = sim.cfg.latency.of(kind) + plan.extra;
    let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    let (zone, region) = match &spec.scope {
        Scope::Zone(z) => (
            Some(sim.links.url(&format!("projects/{project}/zones/{z}"))),
            None,
        ),
        Scope::Region(r) => (
            None,
            Some(sim.links.url(&format!("projects/{project}/regions/{r}"))),
        ),
        Scope::Global => (None, None),
    };
    let failure = plan
        .failure
        .as_ref()
        .map(|(c, m)| failure(c, m.clone(), project, &spec.scope));
    let op = Operation {
        kind: "compute#operation".into(),
        id: ids::new_id(),
        name,
        zone,
        region,
        operation_type: spec.op_type.to_string(),
        target_link: sim.links.url(&spec.target),
        target_id: spec.target_id,
        status: "PENDING".into(),
        progress: 0,
        insert_time: ids::rfc3339(now),
        start_time: None,
        end_time: None,
        user: "ha-sim@ha-sim.iam.gserviceaccount.com".into(),
        self_link: sim.links.url(&key),
        client_operation_id: request_id.map(str::to_string),
        error: None,
        http_error_status_code: None,
        http_error_message: None,
    };
    // A tenth of the latency PENDING, the rest RUNNING: both states are observable by a polling client.
    let rec = OpRecord {
        op,
        kind: kind.to_string(),
        run_at: now + latency_ms / 10,
        done_at: now + latency_ms,
        on_running: if failure.is_some() {
            Transition::Nothing
        } else {
            spec.on_running
        },
        on_done: if failure.is_some() {
            Transition::Nothing
        } else {
            spec.on_done
        },
        failure,
        stalled: plan.stall,
    };
    cloud.operations.insert(key.clone(), rec);
    if let Some(rid) = request_id {
        cloud
            .request_ids
            .insert(format!("{project}/{rid}"), key.clone());
    }
    key
}

/// What an operation's driver does after a step.
enum Next {
    /// Sleep this long, then step again.
    After(Duration),
    /// Stalled by a failpoint: wait until failpoints are cleared.
    Parked,
    /// DONE or gone: nothing more to do.
    Finished,
}

/// Moves one operation forward if it is due, and says what the driver does next. Decided under the cloud's lock,
/// so a clear of failpoints lands either before (the operation is not stalled) or after (the driver's watch sees
/// it): the driver never mistakes an operation released meanwhile for a finished one and leaves it RUNNING.
fn step(sim: &Sim, key: &str) -> Next {
    let mut cloud = sim.cloud();
    let now = ids::now_millis();
    let Some(rec) = cloud.operations.get(key).cloned() else {
        return Next::Finished;
    };
    let wait = |at: u64| Next::After(Duration::from_millis(at.saturating_sub(now)));
    match rec.op.status.as_str() {
        "PENDING" if now < rec.run_at => wait(rec.run_at),
        "PENDING" => {
            cloud.apply(&rec.on_running);
            if let Some(r) = cloud.operations.get_mut(key) {
                r.op.status = "RUNNING".into();
                r.op.start_time = Some(ids::rfc3339(now));
            }
            sim.commit(&cloud);
            wait(rec.done_at)
        }
        "RUNNING" if rec.stalled => Next::Parked,
        "RUNNING" if now < rec.done_at => wait(rec.done_at),
        "RUNNING" => {
            cloud.apply(&rec.on_done);
            if let Some(r) = cloud.operations.get_mut(key) {
                r.op.status = "DONE".into();
                r.op.progress = 100;
                r.op.end_time = Some(ids::rfc3339(now));
                if let Some(f) = &r.failure {
                    r.op.error = Some(OpErrorBody {
                        errors: vec![OpErrorItem {
                            code: f.code.clone(),
                            message: f.message.clone(),
                            location: None,
                            error_details: f.details.clone(),
                        }],
                    });
                    r.op.http_error_status_code = Some(f.http_status);
                    r.op.http_error_message = Some(f.http_message.clone());
                }
            }
            sim.commit(&cloud);
            Next::Finished
        }
        _ => Next::Finished,
    }
}

/// Drives an operation to DONE. Stalled operations park until failpoints are cleared.
pub fn spawn_driver(sim: Arc<Sim>, key: String) {
    tokio::spawn(async move {
        // Watched before the first step, so a clear after any step that parks is seen.
        let mut cleared = sim.watch_faults_cleared();
        loop {
            match step(&sim, &key) {
                Next::After(d) => tokio::time::sleep(d).await,
                Next::Parked => {
                    if cleared.changed().await.is_err() {
                        return;
                    }
                }
                Next::Finished => return,
            }
        }
    });
}

/// Restarts drivers for operations that were in flight when the sim last stopped. Failpoints do not survive a
/// restart, so operations they stalled are released.
pub fn resume_all(sim: &Arc<Sim>) {
    {
        let mut cloud = sim.cloud();
        cloud
            .operations
            .values_mut()
            .for_each(|r| r.stalled = false);
    }
    let keys: Vec<String> = sim
        .cloud()
        .operations
        .iter()
        .filter(|(_, r)| !r.is_done())
        .map(|(k, _)| k.clone())
        .collect();
    for k in keys {
        spawn_driver(sim.clone(), k);
    }
}
