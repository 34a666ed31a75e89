//! What the structural tests share: finding the workspace's crates and their source files on disk.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every crate's `src/` folder in the workspace: the folders holding a `Cargo.toml`, outside build and tool output.
fn crate_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
        out.push(dir.join("src"));
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() && !name.starts_with('.') && name != "target" && name != "src" {
            crate_sources(&p, out);
        }
    }
}

/// Every crate's `src/` folder in the workspace at `root`, failing when the walk finds too few to be the workspace.
pub fn workspace_sources(root: &Path) -> Vec<PathBuf> {
    let mut sources = Vec::new();
    crate_sources(root, &mut sources);
    assert!(
        sources.len() >= 10,
        "found only {} crates under {}: the walk is broken",
        sources.len(),
        root.display()
    );
    sources
}
