//! The layers ARCHITECTURE.md draws are crates (`crates/`), so the compiler checks them: Rust lets a crate name only
//! the crates its manifest lists. This test checks the three things that guarantee rests on:
//! - each layer's manifest lists only the layers below it (`cargo metadata`), and every workspace crate has a layer;
//! - no file reaches into another crate's files by path (`#[path]`, `include!`), the one way around a manifest;
//! - on a copy of `ha-domain`, each way of writing a wrong import really fails to compile.
//!
//! Each checker is shown to fail on the defect it looks for.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use syn::visit::Visit;

/// A layer crate, the workspace crates it may depend on (normal and dev dependencies), and the outside crates it
/// must not.
struct Layer {
    package: &'static str,
    may_use: &'static [&'static str],
    never: &'static [&'static str],
    why: &'static str,
}

/// No Terraform type below the provider crate: both of our protocol crates.
const TERRAFORM: &[&str] = &["tfplugin", "tfplugin-framework"];
const BACKENDS: &[&str] = &[
    "ha-gce",
    "ha-etcd",
    "ha-pki",
    "ha-master",
    "ha-storage",
    "ha-secrets",
];

const LAYERS: &[Layer] = &[
    Layer {
        package: "ha-settings",
        may_use: &[],
        never: TERRAFORM,
        why: "settings are plain values every layer may read",
    },
    Layer {
        package: "ha-domain",
        may_use: &[],
        never: &["tokio", "tfplugin", "tfplugin-framework"],
        why: "domain decides on a snapshot, with no I/O, no clock and no Terraform types",
    },
    Layer {
        package: "ha-pki",
        may_use: &[],
        never: TERRAFORM,
        why: "a backend knows nothing of Terraform or of the decisions above it",
    },
    Layer {
        package: "ha-master",
        may_use: &["ha-pki"],
        never: TERRAFORM,
        why: "a backend knows nothing of Terraform or of the decisions above it",
    },
    Layer {
        package: "ha-gce",
        may_use: &["ha-settings", "ha-sim"],
        never: TERRAFORM,
        why: "a backend knows nothing of Terraform or of the decisions above it",
    },
    Layer {
        package: "ha-etcd",
        may_use: &["ha-settings"],
        never: TERRAFORM,
        why: "a backend knows nothing of Terraform or of the decisions above it",
    },
    Layer {
        package: "ha-storage",
        may_use: &["ha-gce", "ha-settings"],
        never: TERRAFORM,
        why: "storage speaks to Google as the same principal as gce, and to nothing above",
    },
    Layer {
        package: "ha-secrets",
        may_use: &["ha-gce", "ha-settings"],
        never: TERRAFORM,
        why: "secrets speaks to Google as the same principal as gce, and to nothing above",
    },
    Layer {
        package: "ha-ops",
        may_use: &[
            "ha-domain",
            "ha-settings",
            "ha-gce",
            "ha-etcd",
            "ha-pki",
            "ha-master",
            "ha-storage",
            "ha-secrets",
            "ha-sim",
        ],
        never: TERRAFORM,
        why: "ops takes plain values (`ha_ops::context::Spec`, `ha_settings::Settings`), never Terraform's",
    },
    Layer {
        package: "terraform-provider-ha",
        may_use: &[
            "tfplugin",
            "tfplugin-framework",
            "ha-ops",
            "ha-domain",
            "ha-pki",
            "ha-settings",
        ],
        never: &[],
        why: "the provider reaches GCE, etcd and Cloud Storage only through ha-ops",
    },
    Layer {
        package: "tfplugin-framework",
        may_use: &["tfplugin"],
        never: &[],
        why: "the framework knows the protocol and nothing of this provider",
    },
    Layer {
        package: "tfplugin",
        may_use: &[],
        never: &[],
        why: "the protocol knows nothing above it",
    },
    Layer {
        package: "ha-sim",
        may_use: &[],
        never: &[],
        why: "the simulator stands in for Google and depends on no workspace crate, so tests may use it anywhere",
    },
    Layer {
        package: "acceptance-tests",
        may_use: &["ha-ops", "ha-domain", "ha-pki", "tfplugin", "ha-sim"],
        never: &[],
        why: "the scenarios drive the installed binary; they borrow the provider's probe and names, and the sim's fault types",
    },
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// `cargo metadata` of the workspace's own packages.
fn metadata() -> Value {
    let out = Command::new(cargo())
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// What breaks the layer table in `meta`, one sentence each.
fn manifest_violations(meta: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    let ours: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    for p in &packages {
        let name = p["name"].as_str().unwrap_or("?");
        let Some(layer) = LAYERS.iter().find(|l| l.package == name) else {
            found.push(format!(
                "workspace crate {name} has no layer: add it to LAYERS in tests/layering.rs and to ARCHITECTURE.md"
            ));
            continue;
        };
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let dep = d["name"].as_str().unwrap_or("?");
            if d["kind"].as_str() == Some("build") {
                continue;
            }
            if ours.contains(dep) && dep != name && !layer.may_use.contains(&dep) {
                found.push(format!(
                    "{name} depends on {dep}, which is not below it: {}",
                    layer.why
                ));
            }
            if layer.never.contains(&dep) {
                found.push(format!("{name} depends on {dep}: {}", layer.why));
            }
        }
    }
    found
}

#[test]
fn each_layer_crate_depends_only_on_the_layers_below_it() {
    let found = manifest_violations(&metadata());
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The backends are one layer: none of them may reach ha-domain or ha-ops.
    for b in BACKENDS {
        let l = LAYERS.iter().find(|l| l.package == *b).expect("listed");
        assert!(!l.may_use.contains(&"ha-domain") && !l.may_use.contains(&"ha-ops"));
    }
}

#[test]
fn the_manifest_check_finds_each_wrong_dependency() {
    let meta = metadata();
    let with = |package: &str, dep: &str, kind: Value| {
        let mut m = meta.clone();
        for p in m["packages"].as_array_mut().unwrap() {
            if p["name"] == package {
                p["dependencies"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({ "name": dep, "kind": kind }));
            }
        }
        manifest_violations(&m)
    };
    for (package, dep, kind) in [
        ("ha-domain", "ha-ops", Value::Null),
        ("ha-domain", "tokio", Value::Null),
        ("ha-domain", "ha-settings", Value::Null),
        ("ha-gce", "ha-domain", Value::Null),
        ("ha-gce", "tfplugin-framework", Value::Null),
        ("ha-ops", "tfplugin", Value::Null),
        ("terraform-provider-ha", "ha-gce", Value::Null),
        ("terraform-provider-ha", "ha-storage", Value::Null),
        // A test reaching up is still a wrong arrow.
        ("ha-domain", "ha-ops", Value::String("dev".into())),
    ] {
        let found = with(package, dep, kind);
        assert!(
            found
                .iter()
                .any(|f| f.starts_with(&format!("{package} depends on {dep}"))),
            "{package} → {dep} not found: {found:?}"
        );
    }
    let mut m = meta.clone();
    m["packages"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({ "name": "ha-unlisted", "dependencies": [] }));
    assert!(
        manifest_violations(&m)
            .iter()
            .any(|f| f.contains("ha-unlisted has no layer"))
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir()
            && p.file_name()
                .is_some_and(|n| n != "target" && !n.to_string_lossy().starts_with('.'))
        {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Files a source file pulls in by path: `#[path = "…"]` on a module, and `include!`-family macros.
#[derive(Default)]
struct PathReach {
    paths: Vec<String>,
}

impl<'ast> Visit<'ast> for PathReach {
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident("path")
            && let syn::Meta::NameValue(nv) = &a.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            self.paths.push(s.value());
        }
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string());
        if matches!(
            name.as_deref(),
            Some("include" | "include_str" | "include_bytes")
        ) && let Ok(s) = m.parse_body::<syn::LitStr>()
        {
            self.paths.push(s.value());
        }
        syn::visit::visit_macro(self, m);
    }
}

/// The paths in `text` (a file at `file` of the crate at `crate_dir`) that leave the crate's folder.
fn reaches_out(text: &str, file: &Path, crate_dir: &Path) -> Result<Vec<String>, String> {
    let ast = syn::parse_file(text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut v = PathReach::default();
    v.visit_file(&ast);
    let base = file.parent().unwrap_or(crate_dir);
    Ok(v.paths
        .into_iter()
        .filter(|p| !normalize(&base.join(p)).starts_with(normalize(crate_dir)))
        .collect())
}

/// `a/b/../c` → `a/c`, without touching the file system (the path may not exist).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Each workspace crate's folder, and the Rust files that belong to it.
fn crate_files() -> Vec<(PathBuf, Vec<PathBuf>)> {
    let meta = metadata();
    let mut dirs: Vec<PathBuf> = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["manifest_path"].as_str())
        .map(|m| Path::new(m).parent().unwrap().to_path_buf())
        .collect();
    // Longest first, so a file is given to the innermost crate (the root crate's folder holds all the others).
    dirs.sort_by_key(|d| std::cmp::Reverse(d.as_os_str().len()));
    let mut all = Vec::new();
    rust_files(root(), &mut all);
    let mut out: Vec<(PathBuf, Vec<PathBuf>)> = dirs.iter().map(|d| (d.clone(), vec![])).collect();
    for f in all {
        if let Some(i) = dirs.iter().position(|d| f.starts_with(d)) {
            out[i].1.push(f);
        }
    }
    out
}

#[test]
fn no_file_reaches_into_another_crate_by_path() {
    let mut found = Vec::new();
    for (dir, files) in crate_files() {
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            match reaches_out(&text, &f, &dir) {
                Ok(p) => found.extend(p.into_iter().map(|p| format!("{}: {p}", f.display()))),
                Err(e) => found.push(e),
            }
        }
    }
    // tfplugin's test harness is shared with the provider's hostile-input test on purpose: the only way out allowed.
    found.retain(|f| !f.contains("tests/hostile_input.rs: ../tfplugin/tests/support"));
    assert!(
        found.is_empty(),
        "files reaching outside their crate:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_path_check_finds_each_way_out() {
    let dir = root().join("crates/domain");
    let file = dir.join("src/quorum.rs");
    for (text, want) in [
        (
            "#[path = \"../../ops/src/lock.rs\"] mod lock;",
            "../../ops/src/lock.rs",
        ),
        (
            "include!(\"../../gce/src/zones.rs\");",
            "../../gce/src/zones.rs",
        ),
        (
            "const X: &str = include_str!(\"../../../Cargo.toml\");",
            "../../../Cargo.toml",
        ),
        (
            "fn f() { let _ = std::include_bytes!(\"../../ops/src/lib.rs\"); }",
            "../../ops/src/lib.rs",
        ),
    ] {
        assert_eq!(
            reaches_out(text, &file, &dir).unwrap(),
            vec![want.to_string()],
            "{text}"
        );
    }
    let inside =
        "#[path = \"shape/table.rs\"] mod table; const Y: &str = include_str!(\"../Cargo.toml\");";
    assert!(reaches_out(inside, &file, &dir).unwrap().is_empty());
}

/// A workspace of its own holding a copy of ha-domain (with the root's `[workspace.dependencies]` and lock file), so
/// `cargo check` of a changed copy neither touches the real crate nor rebuilds the rest of the workspace.
struct DomainCopy {
    ws: PathBuf,
    target: PathBuf,
}

impl DomainCopy {
    fn new() -> DomainCopy {
        let base = root().join("target/layering-check");
        let ws = base.join("ws");
        let _ = std::fs::remove_dir_all(&ws);
        copy_dir(&root().join("crates/domain"), &ws.join("domain"));
        let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
        let deps = manifest
            .split("[workspace.dependencies]")
            .nth(1)
            .and_then(|rest| rest.split("\n[").next())
            .expect("the root manifest has [workspace.dependencies]");
        std::fs::write(
            ws.join("Cargo.toml"),
            format!("[workspace]\nmembers = [\"domain\"]\nresolver = \"3\"\n\n[workspace.dependencies]{deps}\n"),
        )
        .unwrap();
        std::fs::copy(root().join("Cargo.lock"), ws.join("Cargo.lock")).unwrap();
        DomainCopy {
            ws,
            target: base.join("target"),
        }
    }

    /// `cargo check` of the copy with `extra` added to `src/quorum.rs`: the compiler's errors, or None if it built.
    fn check_with(&self, extra: &str) -> Option<String> {
        let file = self.ws.join("domain/src/quorum.rs");
        let original = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, format!("{original}\n{extra}\n")).unwrap();
        let out = Command::new(cargo())
            .args(["check", "--offline", "--quiet", "--lib"])
            .current_dir(&self.ws)
            .env("CARGO_TARGET_DIR", &self.target)
            .env_remove("RUSTFLAGS")
            // `make test` runs under scripts/with-clippy; the copy is judged by the compiler alone.
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CLIPPY_ARGS")
            .output()
            .expect("cargo check runs");
        std::fs::write(&file, original).unwrap();
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// The wrong imports a structural review added to `domain/quorum.rs` and found passing the old text scan, each
/// now refused by the compiler. (`gce/zones.rs`' are the same paths from a crate whose manifest lists neither
/// ha-ops nor ha-domain nor a Terraform crate, which the manifest test checks; compiling a copy of ha-gce would
/// take minutes for the same answer.)
#[test]
fn each_kind_of_wrong_import_fails_to_compile() {
    let copy = DomainCopy::new();
    if let Some(e) = copy.check_with("") {
        panic!("the unchanged copy of ha-domain does not compile:\n{e}");
    }
    for (name, extra, want) in [
        (
            "a grouped use of two higher layers",
            "#[allow(unused_imports)]\nuse crate::{ops::execute, gce::Compute};",
            "unresolved import",
        ),
        (
            "a use split over two lines",
            "#[allow(unused_imports)]\nuse crate::\n    gce::zones;",
            "unresolved import",
        ),
        (
            "a super chain to the crate root",
            "mod inner {\n    #[allow(unused_imports)]\n    use super::super::ops::lock;\n}",
            "unresolved import",
        ),
        (
            "a Terraform type in a signature",
            "pub fn f(_: tfplugin_framework::Val<String>) {}",
            "tfplugin_framework",
        ),
        (
            "the ops crate by name",
            "#[allow(unused_imports)]\nuse ha_ops::lock;",
            "ha_ops",
        ),
        (
            "a clock",
            "pub fn now() -> tokio::time::Instant { tokio::time::Instant::now() }",
            "tokio",
        ),
    ] {
        let Some(errors) = copy.check_with(extra) else {
            panic!("{name} compiled in ha-domain:\n{extra}");
        };
        assert!(
            errors.contains("error[E04") && errors.contains(want),
            "{name}: the build failed for another reason:\n{errors}"
        );
    }
}
