//! `make test` lints the workspace inside its one test build (`scripts/with-clippy`), not with a separate
//! `cargo clippy`. This checks that mechanism on a crate of its own, built the way nextest builds the workspace
//! (`cargo test --no-run`, which also compiles examples): a clippy lint or a compiler warning in each kind of
//! target fails the build, and the same crate builds without the script, so the failures come from it. The
//! interface it relies on (clippy-driver reading `CLIPPY_ARGS`) is clippy's own, not a stable one: a toolchain that
//! changes it fails here rather than letting `make test` pass unlinted code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// A lint clippy warns about by default (so only `-D warnings` makes it an error), in a function of its own.
const LINTED: &str = "pub fn linted() -> u32 {\n    return 1;\n}\n";

/// A one-crate workspace with a library (and its unit tests), an integration test and an example, each of which
/// can be given `LINTED`.
struct Sample {
    _dir: tempfile::TempDir,
    krate: PathBuf,
    target: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Nowhere,
    Library,
    UnitTest,
    IntegrationTest,
    Example,
    /// A plain compiler warning (an unused variable) in the library, which `-D warnings` also refuses.
    CompilerWarning,
}

impl Sample {
    fn new() -> Sample {
        let dir = tempfile::tempdir().unwrap();
        let krate = dir.path().join("sample");
        std::fs::create_dir_all(krate.join("src")).unwrap();
        std::fs::create_dir_all(krate.join("tests")).unwrap();
        std::fs::create_dir_all(krate.join("examples")).unwrap();
        std::fs::write(
            krate.join("Cargo.toml"),
            "[package]\nname = \"lint-sample\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
        )
        .unwrap();
        let target = dir.path().join("target");
        Sample {
            _dir: dir,
            krate,
            target,
        }
    }

    /// Writes the crate's files with the defect at `place` (and only there).
    fn write(&self, place: Place) {
        // `text` where the defect goes, nothing elsewhere.
        let at = |p: Place, text: &'static str| if place == p { text } else { "" };
        let warned = "pub fn warned() {\n    let unused = 1;\n}\n";
        let lib = format!(
            "pub fn one() -> u32 {{\n    1\n}}\n{}{}\n#[cfg(test)]\nmod tests {{\n    {}\n    #[test]\n    \
             fn one_is_one() {{\n        assert_eq!(super::one(), 1);\n    }}\n}}\n",
            at(Place::Library, LINTED),
            at(Place::CompilerWarning, warned),
            at(Place::UnitTest, LINTED),
        );
        let test = format!(
            "{}\n#[test]\nfn one() {{\n    assert_eq!(lint_sample::one(), 1);\n}}\n",
            at(Place::IntegrationTest, LINTED)
        );
        let example = format!(
            "{}\nfn main() {{\n    println!(\"{{}}\", lint_sample::one());\n}}\n",
            at(Place::Example, LINTED)
        );
        for (file, text) in [
            ("src/lib.rs", lib),
            ("tests/it.rs", test),
            ("examples/ex.rs", example),
        ] {
            std::fs::write(self.krate.join(file), text).unwrap();
        }
    }

    /// `cargo test --no-run` of the sample, through `scripts/with-clippy` or plainly. The variables the script sets
    /// are removed first: `make test` runs this test under the script, and the plain build must not inherit them.
    fn build(&self, with_clippy: bool) -> Output {
        let mut cmd = if with_clippy {
            let mut c = Command::new("bash");
            c.arg(root().join("scripts/with-clippy")).arg(cargo());
            c
        } else {
            Command::new(cargo())
        };
        cmd.args(["test", "--no-run", "--offline", "--quiet"])
            .current_dir(&self.krate)
            .env("CARGO_TARGET_DIR", &self.target)
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CLIPPY_ARGS")
            .env_remove("RUSTFLAGS")
            .output()
            .expect("cargo runs")
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_lint_in_any_target_fails_the_test_build_made_with_the_script() {
    let sample = Sample::new();
    sample.write(Place::Nowhere);
    let clean = sample.build(true);
    assert!(
        clean.status.success(),
        "the clean sample must build with the script: {}",
        stderr(&clean)
    );
    for (place, what) in [
        (Place::Library, "clippy::needless_return"),
        (Place::UnitTest, "clippy::needless_return"),
        (Place::IntegrationTest, "clippy::needless_return"),
        (Place::Example, "clippy::needless_return"),
        (Place::CompilerWarning, "unused variable"),
    ] {
        sample.write(place);
        let out = sample.build(true);
        assert!(
            !out.status.success(),
            "a defect in {place:?} built with scripts/with-clippy"
        );
        let err = stderr(&out);
        assert!(
            err.contains(what) && err.contains("error"),
            "the build with the defect in {place:?} must fail naming `{what}`: {err}"
        );
    }
}

#[test]
fn without_the_script_the_same_lint_builds() {
    let sample = Sample::new();
    sample.write(Place::Library);
    let out = sample.build(false);
    assert!(
        out.status.success(),
        "a clippy lint is not a compiler error, so the sample must build without the script: {}",
        stderr(&out)
    );
}
