//! The layering ARCHITECTURE.md draws, checked on the syntax tree: every path a file names (each leaf of a
//! `use` tree, grouped or split over lines; `super::` chains resolved against the file's module; paths in
//! expressions, types and macro bodies) is resolved to the module it reaches, and a layer may reach only the layers
//! below it. The protocol and framework crates are separate crates, so Cargo keeps them from naming the provider;
//! `ops::ClusterCtx` keeps its backend clients private to `ops`, so the compiler keeps resources from calling them.
//! What crates cannot say inside this one crate, this test says, and `each_kind_of_wrong_import_is_found` shows it
//! can fail on every way of writing a wrong import.

use proc_macro2::{TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// A layer: the modules of the crate (top-level `src/` folders or files) it is made of, and what it must never reach.
struct Layer {
    name: &'static str,
    modules: &'static [&'static str],
    /// Modules of this crate it must not reach (`crate::<module>`).
    forbidden: &'static [&'static str],
    /// Other crates it must not name.
    forbidden_crates: &'static [&'static str],
    why: &'static str,
}

/// No Terraform type below the provider layer: both of our protocol crates.
const TERRAFORM: &[&str] = &["tfplugin", "tfplugin_framework"];

const LAYERS: &[Layer] = &[
    Layer {
        name: "domain",
        modules: &["domain"],
        forbidden: &[
            "ops",
            "gce",
            "etcd",
            "pki",
            "master",
            "storage",
            "resources",
            "config",
            "settings",
            "provider",
            "functions",
        ],
        forbidden_crates: &["tokio", "tfplugin", "tfplugin_framework"],
        why: "domain decides on a snapshot, with no I/O, no clock and no Terraform types",
    },
    Layer {
        name: "backends",
        modules: &["gce", "etcd", "pki", "master", "storage"],
        forbidden: &[
            "ops",
            "domain",
            "resources",
            "config",
            "provider",
            "functions",
        ],
        forbidden_crates: TERRAFORM,
        why: "backends talk to one external system each and know nothing of Terraform or of the decisions above them",
    },
    Layer {
        name: "settings",
        modules: &["settings", "error_chain"],
        forbidden: &[
            "ops",
            "resources",
            "config",
            "provider",
            "functions",
            "gce",
            "etcd",
            "storage",
        ],
        forbidden_crates: TERRAFORM,
        why: "settings are plain values every layer may read",
    },
    Layer {
        name: "ops",
        modules: &["ops"],
        forbidden: &["resources", "config", "provider", "functions"],
        forbidden_crates: TERRAFORM,
        why: "ops takes plain values (`ops::context::Spec`, `settings::Settings`), never Terraform's",
    },
    Layer {
        name: "provider",
        modules: &["resources", "config", "provider", "functions"],
        forbidden: &["gce", "etcd", "storage"],
        forbidden_crates: &[],
        why: "the provider layer reaches GCE, etcd and Cloud Storage only through `ops`",
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

/// The module path of a file under `src/` (`src/domain/quorum.rs` → `["domain", "quorum"]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// A path a file names, resolved: either into this crate (`Crate(["ops", "execute"])`) or another crate.
#[derive(Debug)]
enum Reach {
    Crate(Vec<String>),
    Extern(String),
}

/// Collects every path a file names, with the line it is on.
struct Paths {
    /// The module the visitor is in (the file's, plus any inline `mod` it entered).
    module: Vec<String>,
    found: Vec<(usize, Reach)>,
}

impl Paths {
    /// Resolves `segments` as written in the current module. Bare first segments are items in scope (locals,
    /// `use`d names, std's prelude) or other crates; only the crate names a layer forbids matter for those.
    fn resolve(&mut self, segments: &[String], line: usize) {
        let Some(first) = segments.first() else {
            return;
        };
        let reach = match first.as_str() {
            "crate" => Reach::Crate(segments[1..].to_vec()),
            "self" => Reach::Crate(
                self.module
                    .iter()
                    .cloned()
                    .chain(segments[1..].iter().cloned())
                    .collect(),
            ),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let keep = self.module.len().saturating_sub(ups);
                Reach::Crate(
                    self.module[..keep]
                        .iter()
                        .cloned()
                        .chain(segments[ups..].iter().cloned())
                        .collect(),
                )
            }
            other => Reach::Extern(other.to_string()),
        };
        self.found.push((line, reach));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                full.push(n.ident.to_string());
                self.resolve(&full, n.ident.span().start().line);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.resolve(&full, r.ident.span().start().line);
            }
            syn::UseTree::Glob(g) => {
                let full = prefix.clone();
                self.resolve(&full, g.star_token.spans[0].start().line);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// `crate :: a :: b` (or `super`, `self`, or a forbidden crate's name) inside a macro's tokens, which syn does
    /// not parse as paths.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let TokenTree::Group(g) = &trees[i] {
                self.tokens(g.stream());
                i += 1;
                continue;
            }
            let TokenTree::Ident(first) = &trees[i] else {
                i += 1;
                continue;
            };
            let mut segments = vec![first.to_string()];
            let mut j = i + 1;
            while let (
                Some(TokenTree::Punct(a)),
                Some(TokenTree::Punct(b)),
                Some(TokenTree::Ident(next)),
            ) = (trees.get(j), trees.get(j + 1), trees.get(j + 2))
            {
                if a.as_char() != ':' || b.as_char() != ':' {
                    break;
                }
                segments.push(next.to_string());
                j += 3;
            }
            if segments.len() > 1 {
                self.resolve(&segments, first.span().start().line);
            }
            i = j.max(i + 1);
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        if u.leading_colon.is_some() {
            // `use ::tokio::x`: another crate, by name.
            prefix.clear();
        }
        self.use_tree(&mut prefix, &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = p.segments.first() {
            self.resolve(&segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// The layer `module` belongs to, by its first segment.
fn layer_of(module: &[String]) -> Option<&'static Layer> {
    let top = module.first()?;
    LAYERS.iter().find(|l| l.modules.contains(&top.as_str()))
}

/// The wrong reaches in one file's text, as `line: what (why)`.
fn violations_in(text: &str, module: &[String]) -> Result<Vec<String>, String> {
    let Some(layer) = layer_of(module) else {
        return Ok(Vec::new());
    };
    let file = syn::parse_file(text).map_err(|e| e.to_string())?;
    let mut paths = Paths {
        module: module.to_vec(),
        found: Vec::new(),
    };
    paths.visit_file(&file);
    let mut out = Vec::new();
    for (line, reach) in paths.found {
        let bad = match &reach {
            Reach::Crate(p) => p
                .first()
                .filter(|top| layer.forbidden.contains(&top.as_str()))
                .map(|_| format!("crate::{}", p.join("::"))),
            Reach::Extern(c) => layer
                .forbidden_crates
                .contains(&c.as_str())
                .then(|| c.clone()),
        };
        if let Some(bad) = bad {
            out.push(format!(
                "{line}: {} reaches `{bad}` ({})",
                layer.name, layer.why
            ));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let module = module_of(src, &f);
        let text = std::fs::read_to_string(&f).unwrap();
        match violations_in(&text, &module) {
            Ok(v) => found.extend(v.into_iter().map(|v| format!("{}:{v}", f.display()))),
            Err(e) => found.push(format!("{}: does not parse: {e}", f.display())),
        }
    }
    found
}

#[test]
fn each_layer_reaches_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "layering broken:\n{}", found.join("\n"));
}

#[test]
fn every_module_of_the_crate_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let layerless: Vec<String> = files
        .iter()
        .map(|f| module_of(&src, f))
        .filter(|m| !m.is_empty() && m[0] != "main" && layer_of(m).is_none())
        .map(|m| m.join("::"))
        .collect();
    assert!(
        layerless.is_empty(),
        "modules with no layer (add them to LAYERS): {layerless:?}"
    );
}

/// The five ways a structural review slipped wrong imports past the old text scan, and the ordinary one: each is
/// found, and a comment or a string that names a forbidden module is not.
#[test]
fn each_kind_of_wrong_import_is_found() {
    let module = |m: &str| m.split("::").map(str::to_string).collect::<Vec<_>>();
    let cases = [
        (
            "domain::quorum",
            "use crate::ops::execute::Run;",
            "crate::ops::execute::Run",
        ),
        (
            "domain::quorum",
            "use crate::{ops::execute::Run, domain::topology};",
            "crate::ops::execute::Run",
        ),
        (
            "domain::quorum",
            "use crate::{domain::step, gce::Gce};",
            "crate::gce::Gce",
        ),
        (
            "domain::quorum",
            "use crate::\n    ops::lock;",
            "crate::ops::lock",
        ),
        (
            "gce::zones",
            "use super::super::ops::Spec;",
            "crate::ops::Spec",
        ),
        (
            "domain::quorum",
            "fn f(v: tfplugin_framework::Val<String>) {}",
            "tfplugin_framework",
        ),
        (
            "gce::zones",
            "fn f() { let _ = crate::domain::quorum::size(3); }",
            "crate::domain::quorum::size",
        ),
        (
            "domain::quorum",
            "fn f() { println!(\"{}\", crate::master::paths::SRV); }",
            "crate::master::paths::SRV",
        ),
        (
            "ops::join",
            "mod inner { use super::super::super::resources::x; }",
            "crate::resources::x",
        ),
    ];
    for (m, text, want) in cases {
        let found = violations_in(text, &module(m)).unwrap();
        assert!(
            found.iter().any(|f| f.contains(&format!("`{want}`"))),
            "{m}: {text:?} → {found:?}"
        );
    }
    let fine = "// crate::ops in a comment\nfn f() { let s = \"crate::gce in a string\"; let _ = s; }\nuse crate::domain::step;\n";
    assert_eq!(
        violations_in(fine, &module("domain::quorum")).unwrap(),
        Vec::<String>::new()
    );
}
