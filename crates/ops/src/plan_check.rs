//! Plan-time judgements that need the running cluster (a recovery, a restore, starting empty): one way to reach it
//! from the spec in state and one patience for all of them, so the resources only turn the answer into a
//! diagnostic and no check of a plan waits longer than another.

use std::time::Duration;

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::Result;
use super::spec::Spec;
use ha_settings::Settings;

/// How long a plan-time check may wait on Compute, etcd and the backup bucket before it says it could not judge:
/// long enough for members still electing a leader, short enough that a plan against a cluster that does not
/// answer fails in minutes rather than at the apply's timeout.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Reaches the cluster `spec` describes and asks `judge` about it, with [`PATIENCE`] from now as its deadline.
pub async fn judge<T>(
    settings: &Settings,
    spec: Result<Spec>,
    judge: impl AsyncFnOnce(&ClusterCtx, Instant) -> Result<T>,
) -> Result<T> {
    let ctx = ClusterCtx::new(settings, spec?).await?;
    judge(&ctx, Instant::now() + PATIENCE).await
}
