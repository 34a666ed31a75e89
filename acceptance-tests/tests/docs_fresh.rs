//! The reference in docs/ is what `scripts/gen-docs` writes from the provider's schema and examples/ today: a
//! changed description, attribute or example without regenerated docs fails here, naming the page and the
//! command that fixes it.

use std::path::Path;

use acceptance_tests::{provider_binary, repo_root};

/// Every file under `dir`, relative to it.
fn files(dir: &Path, under: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, under, out);
        } else {
            out.push(
                path.strip_prefix(under)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
}

#[test]
fn the_generated_docs_are_up_to_date() {
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/gen-docs"))
        .env("HA_PROVIDER_BIN", provider_binary())
        .env("HA_DOCS_OUT", out.path())
        .output()
        .expect("running scripts/gen-docs");
    assert!(
        run.status.success(),
        "scripts/gen-docs failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let mut generated = Vec::new();
    files(out.path(), out.path(), &mut generated);
    // provider, two resources, a data source, an ephemeral resource and two functions at least.
    assert!(generated.len() >= 7, "gen-docs wrote only {generated:?}");
    for page in &generated {
        let fresh = std::fs::read_to_string(out.path().join(page)).unwrap();
        let kept = std::fs::read_to_string(repo_root().join("docs").join(page)).unwrap_or_default();
        assert!(
            fresh == kept,
            "docs/{page} is not what scripts/gen-docs writes now: run `make build && bash scripts/gen-docs` and commit it"
        );
    }
    // A page whose resource, data source or function is gone is stale too.
    for folder in [
        "resources",
        "data-sources",
        "ephemeral-resources",
        "functions",
    ] {
        let dir = repo_root().join("docs").join(folder);
        for entry in std::fs::read_dir(&dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                let page = format!("{folder}/{}", path.file_name().unwrap().to_string_lossy());
                assert!(
                    generated.contains(&page),
                    "docs/{page} documents something the provider no longer serves: delete it"
                );
            }
        }
    }
}
