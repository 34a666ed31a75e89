//! The scenario index (`acceptance-tests/README.md`) names every file in `tests/` and nothing else, so a reader can
//! trust it to find the scenario behind a claim.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::paths::repo_root;

    /// The `tests/*.rs` files an index text names in backticks.
    fn named(index: &str) -> BTreeSet<String> {
        index
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|s| s.ends_with(".rs") && !s.contains('/'))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn index_lists_every_scenario() {
        let dir = repo_root().join("acceptance-tests");
        let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
        let files: BTreeSet<String> = std::fs::read_dir(dir.join("tests"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".rs"))
            .collect();
        let listed = named(&index);
        let missing: Vec<_> = files.difference(&listed).collect();
        let stale: Vec<_> = listed.difference(&files).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "acceptance-tests/README.md is out of date: add a line for {missing:?}, remove {stale:?}"
        );
    }

    #[test]
    fn the_index_check_sees_a_missing_and_a_stale_line() {
        let index = "| `a.rs` | x |\n| `b.rs`, `c.rs` | y |\n`src/index.rs` is not a scenario";
        let files: BTreeSet<String> = ["a.rs", "c.rs", "d.rs"].map(String::from).into();
        let listed = named(index);
        assert_eq!(files.difference(&listed).collect::<Vec<_>>(), vec!["d.rs"]);
        assert_eq!(listed.difference(&files).collect::<Vec<_>>(), vec!["b.rs"]);
    }
}
