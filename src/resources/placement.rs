//! The plan-time question "does this zone exist?" (`ha_ops::placement`), as a diagnostic on the attribute that
//! names it. Only a refusal is shown: when Compute Engine cannot be asked (no credentials yet, no network), the plan
//! goes on and the apply meets the problem with the API's own sentence.

use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};

use crate::config::Settings;
use ha_ops::OpError;

pub async fn check(
    settings: &Settings,
    project: &str,
    region: &str,
    zone: Option<&str>,
    attribute: &str,
    diags: &mut Diagnostics,
) {
    match ha_ops::placement::check_location(settings, project, region, zone).await {
        Err(OpError::Refused(summary, detail)) => {
            diags.push(Diagnostic::error(summary, detail).at(AttributePath::attr(attribute)))
        }
        Err(e) => tracing::debug!("could not check zone {zone:?} of region {region} at plan: {e}"),
        Ok(()) => {}
    }
}
