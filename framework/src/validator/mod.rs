//! Validators: checks on one attribute's known value, one per file. They run at validate and plan time on known
//! values, and again at apply on values that were unknown at plan, with the same messages.

mod duration;
mod from_fn;
mod map_check;

pub use duration::{
    MAX_DURATION, duration, duration_within, parse_duration, parse_duration_within,
};
pub use from_fn::{FnValidator, string_check};
pub use map_check::{MapCheck, MapProblem, MapValidator, map_check};

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

pub trait Validator: Send + Sync {
    /// Markdown, one sentence, for documentation.
    fn description(&self) -> String;
    /// Called only with known, non-null values.
    fn validate(&self, path: &AttributePath, value: &Value, diags: &mut Diagnostics);
}
