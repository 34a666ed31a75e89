//! Inside each crate, the files point one way too: no file imports, through any chain of others, a file that
//! imports it. A circle of files is a module the compiler cannot build apart, read apart or test apart, and every
//! one found was a type living in the wrong file (a step family in the decisions that make its steps, a settings
//! struct in the context built from it). The crates' own layering is `tests/layering.rs`.
//!
//! Read on the syntax tree (syn), from every `use` tree and every path in the code: `crate::…`, `super::…`,
//! `self::…` and a child module's name. A path goes to the file of the longest module it names. Two uses are not
//! arrows: a file naming its folder's module file or the crate root (`super::VmError`, `crate::SimConfig`), which
//! is the folder's face, where the types its files share live; and test code (`tests.rs`, `*_tests.rs`,
//! `#[cfg(test)]` modules), which may reach anywhere it tests. A face naming its own files is an arrow like any
//! other: a `mod.rs` that holds logic and uses a child that reaches back to it through another file is a circle.
//! The checker is shown to find each kind of arrow on a made-up crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use syn::visit::Visit;

mod support;
use support::{rust_files, workspace_sources};

/// A module by its path from the crate root (`["vm", "config"]`; the root is `[]`).
type ModPath = Vec<String>;

/// The module a source file is, from its path under `src/`: `vm/config.rs` is `vm::config`, `vm/mod.rs` is `vm`,
/// `lib.rs` the root.
fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// Whether `rel` is test code or a separate crate (a binary under `src/bin/`, or `main.rs` beside a `lib.rs`,
/// which reaches the library by its crate name).
fn skipped(rel: &Path, has_lib: bool) -> bool {
    let name = rel.file_stem().map(|s| s.to_string_lossy().into_owned());
    let name = name.as_deref().unwrap_or_default();
    name == "tests"
        || name.ends_with("_tests")
        || rel.starts_with("bin")
        || rel.components().any(|c| c.as_os_str() == "tests")
        || (rel == Path::new("main.rs") && has_lib)
}

/// Every path a file names, as written: `use` trees expanded, `#[cfg(test)]` modules left out.
#[derive(Default)]
struct Paths(Vec<Vec<String>>);

impl Paths {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                self.0.push(path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                path.push(r.ident.to_string());
                self.0.push(path);
            }
            syn::UseTree::Glob(_) => self.0.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if !is_cfg_test(&u.attrs) {
            self.use_tree(&mut Vec::new(), &u.tree);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.0
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
}

/// The module `path`, written in module `me`, names (before the longest-known-module cut), or `None` when it names
/// something outside the crate (another crate, the standard library, a local item).
fn absolute(me: &ModPath, path: &[String], known: &BTreeSet<ModPath>) -> Option<ModPath> {
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some(me.iter().chain(&path[1..]).cloned().collect()),
        "super" => {
            let mut base = me.clone();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        _ => {
            let child: ModPath = me.iter().chain([first]).cloned().collect();
            known
                .contains(&child)
                .then(|| me.iter().chain(path).cloned().collect())
        }
    }
}

/// The arrows between a crate's files (`from` imports `to`), from each file's module path and text.
fn arrows(files: &BTreeMap<ModPath, String>) -> Result<BTreeSet<(ModPath, ModPath)>, String> {
    let known: BTreeSet<ModPath> = files.keys().cloned().collect();
    let mut out = BTreeSet::new();
    for (me, text) in files {
        let ast = syn::parse_file(text).map_err(|e| format!("{}: {e}", me.join("::")))?;
        let mut paths = Paths::default();
        paths.visit_file(&ast);
        for p in &paths.0 {
            let Some(abs) = absolute(me, p, &known) else {
                continue;
            };
            // The longest module the path names is the file it reaches.
            let Some(to) = (0..=abs.len())
                .rev()
                .map(|n| abs[..n].to_vec())
                .find(|m| known.contains(m))
            else {
                continue;
            };
            // A file naming its folder's face (or the root) takes a shared type, not an import between files.
            let own_face = me.len() > to.len() && me.starts_with(&to);
            if to != *me && !own_face {
                out.insert((me.clone(), to));
            }
        }
    }
    Ok(out)
}

/// The circles among `arrows`: each strongly connected set of more than one file (Tarjan's algorithm).
fn circles(arrows: &BTreeSet<(ModPath, ModPath)>) -> Vec<Vec<ModPath>> {
    let mut next: BTreeMap<&ModPath, Vec<&ModPath>> = BTreeMap::new();
    for (a, b) in arrows {
        next.entry(a).or_default().push(b);
        next.entry(b).or_default();
    }
    struct Walk<'a> {
        next: &'a BTreeMap<&'a ModPath, Vec<&'a ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in &self.next[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    set.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in next.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

/// A crate's non-test files by module path.
fn crate_modules(src: &Path) -> BTreeMap<ModPath, String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let has_lib = src.join("lib.rs").is_file();
    files
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).unwrap().to_path_buf();
            (!skipped(&rel, has_lib))
                .then(|| (module_of(&rel), std::fs::read_to_string(&f).unwrap()))
        })
        .collect()
}

#[test]
fn no_crate_has_a_circle_among_its_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = workspace_sources(root);
    let mut found = Vec::new();
    for src in &sources {
        let arrows = arrows(&crate_modules(src)).unwrap();
        for circle in circles(&arrows) {
            let files: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
            let ties: Vec<String> = arrows
                .iter()
                .filter(|(a, b)| circle.contains(a) && circle.contains(b))
                .map(|(a, b)| format!("    {} -> {}", a.join("::"), b.join("::")))
                .collect();
            found.push(format!(
                "{}: [{}]\n{}",
                src.display(),
                files.join(", "),
                ties.join("\n")
            ));
        }
    }
    assert!(
        found.is_empty(),
        "circles among a crate's files (move the shared item to a file both can import):\n{}",
        found.join("\n")
    );
}

/// A made-up crate from `(module, text)` pairs.
fn made_up(files: &[(&str, &str)]) -> BTreeMap<ModPath, String> {
    files
        .iter()
        .map(|(m, t)| {
            let path = if m.is_empty() {
                vec![]
            } else {
                m.split("::").map(String::from).collect()
            };
            (path, t.to_string())
        })
        .collect()
}

fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<ModPath>> {
    circles(&arrows(&made_up(files)).unwrap())
}

#[test]
fn the_checker_finds_each_kind_of_arrow_that_closes_a_circle() {
    let base = ("", "mod a; mod b; mod c;");
    let b_uses_a = ("b", "use crate::a::Thing;");
    // Each way `a` can name `b`; with `b` naming `a`, each closes a circle.
    let ways = [
        ("a crate path", "use crate::b::Other;"),
        ("a grouped use", "use crate::{c, b::Other};"),
        ("a use split over lines", "use crate::\n    b\n    ::Other;"),
        ("a path in code", "fn f() { crate::b::go(); }"),
        ("a path in a type", "struct S(crate::b::Other);"),
        ("super", "use super::b::Other;"),
        ("a glob", "use crate::b::*;"),
        ("a renamed import", "use crate::b::Other as O;"),
        ("self in a group", "use crate::b::{self};"),
    ];
    for (what, text) in ways {
        let found = circles_of(&[base, ("a", text), b_uses_a, ("c", "")]);
        assert_eq!(
            found,
            vec![vec![vec!["a".to_string()], vec!["b".to_string()]]],
            "{what} was not seen"
        );
    }
    // Sibling files under a folder, by `super::` and by the folder's own path.
    let nested = [
        ("", "mod vm;"),
        ("vm", "mod config; mod keys;"),
        ("vm::config", "use super::keys::KeyFetch;"),
        ("vm::keys", "use crate::vm::config::GuestFile;"),
    ];
    assert_eq!(circles_of(&nested).len(), 1, "siblings were not seen");
    // A circle through three files.
    let three = [
        base,
        ("a", "use crate::b::X;"),
        ("b", "use crate::c::Y;"),
        ("c", "fn f() { super::a::go(); }"),
    ];
    assert_eq!(
        circles_of(&three)[0].len(),
        3,
        "a longer circle was not seen"
    );
}

#[test]
fn the_checker_lets_pass_what_is_not_a_circle() {
    // One way; a folder's module file using its children while they use its shared types; test code; outside
    // crates and local items that share a module's name.
    let fine = [
        ("", "mod a; mod b; mod vm; pub use a::Thing;"),
        ("a", "pub struct Thing; use std::fmt; fn f() { b::go(); }"),
        (
            "b",
            "use crate::a::Thing; #[cfg(test)] mod tests { use crate::b::X; }",
        ),
        ("vm", "mod config; use config::HostMap; pub struct VmError;"),
        ("vm::config", "use super::VmError; pub struct HostMap;"),
    ];
    let found = circles_of(&fine);
    assert!(found.is_empty(), "false circles: {found:?}");
    let back = [
        ("", "mod a; mod b;"),
        ("a", "use crate::b::X;"),
        ("b", "#[cfg(test)] use crate::a::Thing;"),
    ];
    assert!(circles_of(&back).is_empty(), "a test-only import counted");
    assert!(skipped(Path::new("vm/keys_tests.rs"), true));
    assert!(skipped(Path::new("bin/bench.rs"), true));
    assert!(skipped(Path::new("main.rs"), true));
    assert!(!skipped(Path::new("main.rs"), false));
    assert_eq!(module_of(Path::new("vm/mod.rs")), vec!["vm".to_string()]);
    assert_eq!(module_of(Path::new("lib.rs")), Vec::<String>::new());
}
