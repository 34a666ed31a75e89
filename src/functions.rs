//! Provider-defined functions, so users can write their own preconditions:
//! `provider::ha::quorum(n)` and `provider::ha::fault_tolerance(n)`.

use std::sync::Arc;

use tfplugin_framework::function::{FunctionHandle, NumberFunction};

use ha_domain::quorum;

fn count(args: &[f64]) -> Result<u64, (String, usize)> {
    let n = args
        .first()
        .copied()
        .ok_or_else(|| ("a member count is required".to_string(), 0))?;
    if n < 0.0 || n.fract() != 0.0 || n > 1_000_000.0 {
        return Err((
            format!("{n} is not a member count: use a whole number of replicas, 0 or more"),
            0,
        ));
    }
    Ok(n as u64)
}

pub fn all() -> Vec<FunctionHandle> {
    vec![
        Arc::new(NumberFunction {
            name: "quorum",
            summary: "Members etcd needs for a majority",
            description: "Returns ⌊n/2⌋+1: how many of `n` etcd members must be up for the control plane to \
                          work.",
            params: &[("n", "The number of replicas (etcd members).")],
            call: |args| count(args).map(|n| quorum::quorum(n) as f64),
        }),
        Arc::new(NumberFunction {
            name: "fault_tolerance",
            summary: "Members etcd can lose and keep working",
            description: "Returns `n - quorum(n)`: how many of `n` etcd members may fail. Note that 2 \
                          tolerates 0, like 1.",
            params: &[("n", "The number of replicas (etcd members).")],
            call: |args| count(args).map(|n| quorum::fault_tolerance(n) as f64),
        }),
    ]
}
