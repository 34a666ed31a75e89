//! What the user reads when an operation fails: the error and its causes, and what to do about it.

use ha_ops::OpError;

/// The error as the user reads it, with what to do when it is a passing failure of a Google Cloud API.
pub(crate) fn with_advice(e: &OpError) -> String {
    let text = e.explain();
    if e.ran_out_of_time() {
        format!("{text}\n\n{OUT_OF_TIME}")
    } else if e.is_transient() {
        format!("{text}\n\n{RUN_AGAIN}")
    } else {
        text
    }
}

/// What to do after a passing failure of the Compute or Secret Manager API: every step observes what exists first.
const RUN_AGAIN: &str = "This is a passing failure of a Google Cloud API, not of your configuration: \
                         run apply again. Everything this apply made is in state or is found again by name, \
                         so the next apply resumes where this one stopped.";

/// What to do when a change's timeout ran out under way. The timeout counts from when the change held the cluster's
/// lock (time queued behind sibling replicas is not taken from it), so this is the work's own length.
const OUT_OF_TIME: &str = "The resource's timeout ran out before this step finished (on Compute Engine a \
                           master's rebuild includes its first boot). Raise the resource's `timeouts` \
                           (docs/guides/troubleshooting.md has a rule of thumb) and run apply again: \
                           everything this apply made is in state or is found again by name, so the next apply \
                           resumes where this one stopped.";
