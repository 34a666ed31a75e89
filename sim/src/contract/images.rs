//! What each image a master runs is: its default user, its entrypoint and the programs it carries
//! (`images.tsv`, each row naming the upstream Dockerfile or build that says so). A container runs as the image's
//! user unless its `securityContext` says otherwise, and a `command` must name a program the image has.

use super::release::Version;

const TABLE: &str = include_str!("images.tsv");

/// One image's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub uid: u32,
    pub gid: u32,
    /// Absolute paths of the programs in the image.
    pub programs: Vec<String>,
    /// The directories a bare `command` is looked up in (the image's `PATH`).
    pub path: Vec<String>,
    pub source: String,
}

/// Whether `tag` matches a row's pattern: `*`, an exact tag, `prefix*`, a prefix ending in `.` or `-`, or an
/// inclusive range `vA-vB`.
fn tag_matches(pattern: &str, tag: &str) -> bool {
    if pattern == "*" || pattern == tag {
        return true;
    }
    if let Some(prefix) = pattern.strip_suffix('*') {
        return tag.starts_with(prefix);
    }
    if pattern.ends_with('.') || pattern.ends_with('-') {
        return tag.starts_with(pattern);
    }
    if let Some((lo, hi)) = pattern.split_once("-v") {
        let (Some(lo), Some(hi), Some(t)) = (
            Version::parse(lo),
            Version::parse(hi),
            Version::parse(tag.split(['-', '+']).next().unwrap_or(tag)),
        ) else {
            return false;
        };
        let hi_next = {
            let mut v = hi.0.clone();
            if let Some(last) = v.last_mut() {
                *last += 1;
            }
            Version(v)
        };
        return t.within(Some(&lo), Some(&hi_next));
    }
    false
}

/// The row for `image`: its repository, and the first row whose tag pattern matches.
pub(crate) fn lookup(image: &str) -> Result<Option<Image>, String> {
    let (repo, tag) = match super::release::tag(image) {
        Some(t) => (&image[..image.len() - t.len() - 1], t),
        None => (image, "latest"),
    };
    for line in TABLE.lines().map(str::trim_end) {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [
            repository,
            pattern,
            uid,
            gid,
            _entrypoint,
            source,
            _cmd,
            programs,
            path,
            ..,
        ] = f[..]
        else {
            return Err(format!(
                "sim/src/contract/images.tsv: row {line:?} has fewer than 9 fields"
            ));
        };
        if repository != repo || !tag_matches(pattern, tag) {
            continue;
        }
        let number = |s: &str| {
            s.parse::<u32>().map_err(|_| {
                format!("sim/src/contract/images.tsv: {s:?} is not a number in {line:?}")
            })
        };
        return Ok(Some(Image {
            uid: number(uid)?,
            gid: number(gid)?,
            programs: programs.split(',').map(|p| p.trim().to_string()).collect(),
            path: path.split(':').map(str::to_string).collect(),
            source: source.to_string(),
        }));
    }
    Ok(None)
}

/// The facts of `c`'s image; a container whose image the table does not know is refused, since its user and
/// program are unknown.
pub(crate) fn of_container(c: &super::master::Container) -> Result<Image, super::Refusal> {
    let refuse = |cause: String| super::Refusal::new(&c.name, format!("{}: {cause}", c.manifest));
    lookup(&c.image)
        .map_err(|e| refuse(format!("the contract's own table is broken: {e}")))?
        .ok_or_else(|| {
            refuse(format!(
                "image {:?} is not in sim/src/contract/images.tsv, so its user and program are unknown",
                c.image
            ))
        })
}

/// Whether `command0` starts a program of `image` the way a container runtime resolves it: an absolute path
/// that exists, a bare name found on the image's `PATH`, or `./name` from the working directory `/`.
pub(crate) fn starts_program(command0: &str, image: &Image) -> bool {
    if command0.starts_with('/') {
        return image.programs.iter().any(|p| p == command0);
    }
    if let Some(name) = command0.strip_prefix("./") {
        return image.programs.iter().any(|p| *p == format!("/{name}"));
    }
    image.path.iter().any(|dir| {
        image
            .programs
            .iter()
            .any(|p| *p == format!("{}/{command0}", dir.trim_end_matches('/')))
    })
}

/// The programs of `image`, for sentences.
pub(crate) fn programs(image: &Image) -> String {
    image.programs.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_patterns_match_as_the_table_says() {
        assert!(tag_matches("*", "anything"));
        assert!(tag_matches("v1.*", "v1.35.0"));
        assert!(tag_matches("3.5.", "3.5.24-0"));
        assert!(!tag_matches("3.5.", "3.4.13-0"));
        assert!(tag_matches("v1.28.0-v1.32.0", "v1.30.0"));
        assert!(tag_matches("v1.28.0-v1.32.0", "v1.32.0"));
        assert!(!tag_matches("v1.28.0-v1.32.0", "v1.33.0"));
        assert!(tag_matches("v30.0.0", "v30.0.0"));
    }
}
