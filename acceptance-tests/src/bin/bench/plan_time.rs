//! Wall time of `plan` (from empty state) of the same 200-resource shape three ways, in one run:
//! - the subject: our `ha_master_replica`s;
//! - the floor: the smallest plugin this repository has (`tfplugin/examples/echo_provider.rs`: one resource with
//!   two string attributes, values echoed without decoding), installed from a mirror exactly as ours is. It
//!   costs what any out-of-process provider costs: process starts, go-plugin handshakes, gRPC over TLS, msgpack;
//! - the baseline: the built-in `terraform_data`, which needs no provider process at all.
//!
//! subject ÷ floor is the target's ratio (#30): what our schema and code add on top of what any plugin pays;
//! floor ÷ baseline says how much any plugin pays against the built-in, and subject ÷ baseline is reported too.

use std::path::Path;
use std::sync::Arc;

use acceptance_tests::{Client, Mirror, Workspace};

pub struct Timing {
    pub subject_secs: f64,
    pub floor_secs: Option<f64>,
    pub baseline_secs: f64,
}

impl Timing {
    pub fn ratio(&self) -> f64 {
        self.subject_secs / self.baseline_secs
    }
}

/// The three configurations, each complete but for `required_providers` where it needs one.
pub struct Shapes<'a> {
    pub subject: &'a str,
    pub floor: Option<(&'a Path, &'a str)>,
    pub baseline: &'a str,
}

/// Medians over `runs` plans of each, interleaved so drift in machine load hits all alike, after one discarded
/// warm-up plan each (page cache, first-run costs).
pub fn compare(client: Client, shapes: &Shapes, runs: usize) -> Result<Timing, String> {
    let subject_ws = workspace(client, "bench-plan-subject", shapes.subject, None)?;
    let baseline_ws = workspace(client, "bench-plan-baseline", shapes.baseline, None)?;
    let floor_ws = match shapes.floor {
        Some((binary, config)) => {
            let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
            let mirror = Mirror::create(&scratch.path().join("mirror"), binary)
                .map_err(|e| format!("mirroring {}: {e}", binary.display()))?;
            let ws = workspace(client, "bench-plan-floor", config, Some(Arc::new(mirror)))?;
            Some((ws, scratch))
        }
        None => None,
    };
    let (mut subject, mut floor, mut baseline) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..=runs {
        let s = plan_secs(&subject_ws)?;
        let f = match &floor_ws {
            Some((ws, _)) => Some(plan_secs(ws)?),
            None => None,
        };
        let b = plan_secs(&baseline_ws)?;
        if run > 0 {
            subject.push(s);
            floor.extend(f);
            baseline.push(b);
        }
    }
    Ok(Timing {
        subject_secs: crate::median(subject),
        floor_secs: (!floor.is_empty()).then(|| crate::median(floor)),
        baseline_secs: crate::median(baseline),
    })
}

fn workspace(
    client: Client,
    name: &str,
    config: &str,
    mirror: Option<Arc<Mirror>>,
) -> Result<Workspace, String> {
    let ws = match mirror {
        Some(m) => Workspace::with_mirror(client, name, m),
        None => Workspace::new(client, name),
    };
    ws.write_main_tf(config);
    let init = ws.run(&["init", "-input=false", "-no-color"]);
    if init.success() {
        Ok(ws)
    } else {
        Err(format!("init failed:\n{init}"))
    }
}

fn plan_secs(ws: &Workspace) -> Result<f64, String> {
    let plan = ws.run(&["plan", "-input=false", "-no-color"]);
    if plan.success() {
        Ok(plan.duration.as_secs_f64())
    } else {
        Err(format!("plan failed:\n{plan}"))
    }
}
