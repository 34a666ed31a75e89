//! Which etcd binary a VM runs: the one for the minor version its etcd image names
//! (`registry.k8s.io/etcd:3.5.1-0` → 3.5), so a cluster rolled from 3.4 to 3.5 one replica at a time really runs
//! two versions side by side. `--etcd-bin 3.5=PATH` names a minor's binary; a plain `--etcd-bin PATH` is the
//! default for every minor no flag names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The etcd binaries a sim's VMs may run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdBins {
    /// Run for any image whose minor has no binary of its own.
    pub default: Option<PathBuf>,
    /// Minor version (`3.5`) → binary.
    pub by_minor: BTreeMap<String, PathBuf>,
}

impl EtcdBins {
    /// One binary for every version (what tests and the plain `--etcd-bin PATH` mean).
    pub fn single(path: impl Into<PathBuf>) -> Self {
        EtcdBins {
            default: Some(path.into()),
            by_minor: BTreeMap::new(),
        }
    }

    /// Adds one `--etcd-bin` value: `MINOR=PATH` (e.g. `3.5=/opt/etcd-3.5/etcd`) or a plain `PATH`.
    pub fn add(&mut self, arg: &str) -> Result<(), String> {
        match arg.split_once('=') {
            Some((minor, path)) => {
                if !is_minor(minor) {
                    return Err(format!(
                        "--etcd-bin {arg:?}: {minor:?} is not a minor version such as 3.5 (write MINOR=PATH or PATH)"
                    ));
                }
                if path.is_empty() {
                    return Err(format!("--etcd-bin {arg:?}: the path after `=` is empty"));
                }
                self.by_minor.insert(minor.to_string(), PathBuf::from(path));
            }
            None => self.default = Some(PathBuf::from(arg)),
        }
        Ok(())
    }

    /// The binary for an etcd container image, or why the container would crash-loop on a real VM.
    pub fn for_image(&self, image: &str) -> Result<&Path, String> {
        let minor = image_minor(image);
        if let Some(p) = minor.as_deref().and_then(|m| self.by_minor.get(m)) {
            return Ok(p);
        }
        if let Some(p) = &self.default {
            return Ok(p);
        }
        let known = self.by_minor.keys().cloned().collect::<Vec<_>>().join(", ");
        Err(match minor {
            Some(m) => format!(
                "etcd image {image:?} is etcd {m}, and this sim has no etcd {m} binary (it has {known}): the etcd \
                 container would crash-loop; start ha-sim with --etcd-bin {m}=PATH"
            ),
            None => format!(
                "etcd image {image:?} has no version tag such as :3.5.1-0, so no etcd binary matches it (this sim \
                 has {known}): the etcd container would crash-loop"
            ),
        })
    }

    /// Every binary, for the start-up check that they exist.
    pub fn all(&self) -> impl Iterator<Item = &Path> {
        self.default
            .iter()
            .chain(self.by_minor.values())
            .map(PathBuf::as_path)
    }
}

/// `3.5`: two dot-separated numbers.
fn is_minor(s: &str) -> bool {
    let mut parts = s.split('.');
    let num =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    num(parts.next()) && num(parts.next()) && parts.next().is_none()
}

/// The minor of an image tag: `registry.k8s.io/etcd:3.5.1-0` → `3.5` (the `-0` is the image's own revision);
/// `None` without a tag (a registry port such as `host:5000/etcd` is not a tag).
fn image_minor(image: &str) -> Option<String> {
    let last = image.rsplit('/').next().unwrap_or(image);
    let (_, tag) = last.split_once(':')?;
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    let mut parts = tag.split(['.', '-']);
    let minor = format!("{}.{}", parts.next()?, parts.next()?);
    is_minor(&minor).then_some(minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(args: &[&str]) -> EtcdBins {
        let mut b = EtcdBins::default();
        for a in args {
            b.add(a).unwrap();
        }
        b
    }

    #[test]
    fn a_vm_runs_the_binary_of_its_images_minor() {
        let b = bins(&["3.4=/e34/etcd", "3.5=/e35/etcd"]);
        let table = [
            ("registry.k8s.io/etcd:3.4.13-0", "/e34/etcd"),
            ("registry.k8s.io/etcd:3.5.1-0", "/e35/etcd"),
            ("gcr.io/etcd-development/etcd:v3.5.17", "/e35/etcd"),
            ("localhost:5000/etcd:3.5.1-0", "/e35/etcd"),
        ];
        for (image, want) in table {
            assert_eq!(b.for_image(image), Ok(Path::new(want)), "{image}");
        }
    }

    #[test]
    fn a_minor_without_a_binary_fails_with_the_flag_that_would_fix_it() {
        let b = bins(&["3.4=/e34/etcd"]);
        let err = b.for_image("registry.k8s.io/etcd:3.5.1-0").unwrap_err();
        assert!(err.contains("no etcd 3.5 binary"), "{err}");
        assert!(err.contains("crash-loop"), "{err}");
        assert!(err.contains("--etcd-bin 3.5=PATH"), "{err}");
        let err = b.for_image("registry.k8s.io/etcd").unwrap_err();
        assert!(err.contains("no version tag"), "{err}");
        let err = b.for_image("localhost:5000/etcd").unwrap_err();
        assert!(err.contains("no version tag"), "{err}");
    }

    #[test]
    fn a_plain_path_is_the_default_for_every_minor_no_flag_names() {
        let b = bins(&["/usr/bin/etcd", "3.5=/e35/etcd"]);
        assert_eq!(
            b.for_image("registry.k8s.io/etcd:3.4.13-0"),
            Ok(Path::new("/usr/bin/etcd"))
        );
        assert_eq!(
            b.for_image("registry.k8s.io/etcd:3.6.0-0"),
            Ok(Path::new("/usr/bin/etcd"))
        );
        assert_eq!(
            b.for_image("registry.k8s.io/etcd"),
            Ok(Path::new("/usr/bin/etcd"))
        );
        assert_eq!(
            b.for_image("registry.k8s.io/etcd:3.5.1-0"),
            Ok(Path::new("/e35/etcd"))
        );
        assert_eq!(
            EtcdBins::single("/x/etcd").for_image("anything:3.9.0"),
            Ok(Path::new("/x/etcd"))
        );
    }

    #[test]
    fn malformed_flags_are_refused() {
        let mut b = EtcdBins::default();
        for bad in ["3=/x", "3.5.1=/x", "v3.5=/x", "3.5=", "a.b=/x"] {
            assert!(b.add(bad).is_err(), "{bad}");
        }
        assert_eq!(b, EtcdBins::default());
    }
}
