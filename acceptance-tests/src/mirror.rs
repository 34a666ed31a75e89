//! A local filesystem mirror holding the provider the way a user would install it offline, plus the CLI config
//! and lock file that make a workspace install from it.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::dirhash::hash1;
use crate::lockfile::{LockEntry, render};
use crate::paths::work_dir;
use crate::provider::{
    NAMESPACE, PROVIDER_TYPE, REGISTRY_HOSTS, Release, platform, provider_address, provider_binary,
    provider_version, release_provider_binary,
};

/// A mirror directory with the provider package under both registry hosts, and the package's h1 hash.
#[derive(Debug)]
pub struct Mirror {
    root: PathBuf,
    version: String,
    h1: String,
}

impl Mirror {
    /// The mirror of the release binary, shared by every workspace of this process.
    ///
    /// It lives under `work_dir()/mirrors/<version>-<binary sha256 prefix>`: content-addressed, so test
    /// processes running at once (cargo test, nextest) agree on it, and a rebuilt binary gets a new mirror rather
    /// than breaking the lock files of workspaces still using the old one.
    pub fn shared() -> Arc<Mirror> {
        static SHARED: OnceLock<Arc<Mirror>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let binary = provider_binary();
                let mirrors = work_dir().join("mirrors");
                Arc::new(
                    Mirror::content_addressed(&mirrors, &binary).unwrap_or_else(|e| {
                        panic!(
                            "building the provider mirror from {}: {e}",
                            binary.display()
                        )
                    }),
                )
            })
            .clone()
    }

    /// The mirror of an earlier release's provider, for the upgrade tests: under its own version (the one
    /// `scripts/build-previous-release` recorded beside the binary), in `work_dir()/previous-mirrors`.
    pub fn release(release: Release) -> Arc<Mirror> {
        static MIRRORS: OnceLock<Mutex<HashMap<Release, Arc<Mirror>>>> = OnceLock::new();
        let mut mirrors = MIRRORS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        mirrors
            .entry(release)
            .or_insert_with(|| {
                let binary = release_provider_binary(release);
                let version_file = binary.with_file_name("VERSION");
                let version = std::fs::read_to_string(&version_file)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", version_file.display()));
                let parent = work_dir().join("previous-mirrors");
                Arc::new(
                    Mirror::content_addressed_as(&parent, &binary, version.trim()).unwrap_or_else(
                        |e| panic!("building the mirror of {}: {e}", binary.display()),
                    ),
                )
            })
            .clone()
    }

    /// A mirror of `binary` in `parent/<version>-<sha256 prefix>`, created atomically (built in a temporary
    /// sibling, then renamed) so concurrent processes never see a half-copied package.
    pub fn content_addressed(parent: &Path, binary: &Path) -> io::Result<Mirror> {
        Mirror::content_addressed_as(parent, binary, provider_version())
    }

    /// [`Mirror::content_addressed`] for a binary of another version than this checkout's.
    pub fn content_addressed_as(parent: &Path, binary: &Path, version: &str) -> io::Result<Mirror> {
        let bytes = std::fs::read(binary).map_err(|e| with_path(e, binary))?;
        let version = version.to_string();
        let key = hex::encode(Sha256::digest(&bytes));
        let root = parent.join(format!("{version}-{}", &key[..16]));
        if !root.is_dir() {
            std::fs::create_dir_all(parent).map_err(|e| with_path(e, parent))?;
            let staging = tempfile::Builder::new()
                .prefix(".staging-")
                .tempdir_in(parent)?;
            Mirror::populate(staging.path(), binary, &version)?;
            // Losing the race to another process is fine: its copy is byte-identical.
            if let Err(e) = std::fs::rename(staging.path(), &root)
                && !root.is_dir()
            {
                return Err(with_path(e, &root));
            }
            prune_stale(parent, &root);
        }
        Mirror::open(root, version, true)
    }

    /// A mirror of `binary` in the empty or new directory `root` (e.g. a bench wrapper script).
    pub fn create(root: &Path, binary: &Path) -> io::Result<Mirror> {
        let version = provider_version().to_string();
        Mirror::populate(root, binary, &version)?;
        Mirror::open(root.to_path_buf(), version, false)
    }

    /// Copies (not symlinks: the package is what gets hashed and what users get) the binary to
    /// `<root>/<host>/hamaster/ha/<version>/<os_arch>/terraform-provider-ha_v<version>` for each host.
    fn populate(root: &Path, binary: &Path, version: &str) -> io::Result<()> {
        for host in REGISTRY_HOSTS {
            let dir = package_dir(root, host, version);
            std::fs::create_dir_all(&dir).map_err(|e| with_path(e, &dir))?;
            let dest = dir.join(format!("terraform-provider-{PROVIDER_TYPE}_v{version}"));
            std::fs::copy(binary, &dest).map_err(|e| with_path(e, &dest))?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(())
    }

    /// `content_addressed`: the mirror never changes once renamed into place, so its hash is worked out once and
    /// kept beside it: every test process opens the mirror, and each read and hashed the 111 MB debug package
    /// twice (about a tenth of a second of CPU, over 400 scenario processes a run).
    fn open(root: PathBuf, version: String, content_addressed: bool) -> io::Result<Mirror> {
        let kept = beside(&root, "h1");
        if content_addressed
            && let Ok(h1) = std::fs::read_to_string(&kept)
            && h1.starts_with("h1:")
        {
            return Ok(Mirror { root, version, h1 });
        }
        let h1 = hash1(&package_dir(&root, REGISTRY_HOSTS[0], &version))?;
        // Both hosts hold the same bytes, so one hash serves both lock entries.
        let other = hash1(&package_dir(&root, REGISTRY_HOSTS[1], &version))?;
        if other != h1 {
            return Err(io::Error::other(format!(
                "mirror {} differs between registry hosts",
                root.display()
            )));
        }
        // Written aside and renamed, so a process never reads half a hash; losing the race to another is fine.
        let staging = beside(&root, &format!("h1.{}", std::process::id()));
        if content_addressed && std::fs::write(&staging, &h1).is_ok() {
            let _ = std::fs::rename(&staging, &kept);
        }
        Ok(Mirror { root, version, h1 })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// The package's `h1:` hash as `init` computes it.
    pub fn h1(&self) -> &str {
        &self.h1
    }

    /// The unpacked package directory for a registry host.
    pub fn package_dir(&self, host: &str) -> PathBuf {
        package_dir(&self.root, host, &self.version)
    }

    /// A CLI config installing our provider only from this mirror (under either registry host) and everything
    /// else the usual way (nothing else is needed offline: terraform_data is built in).
    pub fn cli_config(&self) -> String {
        let addresses: Vec<String> = REGISTRY_HOSTS
            .iter()
            .map(|h| format!("{:?}", provider_address(h)))
            .collect();
        let list = addresses.join(", ");
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = {:?}\n    include = [{list}]\n  }}\n  \
             direct {{\n    exclude = [{list}]\n  }}\n}}\n",
            self.root.display().to_string()
        )
    }

    /// A lock file pinning this mirror's package under both registry hosts.
    pub fn lock_file(&self) -> String {
        self.lock_file_with_hashes(std::slice::from_ref(&self.h1))
    }

    /// A lock file recording arbitrary hashes (e.g. a wrong one, to see init refuse the package).
    pub fn lock_file_with_hashes(&self, hashes: &[String]) -> String {
        let entries: Vec<LockEntry> = REGISTRY_HOSTS
            .iter()
            .map(|host| LockEntry {
                address: provider_address(host),
                version: self.version.clone(),
                hashes: hashes.to_vec(),
            })
            .collect();
        render(&entries)
    }
}

/// Mirrors of earlier builds are only useful to test runs still going; after an hour none are. Without this,
/// every rebuild of the provider would leave two more copies of it behind.
fn prune_stale(parent: &Path, keep: &Path) {
    const STALE: Duration = Duration::from_secs(3600);
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE);
        if path != keep && path != beside(keep, "h1") && old {
            // Best effort: a mirror another process removed first, or can't be removed, is not our problem.
            let _ = match path.is_dir() {
                true => std::fs::remove_dir_all(&path),
                false => std::fs::remove_file(&path),
            };
        }
    }
}

/// `dir` with `.suffix` added to its name (its own name has dots: `0.1.0-<sha256 prefix>`).
fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.as_os_str().to_os_string();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

fn package_dir(root: &Path, host: &str, version: &str) -> PathBuf {
    root.join(host)
        .join(NAMESPACE)
        .join(PROVIDER_TYPE)
        .join(version)
        .join(platform())
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
