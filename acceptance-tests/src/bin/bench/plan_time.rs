//! Wall time of `plan` (from empty state) for the provider's resources against the same shape built from
//! terraform_data, which needs no provider process: the ratio is the provider's overhead.

use acceptance_tests::{Client, Workspace};

pub struct Timing {
    pub subject_secs: f64,
    pub baseline_secs: f64,
}

impl Timing {
    pub fn ratio(&self) -> f64 {
        self.subject_secs / self.baseline_secs
    }
}

/// Medians over `runs` plans of each, alternating the two so drift in machine load hits both alike, after one
/// discarded warm-up plan each (page cache, first-run costs).
pub fn compare(
    client: Client,
    subject: &str,
    baseline: &str,
    runs: usize,
) -> Result<Timing, String> {
    let subject_ws = workspace(client, "bench-plan-subject", subject)?;
    let baseline_ws = workspace(client, "bench-plan-baseline", baseline)?;
    let (mut subject_secs, mut baseline_secs) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        let s = plan_secs(&subject_ws)?;
        let b = plan_secs(&baseline_ws)?;
        if run > 0 {
            subject_secs.push(s);
            baseline_secs.push(b);
        }
    }
    Ok(Timing {
        subject_secs: crate::median(subject_secs),
        baseline_secs: crate::median(baseline_secs),
    })
}

fn workspace(client: Client, name: &str, config: &str) -> Result<Workspace, String> {
    let ws = Workspace::new(client, name);
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
