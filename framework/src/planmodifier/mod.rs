//! Plan modifiers: small rules that adjust one attribute's planned value, one per file.

mod requires_replace;
mod use_state_for_unknown;

pub use requires_replace::{RequiresReplace, requires_replace, requires_replace_if};
pub use use_state_for_unknown::{UseStateForUnknown, use_state_for_unknown};

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

/// What a modifier sees for one attribute.
pub struct AttrPlanRequest<'a> {
    pub path: AttributePath,
    /// The value in configuration (null when unset).
    pub config: &'a Value,
    /// The prior state's value; `None` when the resource is being created.
    pub state: Option<&'a Value>,
}

/// What a modifier may change.
pub struct AttrPlanResponse {
    pub planned: Value,
    pub requires_replace: bool,
    pub diagnostics: Diagnostics,
}

pub trait PlanModifier: Send + Sync {
    /// Markdown, one sentence, for documentation.
    fn description(&self) -> String;
    fn modify(&self, req: &AttrPlanRequest<'_>, resp: &mut AttrPlanResponse);
}
