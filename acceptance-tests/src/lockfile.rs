//! Writing and reading `.terraform.lock.hcl`: the harness pre-writes one so `init` must verify the mirrored
//! package against a hash we computed, and tests read back what `init` recorded.

/// One `provider "<address>" { ... }` block of a lock file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockEntry {
    pub address: String,
    pub version: String,
    pub hashes: Vec<String>,
}

/// Renders a lock file in the clients' own format. Entries for providers a configuration doesn't use are
/// harmless: `init` drops them, which is why one file can serve both registry hosts.
pub fn render(entries: &[LockEntry]) -> String {
    let mut out = String::from(
        "# Written by the acceptance harness; init verifies the package against these hashes.\n",
    );
    for entry in entries {
        out.push_str(&format!(
            "\nprovider {:?} {{\n  version = {:?}\n  hashes = [\n",
            entry.address, entry.version
        ));
        for hash in &entry.hashes {
            out.push_str(&format!("    {hash:?},\n"));
        }
        out.push_str("  ]\n}\n");
    }
    out
}

/// The hashes recorded for `address`, or None when the lock file has no block for it. A line scan suffices for
/// the files the clients write (one attribute or list item per line).
pub fn hashes_for(lock_file: &str, address: &str) -> Option<Vec<String>> {
    let header = format!("provider {address:?} {{");
    let mut lines = lock_file.lines().skip_while(|l| l.trim() != header);
    lines.next()?;
    let mut hashes = Vec::new();
    for line in lines {
        let line = line.trim();
        if line == "}" {
            break;
        }
        if let Some(quoted) = line.strip_suffix(',').unwrap_or(line).strip_prefix('"') {
            hashes.push(quoted.trim_end_matches('"').to_string());
        }
    }
    Some(hashes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_it_renders_and_what_init_writes() {
        let entry = LockEntry {
            address: "registry.terraform.io/hamaster/ha".into(),
            version: "0.1.0".into(),
            hashes: vec!["h1:abc=".into(), "zh:00".into()],
        };
        let text = render(std::slice::from_ref(&entry));
        assert_eq!(
            hashes_for(&text, &entry.address),
            Some(entry.hashes.clone())
        );
        assert_eq!(hashes_for(&text, "registry.opentofu.org/hamaster/ha"), None);

        let written_by_init = "# This file is maintained automatically by \"terraform init\".\n\n\
            provider \"registry.terraform.io/hamaster/ha\" {\n  version = \"0.1.0\"\n  hashes = [\n    \
            \"h1:INWFjakpjoS5UNZqutbZoXQhQrUxFk9b2O13ikeMmHw=\",\n  ]\n}\n";
        assert_eq!(
            hashes_for(written_by_init, &entry.address),
            Some(vec![
                "h1:INWFjakpjoS5UNZqutbZoXQhQrUxFk9b2O13ikeMmHw=".to_string()
            ])
        );
    }
}
