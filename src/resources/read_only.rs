//! A read-only provider's applies are refused before anything is touched (`domain::read_only::apply_refused`):
//! every create, update and delete, and every admin credential minted. Its plans and refreshes read on, saying
//! what they did not look at (`replica_apply::read`, `cluster_apply::read`, `replica_guard::look`).

use tfplugin::diag::Diagnostics;

use crate::config::Settings;

/// True, with the refusal in `diags`, when the provider is read-only; `what` names what was not done.
pub fn refused(
    settings: &Settings,
    what: impl FnOnce() -> String,
    diags: &mut Diagnostics,
) -> bool {
    if !settings.read_only {
        return false;
    }
    let (summary, detail) = ha_domain::read_only::apply_refused(&what());
    diags.error(summary, detail);
    true
}
