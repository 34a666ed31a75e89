//! Plans a replacement when the attribute's value changes, for what GCE cannot change in place (a VM's zone).

use tfplugin::value::Value;

use super::{AttrPlanRequest, AttrPlanResponse, PlanModifier};

type Condition = fn(old: &Value, new: &Value) -> bool;

pub struct RequiresReplace {
    condition: Condition,
    why: &'static str,
}

pub fn requires_replace() -> RequiresReplace {
    RequiresReplace {
        condition: |_, _| true,
        why: "",
    }
}

/// Replaces only when `condition(old, new)` says the change cannot be made in place.
pub fn requires_replace_if(condition: Condition, why: &'static str) -> RequiresReplace {
    RequiresReplace { condition, why }
}

impl PlanModifier for RequiresReplace {
    fn description(&self) -> String {
        if self.why.is_empty() {
            "Changing this value replaces the resource.".into()
        } else {
            format!(
                "Changing this value replaces the resource when {}.",
                self.why
            )
        }
    }

    fn modify(&self, req: &AttrPlanRequest<'_>, resp: &mut AttrPlanResponse) {
        // Creating: nothing to replace.
        let Some(old) = req.state else { return };
        // Unknown now: Terraform asks again at apply, when the value is known.
        if resp.planned.is_unknown() {
            if !old.is_null() {
                resp.requires_replace = true;
            }
            return;
        }
        if *old != resp.planned && (self.condition)(old, &resp.planned) {
            resp.requires_replace = true;
        }
    }
}
