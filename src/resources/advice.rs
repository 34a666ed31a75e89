//! What the user reads when an operation fails: the error and its causes, and what to do about it.

use ha_ops::OpError;

/// The error as the user reads it, with what to do when it is a passing failure of a Google Cloud API.
pub(crate) fn with_advice(e: &OpError) -> String {
    let text = e.explain();
    if e.is_transient() {
        format!("{text}\n\n{RUN_AGAIN}")
    } else {
        text
    }
}

/// What to do after a passing failure of the Compute or Secret Manager API: every step observes what exists first.
const RUN_AGAIN: &str = "This is a passing failure of a Google Cloud API, not of your configuration: \
                         run apply again. Everything this apply made is in state or is found again by name, \
                         so the next apply resumes where this one stopped.";
