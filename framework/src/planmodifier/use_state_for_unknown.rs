//! Keeps a computed value from the prior state instead of showing "(known after apply)" on every update, for
//! values that never change once set (ids, IPs, certificates).

use super::{AttrPlanRequest, AttrPlanResponse, PlanModifier};

pub struct UseStateForUnknown;

pub fn use_state_for_unknown() -> UseStateForUnknown {
    UseStateForUnknown
}

impl PlanModifier for UseStateForUnknown {
    fn description(&self) -> String {
        "Once set, the value does not change unless the resource is replaced.".into()
    }

    fn modify(&self, req: &AttrPlanRequest<'_>, resp: &mut AttrPlanResponse) {
        // Creating: there is no prior value to keep.
        let Some(state) = req.state else { return };
        // Nothing known to keep.
        if state.is_null() || state.is_unknown() {
            return;
        }
        // The user set it: their value wins.
        if !req.config.is_null() {
            return;
        }
        // Only replace the framework's "unknown"; a value a resource planned on purpose stays.
        if resp.planned.is_unknown() {
            resp.planned = state.clone();
        }
    }
}
