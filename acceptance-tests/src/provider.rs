//! Facts about the provider under test: its addresses, its version and where its release binary is.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::paths::{repo_root, target_dir};

/// The provider's local name in configurations.
pub const PROVIDER_TYPE: &str = "ha";
/// Registry namespace.
pub const NAMESPACE: &str = "hamaster";
/// The short source users write in `required_providers`. Each client expands it with its own default registry
/// host (see `Client::registry_host`), so the mirror and the lock file cover both hosts.
pub const SOURCE: &str = "hamaster/ha";
/// Both registry hosts the short source can expand to.
pub const REGISTRY_HOSTS: [&str; 2] = ["registry.terraform.io", "registry.opentofu.org"];
/// Env var that points the harness at a provider binary other than `target/release/terraform-provider-ha`.
pub const PROVIDER_BIN_ENV: &str = "HA_PROVIDER_BIN";

/// `terraform { required_providers { ... } }` for the provider; configs without one would resolve `ha` to
/// hashicorp/ha.
pub const REQUIRED_PROVIDERS: &str = r#"terraform {
  required_providers {
    ha = {
      source = "hamaster/ha"
    }
  }
}
"#;

/// Full address for a registry host, e.g. `registry.terraform.io/hamaster/ha`.
pub fn provider_address(host: &str) -> String {
    format!("{host}/{NAMESPACE}/{PROVIDER_TYPE}")
}

/// The provider version: the root Cargo.toml's `[package] version`, which is what the binary reports and what
/// the mirror directory must be named after.
pub fn provider_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let path = repo_root().join("Cargo.toml");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        package_version(&text)
            .unwrap_or_else(|| panic!("no [package] version in {}", path.display()))
    })
}

/// The `version = "..."` line of the `[package]` table. A line scan is enough for our own manifest and avoids a
/// TOML parser dependency.
fn package_version(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(rest) = line.strip_prefix("version") {
            let value = rest.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_string());
        }
    }
    None
}

/// Terraform's name for this machine's platform, e.g. `linux_amd64`: the mirror's last directory level.
pub fn platform() -> String {
    let os = std::env::consts::OS;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{os}_{arch}")
}

/// The release binary of the provider. The harness never builds it: the test command does that once (`make
/// build`, or `cargo build --release -p terraform-provider-ha`), so that parallel test binaries don't race or
/// repeat a slow LTO build. `HA_PROVIDER_BIN` overrides the path.
///
/// A relative `HA_PROVIDER_BIN` is taken from the repository root, since cargo runs tests in the package dir.
pub fn provider_binary() -> PathBuf {
    let path = match std::env::var_os(PROVIDER_BIN_ENV) {
        Some(p) => repo_root().join(p),
        None => target_dir().join("release").join("terraform-provider-ha"),
    };
    assert!(
        path.is_file(),
        "provider binary {} not found: run `cargo build --release -p terraform-provider-ha` (or `make build`) \
         first, or set {PROVIDER_BIN_ENV}",
        path.display()
    );
    warn_if_stale(&path);
    path
}

/// Env var that points the upgrade test at a previous release's provider binary other than the one
/// `scripts/setup` builds.
pub const PREVIOUS_PROVIDER_BIN_ENV: &str = "HA_PREVIOUS_PROVIDER_BIN";

/// An earlier release the upgrade tests start from. `scripts/build-previous-release` builds each from the commit
/// pinned there into `.tools/<dir>/`: the upgrade test applies with it and plans with this checkout's provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Release {
    /// `PREVIOUS_RELEASE`: the last commit that landed on main.
    Previous,
    /// `LEGACY_RELEASE`: the last release whose masters keep their keys in instance metadata.
    Legacy,
}

impl Release {
    fn dir(self) -> &'static str {
        match self {
            Release::Previous => "previous-release",
            Release::Legacy => "legacy-release",
        }
    }

    fn pin(self) -> &'static str {
        match self {
            Release::Previous => "PREVIOUS_RELEASE",
            Release::Legacy => "LEGACY_RELEASE",
        }
    }

    fn env(self) -> &'static str {
        match self {
            Release::Previous => PREVIOUS_PROVIDER_BIN_ENV,
            Release::Legacy => LEGACY_PROVIDER_BIN_ENV,
        }
    }
}

/// Overrides the binary of [`Release::Legacy`].
pub const LEGACY_PROVIDER_BIN_ENV: &str = "HA_LEGACY_PROVIDER_BIN";

/// The provider of `release`, as `scripts/build-previous-release` (run by `make test`) built it.
pub fn release_provider_binary(release: Release) -> PathBuf {
    let path = match std::env::var_os(release.env()) {
        Some(p) => repo_root().join(p),
        None => repo_root()
            .join(".tools")
            .join(release.dir())
            .join("terraform-provider-ha"),
    };
    assert!(
        path.is_file(),
        "the provider of {} {} not found: run `bash scripts/build-previous-release` (it builds the commit pinned \
         as {}; `make test` runs it first), or set {}",
        release.pin(),
        path.display(),
        release.pin(),
        release.env()
    );
    path
}

/// Testing an old build after editing the provider is an easy mistake, and the harness doesn't build: say so
/// (once per process) when a provider source is newer than the binary.
fn warn_if_stale(binary: &Path) {
    static WARNED: OnceLock<()> = OnceLock::new();
    WARNED.get_or_init(|| {
        let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else { return };
        let root = repo_root();
        let sources = ["src", "framework/src", "tfplugin/src", "Cargo.toml"].map(|p| root.join(p));
        if let Some(newer) = sources.iter().find_map(|p| newer_than(p, built)) {
            eprintln!(
                "warning: {} is older than {}; rebuild with `cargo build --release -p terraform-provider-ha`",
                binary.display(),
                newer.display()
            );
        }
    });
}

/// The first file under `path` modified after `time`.
fn newer_than(path: &Path, time: SystemTime) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_dir() {
        std::fs::read_dir(path)
            .ok()?
            .flatten()
            .find_map(|e| newer_than(&e.path(), time))
    } else {
        meta.modified()
            .ok()
            .filter(|m| *m > time)
            .map(|_| path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_package_version_not_dependency_versions() {
        let manifest =
            "[package]\nname = \"x\"\nversion = \"1.2.3\"\n[dependencies]\nversion = \"9\"\n";
        assert_eq!(package_version(manifest).as_deref(), Some("1.2.3"));
        assert_eq!(package_version("[workspace]\nversion = \"1\"\n"), None);
    }

    #[test]
    fn root_manifest_has_a_version() {
        assert!(!provider_version().is_empty());
    }
}
