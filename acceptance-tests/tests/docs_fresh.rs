//! The reference in docs/ is what `scripts/gen-docs` writes from the provider's schema and examples/ today: a
//! changed description, attribute or example without regenerated docs fails here, naming the page and the
//! command that fixes it. The layout and front matter follow the rules the registry applies when it publishes
//! (`tfplugindocs validate`, hashicorp/terraform-plugin-docs internal/provider/validate.go and internal/check).

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

/// The kinds of page the registry publishes from `docs/<kind>/`; each is one flat folder.
const REGISTRY_KINDS: &[&str] = &[
    "actions",
    "data-sources",
    "ephemeral-resources",
    "functions",
    "guides",
    "list-resources",
    "resources",
    "state-stores",
];

/// What the registry refuses in one page of `docs/`, by its rules: the front matter is YAML between `---` lines at
/// the very top; no page has `layout` or `sidebar_current`; the index has no `subcategory`; a guide has a
/// `page_title`.
fn registry_refuses(page: &str, text: &str) -> Option<String> {
    if !page.ends_with(".md") {
        return Some("only .md files are published".into());
    }
    let Some(yaml) = text
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map(|(yaml, _)| yaml)
    else {
        return Some("no YAML front matter at the top (`---` lines)".into());
    };
    let front: serde_norway::Mapping = match serde_norway::from_str(yaml) {
        Ok(front) => front,
        Err(e) => return Some(format!("front matter is not YAML: {e}")),
    };
    let has = |key: &str| front.contains_key(key);
    for key in ["layout", "sidebar_current"] {
        if has(key) {
            return Some(format!(
                "front matter has `{key}`, which the registry's layout forbids"
            ));
        }
    }
    if page.starts_with("index.") && has("subcategory") {
        return Some(
            "the index's front matter has `subcategory`, which the registry forbids there".into(),
        );
    }
    if page.starts_with("guides/") && !has("page_title") {
        return Some("a guide's front matter needs `page_title`".into());
    }
    None
}

/// The registry checks every folder below `docs/<kind>/` and every page in `docs/index.*` and `docs/<kind>/`;
/// other files and folders under docs/ (internals, benchmarks) are not published and not checked.
fn registry_problems(docs: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(docs).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && REGISTRY_KINDS.contains(&name.as_str()) {
            for inner in std::fs::read_dir(&path).unwrap() {
                let inner = inner.unwrap().path();
                let inner_name = inner.file_name().unwrap().to_string_lossy().into_owned();
                if inner.is_dir() {
                    problems.push(format!(
                        "docs/{name}/{inner_name}/: the registry refuses folders below docs/{name}/"
                    ));
                } else {
                    pages.push(format!("{name}/{inner_name}"));
                }
            }
        } else if path.is_file() && name.starts_with("index.") {
            pages.push(name);
        }
    }
    for page in &pages {
        let text = std::fs::read_to_string(docs.join(page)).unwrap();
        if let Some(why) = registry_refuses(page, &text) {
            problems.push(format!("docs/{page}: {why}"));
        }
        for target in unpublished_links(page, &text, &pages) {
            problems.push(format!(
                "docs/{page}: links to {target}, which the registry does not publish: name the file in the \
                 repository instead (`docs/...`), or link a published page"
            ));
        }
    }
    problems
}

/// The relative Markdown links of `page` to a file that is not one of the published `pages` (docs/provider.md
/// once was: the registry showed a broken link where users looked for the provider's settings). Links to other
/// sites and anchors on the same page are not judged.
fn unpublished_links(page: &str, text: &str, pages: &[String]) -> Vec<String> {
    let dir = Path::new(page).parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for (_, rest) in text.match_indices("](").map(|(i, _)| text.split_at(i + 2)) {
        let Some(target) = rest.split([')', ' ']).next() else {
            continue;
        };
        let path = target.split('#').next().unwrap_or_default();
        if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
            continue;
        }
        // Resolve `..` by hand: the file need not exist for the link to be judged.
        let mut parts: Vec<&str> = dir.iter().filter_map(|p| p.to_str()).collect();
        for part in path.split('/') {
            match part {
                ".." => {
                    parts.pop();
                }
                "." | "" => {}
                other => parts.push(other),
            }
        }
        let resolved = parts.join("/");
        if !pages.contains(&resolved) {
            broken.push(target.to_string());
        }
    }
    broken
}

#[test]
fn the_docs_follow_the_registrys_layout_and_front_matter_rules() {
    let problems = registry_problems(&repo_root().join("docs"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each rule above, broken once on a copy of a valid docs/ tree, is reported.
#[test]
fn each_registry_rule_broken_is_reported() {
    let good = "---\npage_title: \"A\"\n---\n\n# A\n";
    let cases: &[(&str, &str, &str)] = &[
        (
            "guides/usage/x.md",
            good,
            "refuses folders below docs/guides/",
        ),
        ("guides/x.md", "# A\n", "no YAML front matter"),
        (
            "guides/x.md",
            "---\nsubcategory: \"\"\n---\n",
            "needs `page_title`",
        ),
        ("resources/x.md", "---\nlayout: \"x\"\n---\n", "forbids"),
        (
            "resources/x.md",
            "---\nsidebar_current: \"x\"\n---\n",
            "forbids",
        ),
        ("index.md", "---\nsubcategory: \"\"\n---\n", "forbids there"),
        ("functions/x.txt", good, "only .md"),
        ("guides/x.md", "---\npage_title: [\n---\n", "not YAML"),
        (
            "guides/x.md",
            "---\npage_title: \"A\"\n---\n\nSee [the settings](../provider.md#schema).\n",
            "links to ../provider.md#schema, which the registry does not publish",
        ),
    ];
    for (page, text, expected) in cases {
        let docs = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(docs.path().join("guides")).unwrap();
        std::fs::write(docs.path().join("guides/fine.md"), good).unwrap();
        assert!(registry_problems(docs.path()).is_empty());
        let path = docs.path().join(page);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let problems = registry_problems(docs.path()).join("\n");
        assert!(
            problems.contains(expected),
            "docs/{page} with {text:?}: expected {expected:?}, got {problems:?}"
        );
    }
}
