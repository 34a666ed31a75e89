//! The layering ARCHITECTURE.md draws, checked: each layer's source names only the layers below it. A `use` or a
//! path that points the wrong way fails this test with the file and line, so the map cannot drift unnoticed again.
//! (The protocol and framework crates are separate crates, so Cargo already keeps them from naming the provider;
//! `ops::ClusterCtx` keeps its backend clients private to `ops`, so the compiler keeps resources from calling them.)

use std::path::{Path, PathBuf};

/// A layer: the folders (or files) under `src/` it is made of, and the paths its code must never name.
struct Layer {
    name: &'static str,
    dirs: &'static [&'static str],
    forbidden: &'static [&'static str],
    why: &'static str,
}

const LAYERS: &[Layer] = &[
    Layer {
        name: "domain",
        dirs: &["domain"],
        forbidden: &[
            "crate::ops",
            "crate::gce",
            "crate::etcd",
            "crate::pki",
            "crate::master",
            "crate::storage",
            "crate::resources",
            "crate::config",
            "crate::settings",
            "crate::provider",
            "tokio",
            "tfplugin",
        ],
        why: "domain decides on a snapshot, with no I/O, no clock and no Terraform types",
    },
    Layer {
        name: "backends",
        dirs: &["gce", "etcd", "pki", "master", "storage"],
        forbidden: &[
            "crate::ops",
            "crate::domain",
            "crate::resources",
            "crate::config",
            "crate::provider",
            "crate::functions",
            "tfplugin",
        ],
        why: "backends talk to one external system each and know nothing of Terraform or of the decisions above them",
    },
    Layer {
        name: "ops",
        dirs: &["ops"],
        forbidden: &[
            "crate::resources",
            "crate::config",
            "crate::provider",
            "crate::functions",
            "tfplugin",
        ],
        why: "ops takes plain values (`ops::context::Spec`, `settings::Settings`), never Terraform's",
    },
    Layer {
        name: "resources",
        dirs: &["resources"],
        forbidden: &["crate::gce", "crate::etcd", "crate::storage"],
        why: "resources reach GCE, etcd and Cloud Storage only through `ops`",
    },
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a line without its comment (a `//` outside a string literal is near enough here).
fn code_of(line: &str) -> &str {
    let mut in_str = false;
    let bytes = line.as_bytes();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'"' if i == 0 || bytes[i - 1] != b'\\' => in_str = !in_str,
            b'/' if !in_str && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Whether `code` names `path` as a path (not as part of a longer identifier).
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + path.len()..].chars().next();
        let starts = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let ends = after.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        starts && ends
    })
}

fn violations(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for layer in LAYERS {
        let mut files = Vec::new();
        for d in layer.dirs {
            rust_files(&root.join(d), &mut files);
        }
        assert!(
            !files.is_empty(),
            "layer {} has no source files",
            layer.name
        );
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = code_of(line);
                // String literals may mention anything (error messages name attributes and crates).
                let code: String = code.split('"').step_by(2).collect::<Vec<_>>().join("\"\"");
                for bad in layer.forbidden {
                    if names(&code, bad) {
                        found.push(format!(
                            "{}:{}: {} names `{bad}`: {} ({})",
                            f.display(),
                            n + 1,
                            layer.name,
                            line.trim(),
                            layer.why
                        ));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn each_layer_names_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "layering broken:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_a_wrong_import() {
    // The check itself must be able to fail: a domain file that imports ops is reported, a comment is not.
    let dir = std::env::temp_dir().join(format!("layering-{}", std::process::id()));
    let domain = dir.join("domain");
    std::fs::create_dir_all(&domain).unwrap();
    for other in ["gce", "etcd", "pki", "master", "ops", "resources"] {
        std::fs::create_dir_all(dir.join(other)).unwrap();
        std::fs::write(dir.join(other).join("mod.rs"), "// fine\n").unwrap();
    }
    std::fs::write(
        domain.join("bad.rs"),
        "// crate::ops in a comment is fine\nuse crate::ops::execute::Run;\nlet s = \"crate::gce in a string is fine\";\n",
    )
    .unwrap();
    let found = violations(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("bad.rs:2"), "{found:?}");
    assert!(found[0].contains("crate::ops"), "{found:?}");
}
