//! The instance a request under `zones/{zone}/instances/{instance}` names, and the zonal operation each of the
//! instance methods (`instances`, `access_configs`, `instance_meta`) returns for it.

use super::Req;
use super::error::{ApiError, ApiResult};
use crate::ops::model::Transition;
use crate::ops::{OpSpec, Scope};
use crate::state::Cloud;
use crate::state::resources::Instance;

/// Relative path of the instance a request names.
pub fn key(req: &Req) -> String {
    format!(
        "projects/{}/zones/{}/instances/{}",
        req.project,
        req.p("zone"),
        req.p("instance")
    )
}

/// The instance a request names, or 404.
pub fn find<'a>(cloud: &'a mut Cloud, req: &Req) -> ApiResult<(String, &'a mut Instance)> {
    let k = key(req);
    match cloud.instances.get_mut(&k) {
        Some(i) => Ok((k, i)),
        None => Err(ApiError::not_found(&k)),
    }
}

/// The operation every instance method returns: zonal, targeting the instance.
pub fn op(
    req: &Req,
    op_type: &'static str,
    key: String,
    id: String,
    on_running: Transition,
    on_done: Transition,
) -> OpSpec {
    OpSpec {
        scope: Scope::Zone(req.p("zone").to_string()),
        op_type,
        target: key,
        target_id: id,
        on_running,
        on_done,
    }
}
