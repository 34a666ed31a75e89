//! Which Compute methods the provider called, across every simulator a test run starts: the evidence for the IAM
//! permission list in docs/guides/gce.md. `scripts/run-tests` sets `HA_SIM_PROVIDER_METHODS` to a directory;
//! each sim process then keeps one file there, `<pid>.txt`, with the sorted API methods (`compute.instances.insert`)
//! of the requests whose `User-Agent` names the provider, so calls made by gcloud or the tests themselves do not
//! count. `scripts/check-iam-permissions` compares the union with the guide.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// The directory to record into, from the environment.
pub const ENV: &str = "HA_SIM_PROVIDER_METHODS";

/// The provider's user agent ends with `terraform-provider-ha/<version>` (see ha-settings, `crates/settings`).
const PROVIDER_AGENT: &str = "terraform-provider-ha/";

struct Record {
    file: PathBuf,
    seen: BTreeSet<String>,
}

/// Process-wide: one sim process serves one API, and the record must outlive no request.
fn record() -> Option<&'static Mutex<Record>> {
    static RECORD: OnceLock<Option<Mutex<Record>>> = OnceLock::new();
    RECORD
        .get_or_init(|| {
            let dir = std::env::var_os(ENV).filter(|d| !d.is_empty())?;
            let dir = PathBuf::from(dir);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), "cannot record the provider's methods: {e}");
                return None;
            }
            Some(Mutex::new(Record {
                file: dir.join(format!("{}.txt", std::process::id())),
                seen: BTreeSet::new(),
            }))
        })
        .as_ref()
}

/// Notes one request; writes the file when a method is seen for the first time (a few dozen writes per process).
pub fn note(api: &str, user_agent: Option<&str>) {
    if api == "compute.unknown" || !user_agent.is_some_and(|ua| ua.contains(PROVIDER_AGENT)) {
        return;
    }
    let Some(record) = record() else { return };
    let mut r = record.lock().unwrap_or_else(|p| p.into_inner());
    if r.seen.insert(api.to_string()) {
        let text: String = r.seen.iter().map(|m| format!("{m}\n")).collect();
        if let Err(e) = std::fs::write(&r.file, text) {
            tracing::warn!(file = %r.file.display(), "cannot record the provider's methods: {e}");
        }
    }
}
