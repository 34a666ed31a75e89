//! Where things are: the repository root, the client binaries, and the git-ignored scratch area.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The workspace root, found from this crate's manifest dir so tests work from any cwd.
pub fn repo_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = manifest
            .parent()
            .expect("acceptance-tests lives inside the workspace");
        root.canonicalize()
            .unwrap_or_else(|e| panic!("canonicalizing repo root {}: {e}", root.display()))
    })
}

/// `.tools/bin`, where `scripts/setup` installs terraform and tofu.
pub fn tools_bin() -> PathBuf {
    repo_root().join(".tools").join("bin")
}

/// `.work/acceptance`: scratch space for mirrors and workspaces. Under the repo (git-ignored, removed by
/// `make clean-work`) rather than /tmp so a workspace kept after a failure is easy to find.
pub fn work_dir() -> PathBuf {
    let dir = repo_root().join(".work").join("acceptance");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// The cargo target dir, honouring CARGO_TARGET_DIR like cargo does.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                repo_root().join(dir)
            }
        }
        None => repo_root().join("target"),
    }
}
