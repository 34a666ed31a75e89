//! No function outside tests is longer than `MAX_LINES`, from its `fn` to its closing brace (doc comments and
//! attributes not counted). A function that long does several things in a row, and each of them wants a name a
//! reader can find: split it along its comments (a step per function), or give the repeated shape a helper.
//!
//! Read on the syntax tree (syn, with line numbers from proc-macro2's `span-locations`): free functions, methods,
//! and trait methods with a body, in every crate's `src/` (binaries included). Test code is left out: `tests.rs`,
//! `*_tests.rs`, files under a `tests/` folder, `#[cfg(test)]` modules and `#[test]` functions. The checker is
//! shown to find each kind of function on made-up sources.

use std::path::Path;
use syn::visit::Visit;

mod support;
use support::{rust_files, workspace_sources};

const MAX_LINES: usize = 120;

/// Whether attributes mark test code: `#[cfg(test)]` or a `#[test]`-style attribute (`#[tokio::test]`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        let cfg_test =
            path.is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|arg| arg == "test");
        cfg_test || path.segments.last().is_some_and(|s| s.ident == "test")
    })
}

/// Each function longer than the limit, as (name, first line, lines).
#[derive(Default)]
struct Long(Vec<(String, usize, usize)>);

impl Long {
    fn check(&mut self, attrs: &[syn::Attribute], sig: &syn::Signature, body: &syn::Block) {
        if is_test(attrs) {
            return;
        }
        let first = sig.fn_token.span.start().line;
        let last = body.brace_token.span.close().end().line;
        let lines = last + 1 - first;
        if lines > MAX_LINES {
            self.0.push((sig.ident.to_string(), first, lines));
        }
    }
}

impl<'ast> Visit<'ast> for Long {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(&f.attrs, &f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(&f.attrs, &f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.check(&f.attrs, &f.sig, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// The functions of one source file over the limit.
fn long_functions(source: &str) -> Result<Vec<(String, usize, usize)>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut long = Long::default();
    long.visit_file(&file);
    Ok(long.0)
}

/// Whether a file under a crate's `src/` is test code.
fn test_file(rel: &Path) -> bool {
    let name = rel.file_stem().map(|s| s.to_string_lossy().into_owned());
    let name = name.as_deref().unwrap_or_default();
    name == "tests"
        || name.ends_with("_tests")
        || rel.components().any(|c| c.as_os_str() == "tests")
}

#[test]
fn no_function_outside_tests_is_over_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = workspace_sources(root);
    let mut found = Vec::new();
    let mut checked = 0;
    for src in &sources {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        for file in files {
            if test_file(file.strip_prefix(src).unwrap()) {
                continue;
            }
            checked += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            let long = long_functions(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
            for (name, line, lines) in long {
                let at = file.strip_prefix(root).unwrap().display().to_string();
                found.push(format!("    {at}:{line} {name}: {lines} lines"));
            }
        }
    }
    assert!(
        checked >= 200,
        "checked only {checked} files: the walk is broken"
    );
    assert!(
        found.is_empty(),
        "functions over {MAX_LINES} lines (split each along what it does, a named function per part):\n{}",
        found.join("\n")
    );
}

/// A function `lines` long, from the `fn` of its `header` to its closing brace.
fn function(header: &str, lines: usize) -> String {
    let mut f = format!("{header} {{\n");
    for i in 0..lines - 2 {
        f.push_str(&format!("    let _v{i} = {i};\n"));
    }
    f.push_str("}\n");
    f
}

#[test]
fn the_checker_finds_each_kind_of_function_and_skips_test_code() {
    let at_limit = function("fn fits()", MAX_LINES);
    assert_eq!(long_functions(&at_limit).unwrap(), []);

    let over = MAX_LINES + 1;
    let cases = [
        (
            "a free function",
            function("/// Doc.\npub async fn long()", over),
        ),
        (
            "a method",
            format!("impl S {{\n{}}}\n", function("    fn long(&self)", over)),
        ),
        (
            "a trait's default method",
            format!("trait T {{\n{}}}\n", function("    fn long(&self)", over)),
        ),
        (
            "a function in a module",
            format!("mod inner {{\n{}}}\n", function("fn long()", over)),
        ),
        (
            "a function under an attribute that is not a test's",
            function("#[cfg(feature = \"x\")]\nfn long()", over),
        ),
    ];
    for (case, source) in cases {
        let found = long_functions(&source).unwrap();
        assert_eq!(found.len(), 1, "{case}: {found:?}");
        assert_eq!(found[0].0, "long", "{case}");
        assert_eq!(found[0].2, over, "{case}");
    }

    for (case, source) in [
        ("a test", function("#[test]\nfn long()", over)),
        (
            "an async test",
            function("#[tokio::test]\nasync fn long()", over),
        ),
        (
            "a test module",
            format!(
                "#[cfg(test)]\nmod tests {{\n{}}}\n",
                function("fn long()", over)
            ),
        ),
    ] {
        assert_eq!(long_functions(&source).unwrap(), [], "{case}");
    }
}
