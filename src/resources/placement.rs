//! The plan-time questions "does this zone exist?", "does it offer this machine type?" and "does this image
//! exist?" (`ha_ops::placement`), as
//! a diagnostic on the attribute that names it. Only a refusal is shown: when Compute Engine cannot be asked (no credentials yet, no network), the plan
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

/// A predefined machine type that `zone` does not offer, refused at `at`.
pub async fn check_machine_type(
    settings: &Settings,
    project: &str,
    zone: &str,
    machine_type: &str,
    at: AttributePath,
    diags: &mut Diagnostics,
) {
    match ha_ops::placement::check_machine_type(settings, project, zone, machine_type).await {
        Err(OpError::Refused(summary, detail)) => {
            diags.push(Diagnostic::error(summary, detail).at(at))
        }
        Err(e) => tracing::debug!(
            "could not ask about machine type {machine_type} in {zone} at plan: {e}"
        ),
        Ok(()) => {}
    }
}

/// An `image` Compute Engine does not have, refused at `at`.
pub async fn check_image(
    settings: &Settings,
    project: &str,
    image: &str,
    at: AttributePath,
    diags: &mut Diagnostics,
) {
    match ha_ops::placement::check_image(settings, project, image).await {
        Err(OpError::Refused(summary, detail)) => {
            diags.push(Diagnostic::error(summary, detail).at(at))
        }
        Err(e) => tracing::debug!("could not ask about image {image} at plan: {e}"),
        Ok(()) => {}
    }
}
