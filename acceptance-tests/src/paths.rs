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

/// Scratch space for mirrors, workspaces and sims: `HA_ACCEPTANCE_WORK_DIR` when set; else a folder of this
/// checkout's own in `/dev/shm` when that is a memory file system with room; else `.work/acceptance` (git-ignored,
/// removed by `make clean-work`).
///
/// Why memory: every sim VM's etcd fsyncs its WAL, and the sim writes its state behind each change. On the
/// disk, drift and ca_rotation took 193 s of wall time and 345 CPU-seconds on two cores; in `/dev/shm`, 160 s
/// and 294 (docs/benchmarks.md, "Test suite"). A kept workspace's path is printed in full by the failure that
/// kept it; `make clean-work` removes both places.
pub fn work_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        std::env::var_os("HA_ACCEPTANCE_WORK_DIR")
            .map(PathBuf::from)
            .or_else(in_memory_work_dir)
            .unwrap_or_else(|| repo_root().join(".work").join("acceptance"))
    });
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir.clone()
}

/// Room to spare for a whole `make test`: each etcd member preallocates a 64 MB WAL, failed scenarios keep their
/// sims, and the mirrors stay (0.5 GB at the end of the clean-clone run in docs/benchmarks.md).
const MEMORY_ROOM: u64 = 8 << 30;

/// `/dev/shm/ha-acceptance-<checkout>`, when `/dev/shm` is a tmpfs with [`MEMORY_ROOM`] free. Named by a hash of
/// the checkout's path, so two checkouts (a clean clone beside a working one) never share mirrors or sims.
fn in_memory_work_dir() -> Option<PathBuf> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let shm = Path::new("/dev/shm");
    let path = std::ffi::CString::new("/dev/shm").ok()?;
    // SAFETY: `statfs` is plain old data, for which all-zero bytes are a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and an out-parameter of the type the call fills.
    if unsafe { libc::statfs(path.as_ptr(), &mut fs) } != 0 {
        return None;
    }
    let free = fs.f_bavail.saturating_mul(u64::try_from(fs.f_bsize).ok()?);
    if fs.f_type != TMPFS_MAGIC || free < MEMORY_ROOM {
        return None;
    }
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(repo_root().as_os_str().as_encoded_bytes());
    Some(shm.join(format!("ha-acceptance-{}", &hex::encode(digest)[..12])))
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
