//! projects.get: the project's number-derived default service account, which an instance's `default` becomes
//! (`instance_build::service_accounts`) and which IAM bindings must name.

use super::error::ApiResult;
use super::{Handler, Req, Route};
use crate::app::Sim;
use crate::state::Cloud;
use serde_json::{Value, json};

pub const ROUTES: &[Route] = &[Route {
    method: "GET",
    pattern: "",
    api: "projects.get",
    handler: Handler::Read(get_project),
}];

/// The project's resource: its id, number and default service account (GCE answers with quotas and usage too;
/// no caller here reads them).
fn get_project(_: &Sim, _: &Cloud, req: &Req) -> ApiResult<Value> {
    let number = project_number(&req.project);
    Ok(json!({
        "kind": "compute#project",
        "id": number.to_string(),
        "name": req.project,
        "selfLink": format!("https://www.googleapis.com/compute/v1/projects/{}", req.project),
        "defaultServiceAccount": default_service_account(&req.project),
        "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
    }))
}

/// `<project number>-compute@developer.gserviceaccount.com`.
pub fn default_service_account(project: &str) -> String {
    format!(
        "{}-compute@developer.gserviceaccount.com",
        project_number(project)
    )
}

/// A stable 12-digit project number for a project id (GCE's numbers are opaque; this one only has to stay the same).
pub(crate) fn project_number(project: &str) -> u64 {
    let h = project.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    100_000_000_000 + h % 900_000_000_000
}
