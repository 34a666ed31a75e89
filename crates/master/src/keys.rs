//! Keys out of instance metadata (docs/master-config.md §11): a master's private keys and the kubeconfigs that
//! name them (every file written 0600) travel as one tar, the bundle, which the provider writes to the replica's
//! secret in Secret Manager. `user-data` keeps the public files, plus a fetch script that cloud-init runs first:
//! it reads the secret as the VM's service account, checks the bundle's SHA-256 (which `user-data` names) and
//! unpacks it with its modes and owners.
//!
//! The bundle is deterministic (sorted paths, mtime 0, numeric root owner), so the same keys always make the same
//! digest and a re-render of an unchanged master changes nothing.

use super::k8s::WriteFile;

/// Where `user-data` writes the fetch script.
pub const FETCH_SCRIPT: &str = "/etc/srv/kubernetes/fetch-keys.sh";

/// The script itself: fixed text, so its arguments (in `runcmd`) are all that differs between masters.
pub const FETCH_SCRIPT_TEXT: &str = include_str!("fetch-keys.sh");

/// Files of this mode hold a private key or name one; they go in the bundle, never in `user-data`.
pub(crate) const KEY_MODE: &str = "0600";

/// A master's keys as the provider writes them to Secret Manager. Holds private keys: `Debug` prints only the
/// digest.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyBundle {
    /// A ustar archive of the key files, paths relative to `/`.
    pub tar: Vec<u8>,
    /// Lower-case hex SHA-256 of `tar`, as `sha256sum` prints it.
    pub sha256: String,
}

impl std::fmt::Debug for KeyBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyBundle")
            .field("sha256", &self.sha256)
            .field("bytes", &self.tar.len())
            .finish()
    }
}

/// Whether a rendered file belongs in the bundle.
pub(crate) fn is_key_file(f: &WriteFile) -> bool {
    f.permissions == KEY_MODE
}

/// The bundle of `files` (already filtered by [`is_key_file`]).
pub(crate) fn bundle(files: &[&WriteFile]) -> KeyBundle {
    let mut sorted: Vec<&WriteFile> = files.to_vec();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    for f in sorted {
        let mut header = tar::Header::new_ustar();
        header.set_size(f.content.len() as u64);
        header.set_mode(u32::from_str_radix(&f.permissions, 8).unwrap_or(0o600));
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        let (user, group) = f.owner.split_once(':').unwrap_or((&f.owner, &f.owner));
        // Names first, as GNU tar (run as root) restores owners by name; ids for an image without the name.
        let _ = header.set_username(user);
        let _ = header.set_groupname(group);
        header.set_uid(0);
        header.set_gid(0);
        builder
            .append_data(
                &mut header,
                f.path.trim_start_matches('/'),
                f.content.as_bytes(),
            )
            .expect("appending to an in-memory archive cannot fail for the contract's paths");
    }
    let tar = builder
        .into_inner()
        .expect("an in-memory archive always finishes");
    let sha256 = sha256_hex(&tar);
    KeyBundle { tar, sha256 }
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The files of a bundle, by guest path (with its leading `/`), after checking its digest. Import reads a
/// master's keys back this way.
pub fn unpack(tar_bytes: &[u8], sha256: &str) -> Result<Vec<(String, String)>, String> {
    let got = sha256_hex(tar_bytes);
    if got != sha256 {
        return Err(format!(
            "the key bundle's SHA-256 is {got}, not the {sha256} its user-data names"
        ));
    }
    let mut archive = tar::Archive::new(tar_bytes);
    let mut out = Vec::new();
    for entry in archive
        .entries()
        .map_err(|e| format!("the key bundle is not a tar archive: {e}"))?
    {
        let mut entry = entry.map_err(|e| format!("the key bundle is damaged: {e}"))?;
        let path = entry
            .path()
            .map_err(|e| format!("the key bundle names a bad path: {e}"))?
            .to_string_lossy()
            .into_owned();
        let mut content = String::new();
        std::io::Read::read_to_string(&mut entry, &mut content)
            .map_err(|e| format!("the key bundle's {path} is not text: {e}"))?;
        out.push((format!("/{path}"), content));
    }
    Ok(out)
}
