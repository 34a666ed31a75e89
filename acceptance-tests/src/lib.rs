//! Acceptance harness: every scenario runs under real Terraform and real OpenTofu against the release build of
//! the provider, installed the way users install it offline: a filesystem mirror, a CLI config pointing at it,
//! and a lock file whose `h1:` hash `init` must verify.
//!
//! Adding a scenario: a file in `tests/` with
//! ```no_run
//! use acceptance_tests::{Workspace, for_each_client};
//!
//! #[test]
//! fn replica_plans() {
//!     for_each_client(|client| {
//!         let ws = Workspace::new(client, "replica_plans");
//!         ws.write_main_tf(r#"terraform { required_providers { ha = { source = "hamaster/ha" } } }"#);
//!         ws.init();
//!         assert_eq!(ws.plan_detailed_exitcode(), 0);
//!     });
//! }
//! ```
//! and, for configurations that must be rejected, `assert_validation_error(config, &["message"], "ha_x.y.attr")`.
//!
//! The provider binary is not built here: `cargo build --release -p terraform-provider-ha` first, or set
//! `HA_PROVIDER_BIN` (`make test` points it, and `HA_SIM_BIN`, at the binaries of its own test build). Other knobs: `HA_ACCEPTANCE_TIMEOUT_SECS` (per command, default 120),
//! `HA_ACCEPTANCE_TF_LOG` (sets TF_LOG for the clients), `HA_ACCEPTANCE_KEEP` (keep passing workspaces; failing
//! ones are always kept, under `work_dir()`: `/dev/shm/ha-acceptance-<checkout>` or `.work/acceptance/`),
//! `HA_ACCEPTANCE_WORK_DIR` (where they go).

pub mod api_calls;
mod client;
mod command;
mod diagnostics;
mod dirhash;
pub mod gcs;
mod gpg;
mod https_dir;
mod index;
mod lockfile;
mod mirror;
mod network_block;
pub mod openssl;
mod paths;
pub mod probe;
mod provider;
mod sim;
pub mod storage_faults;
pub mod terragrunt;
pub mod vm_etcd;
pub mod voters_down;
pub mod walk;

/// The faults scenarios inject, as ha-sim's own types: out-of-band events and failpoints.
pub mod faults {
    pub use ha_sim::faults::events::Event;
    pub use ha_sim::faults::{Effect, Failpoint, Trigger};
}
mod workspace;

pub use client::{Client, for_each_client};
pub use command::{CmdOutput, normalize_ws};
pub use diagnostics::{AttributePath, Rejection, Stage, assert_validation_error, expect_rejection};
pub use dirhash::hash1;
pub use gcs::FakeGcs;
pub use gpg::ThrowawayKeyring;
pub use https_dir::HttpsDir;
pub use lockfile::{LockEntry, hashes_for, render as render_lock_file};
pub use mirror::Mirror;
pub use paths::{repo_root, tools_bin, work_dir};
pub use provider::{
    LEGACY_PROVIDER_BIN_ENV, NAMESPACE, PREVIOUS_PROVIDER_BIN_ENV, PROVIDER_BIN_ENV, PROVIDER_TYPE,
    REGISTRY_HOSTS, REQUIRED_PROVIDERS, Release, SOURCE, platform, provider_address,
    provider_binary, provider_version, release_provider_binary,
};
pub use sim::{SIM_BIN_ENV, Sim, etcd35_bin, sim_binary};
pub use workspace::Workspace;
