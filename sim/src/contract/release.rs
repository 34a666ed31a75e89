//! Versions as the contract tables name them: a Kubernetes minor (`1.30`), a cloud-controller-manager image major
//! (`30`), a cluster-autoscaler minor (`1.30`). Compared part by part, so `1.9 < 1.28` and `30 < 32`.

/// A dotted version of any length; `1.30` and `1.30.0` compare equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version(pub Vec<u32>);

impl Version {
    pub fn parse(s: &str) -> Option<Version> {
        let parts = s
            .trim()
            .trim_start_matches('v')
            .split('.')
            .map(|p| p.parse().ok())
            .collect::<Option<Vec<u32>>>()?;
        (!parts.is_empty()).then_some(Version(parts))
    }

    /// `registry.k8s.io/kube-apiserver:v1.30.14` → `1.30` (the minor every table is keyed by).
    pub fn of_kubernetes_image(image: &str) -> Option<Version> {
        let tag = tag(image)?;
        let v = Version::parse(tag.split(['-', '+']).next()?)?;
        (v.0.len() >= 2 && v.0[0] == 1).then(|| Version(v.0[..2].to_vec()))
    }

    /// The image's tag as a version truncated to `parts` parts (`v30.0.0`, 1 → `30`).
    pub fn of_image_tag(image: &str, parts: usize) -> Option<Version> {
        let v = Version::parse(tag(image)?.split(['-', '+']).next()?)?;
        Some(Version(v.0.into_iter().take(parts).collect()))
    }

    fn key(&self) -> [u32; 4] {
        let mut k = [0; 4];
        for (i, p) in self.0.iter().take(4).enumerate() {
            k[i] = *p;
        }
        k
    }

    /// Within `[since, until)`; `None` bounds are open.
    pub fn within(&self, since: Option<&Version>, until: Option<&Version>) -> bool {
        since.is_none_or(|s| self.key() >= s.key()) && until.is_none_or(|u| self.key() < u.key())
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// The tag of `repo[:port]/path:tag`, if any.
pub(crate) fn tag(image: &str) -> Option<&str> {
    let (repo, tag) = image.rsplit_once(':')?;
    (!tag.contains('/') && !repo.is_empty()).then_some(tag)
}

/// `-` means open; anything else must parse.
pub(crate) fn bound(s: &str) -> Result<Option<Version>, String> {
    match s.trim() {
        "-" | "" => Ok(None),
        v => Version::parse(v)
            .map(Some)
            .ok_or_else(|| format!("{v:?} is not a version")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_part_and_images_name_their_release() {
        let v = |s| Version::parse(s).unwrap();
        assert!(v("1.9").within(None, Some(&v("1.28"))));
        assert!(v("1.30").within(Some(&v("1.30")), Some(&v("1.31"))));
        assert!(!v("1.31").within(Some(&v("1.30")), Some(&v("1.31"))));
        assert_eq!(
            Version::of_kubernetes_image("registry.k8s.io/kube-apiserver:v1.30.14"),
            Some(v("1.30"))
        );
        assert_eq!(
            Version::of_kubernetes_image("localhost:5000/kube-apiserver"),
            None
        );
        assert_eq!(
            Version::of_image_tag(
                "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v30.0.0",
                1
            ),
            Some(v("30"))
        );
    }
}
