//! Resource links: the sim emits full URLs under its own base URL and accepts full or partial references.

/// Builds and parses links. `base` ends with `/compute/v1/`.
#[derive(Clone, Debug)]
pub struct Links {
    base: String,
}

impl Links {
    /// `root` is the sim's configured base URL, e.g. `http://127.0.0.1:8080/` (trailing slash optional).
    pub fn new(root: &str) -> Self {
        Links {
            base: format!("{}/compute/v1/", root.trim_end_matches('/')),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Full URL of a relative path such as `projects/p/zones/z/instances/i`.
    pub fn url(&self, rel: &str) -> String {
        format!("{}{}", self.base, rel)
    }

    /// Normalises a reference to a relative path `projects/{p}/...`.
    ///
    /// Accepts our own URLs, Google's (`https://www.googleapis.com/compute/v1/...`,
    /// `https://compute.googleapis.com/compute/v1/...`), `projects/...` and partial `zones/...`, `regions/...`,
    /// `global/...` (completed with `project`). A bare name is not a reference: `None`.
    pub fn rel(&self, project: &str, reference: &str) -> Option<String> {
        let r = reference.trim();
        let tail = match r.find("/compute/v1/") {
            Some(i) if r.contains("://") => &r[i + "/compute/v1/".len()..],
            _ => r,
        };
        if tail.starts_with("projects/") {
            return Some(tail.to_string());
        }
        if ["zones/", "regions/", "global/"]
            .iter()
            .any(|p| tail.starts_with(p))
        {
            return Some(format!("projects/{project}/{tail}"));
        }
        None
    }
}

/// Splits `projects/p/zones/z/instances/i` into its segments, for picking out zone or name.
pub fn segments(rel: &str) -> Vec<&str> {
    rel.split('/').collect()
}

/// The relative path (`projects/...`) inside a full link the sim stored; `None` if it has none.
pub fn rel_of(link: &str) -> Option<&str> {
    link.find("projects/").map(|i| &link[i..])
}

/// The last segment of a link: the resource name.
pub fn name_of(link: &str) -> &str {
    link.rsplit('/').next().unwrap_or(link)
}

/// The value following `key` in a link, e.g. `scope_of(link, "zones")` → the zone.
pub fn scope_of<'a>(link: &'a str, key: &str) -> Option<&'a str> {
    let mut it = link.split('/');
    while let Some(s) = it.next() {
        if s == key {
            return it.next();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_normalise_to_relative_paths() {
        let l = Links::new("http://127.0.0.1:9/");
        let want = Some("projects/p/zones/z/instances/i".to_string());
        assert_eq!(
            l.rel(
                "p",
                "http://127.0.0.1:9/compute/v1/projects/p/zones/z/instances/i"
            ),
            want
        );
        assert_eq!(
            l.rel(
                "p",
                "https://www.googleapis.com/compute/v1/projects/p/zones/z/instances/i"
            ),
            want
        );
        assert_eq!(l.rel("p", "projects/p/zones/z/instances/i"), want);
        assert_eq!(l.rel("p", "zones/z/instances/i"), want);
        assert_eq!(l.rel("p", "i"), None);
        assert_eq!(
            l.url("projects/p"),
            "http://127.0.0.1:9/compute/v1/projects/p"
        );
        assert_eq!(
            scope_of("projects/p/zones/z/instances/i", "zones"),
            Some("z")
        );
        assert_eq!(name_of("projects/p/zones/z/instances/i"), "i");
    }
}
