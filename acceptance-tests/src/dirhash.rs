//! Terraform's `h1:` package hash, so the harness can write a lock file that `init` verifies instead of trusting
//! the package on first use.
//!
//! h1 is Go's `golang.org/x/mod/sumdb/dirhash.Hash1` over the unpacked package directory: for every regular
//! file, sorted by its slash-separated path relative to the directory, the line `"<sha256 hex>  <path>\n"`; the
//! hash is `"h1:" + base64(sha256(all lines))` with standard, padded base64.

use std::io;
use std::path::Path;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// h1 hash of the directory `dir`.
pub fn hash1(dir: &Path) -> io::Result<String> {
    let mut files = Vec::new();
    collect_files(dir, "", &mut files)?;
    // Go's sort.Strings compares bytes, as does Ord for String.
    files.sort();
    let mut summary = String::new();
    for name in &files {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).map_err(|e| annotate(e, &path))?;
        if name.contains('\n') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("file name with newline: {name:?}"),
            ));
        }
        summary.push_str(&format!(
            "{}  {name}\n",
            hex::encode(Sha256::digest(&bytes))
        ));
    }
    let digest = Sha256::digest(summary.as_bytes());
    Ok(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    ))
}

fn collect_files(dir: &Path, prefix: &str, out: &mut Vec<String>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| annotate(e, dir))? {
        let entry = entry?;
        let name = entry.file_name().into_string().map_err(|n| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("non-UTF-8 file name {n:?} in {}", dir.display()),
            )
        })?;
        let rel = format!("{prefix}{name}");
        // Like filepath.Walk, follow the directory structure but hash what a symlink to a file points at.
        if entry.file_type()?.is_dir() {
            collect_files(&entry.path(), &format!("{rel}/"), out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

fn annotate(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answer computed independently (Python: sha256sum lines, then sha256 + base64), covering sorting
    /// and a subdirectory.
    #[test]
    fn matches_go_dirhash_hash1() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.txt"), "bee\n").unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a").join("x"), "").unwrap();
        assert_eq!(hash1(dir.path()).unwrap(), expected_for_fixture());
    }

    fn expected_for_fixture() -> &'static str {
        // printf '%s  a/x\n%s  b.txt\n' $(printf '' | sha256sum | cut -c1-64) $(printf 'bee\n' | sha256sum | cut -c1-64)
        //   | sha256sum | xxd -r -p | base64
        "h1:LTOXAGquknH0+RbEu/cN/MGWLsamP7tDGtGJ7fOSUQo="
    }
}
