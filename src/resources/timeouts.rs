//! Deadlines from the `timeouts` block, with each resource's defaults.

use std::time::Duration;

use tfplugin_framework::Val;
use tfplugin_framework::validator::parse_duration;
use tokio::time::Instant;

use super::Timeouts;

pub enum Op {
    Create,
    Update,
    Delete,
}

/// The deadline for `op`: the user's value if set (validated at plan), else `default`.
pub fn deadline(t: &Val<Timeouts>, op: Op, default: Duration) -> Instant {
    let set = t.known().and_then(|t| match op {
        Op::Create => t.create.known(),
        Op::Update => t.update.known(),
        Op::Delete => t.delete.known(),
    });
    let d = set.and_then(|s| parse_duration(s).ok()).unwrap_or(default);
    Instant::now() + d
}
