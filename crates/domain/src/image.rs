//! The boot image a cluster's masters run when its configuration names none.
//!
//! A master's image must run the startup contract (docs/master-config.md): cloud-init, containerd and the kubelet
//! of the cluster's release. Google's Ubuntu LTS images carry cloud-init and apt, and the masters' first boot
//! installs the other two (`master::runtime`), so a new cluster gets Ubuntu's LTS family. Container-Optimized OS,
//! the default before, has neither apt nor a kubelet unit; a cluster made then keeps it until its configuration
//! says otherwise, so upgrading the provider rolls no existing cluster.

/// What a new cluster runs when `image` is unset: Ubuntu 24.04 LTS, the family that follows its patched images.
pub const DEFAULT_FOR_NEW: &str =
    "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64";

/// What every cluster made before the default changed runs (the schema's default then).
pub const LEGACY: &str = "projects/cos-cloud/global/images/family/cos-stable";

/// What an `image` names, as Compute Engine reads a boot disk's `sourceImage`: an image, or the newest image of a
/// family, in a project (the cluster's when the reference names none).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageRef {
    Named { project: String, name: String },
    Family { project: String, family: String },
}

impl ImageRef {
    /// `https://…/projects/P/global/images/[family/]X`, `projects/P/global/images/[family/]X` or
    /// `global/images/[family/]X` (in `project`); `None` for another shape, which plan does not ask about (the
    /// apply then meets Compute Engine's own answer).
    pub fn parse(image: &str, project: &str) -> Option<ImageRef> {
        let rel = match image.split_once("/projects/") {
            Some((_, rest)) => rest,
            None => image.strip_prefix("projects/").unwrap_or(image),
        };
        let (owner, rest) = match rel.split_once("/global/images/") {
            Some((owner, rest)) => (owner, rest),
            None => (project, rel.strip_prefix("global/images/")?),
        };
        let plain = |s: &str| !s.is_empty() && !s.contains('/');
        if !plain(owner) {
            return None;
        }
        match rest.strip_prefix("family/") {
            Some(family) if plain(family) => Some(ImageRef::Family {
                project: owner.into(),
                family: family.into(),
            }),
            None if plain(rest) => Some(ImageRef::Named {
                project: owner.into(),
                name: rest.into(),
            }),
            _ => None,
        }
    }

    /// The refusal of an image Compute Engine does not have, at the attribute that names it.
    pub fn not_found(&self) -> super::Problem {
        let (what, list) = match self {
            ImageRef::Named { project, name } => (
                format!("Image {name} does not exist in project {project}"),
                format!("gcloud compute images list --project {project} --no-standard-images"),
            ),
            ImageRef::Family { project, family } => (
                format!("Image family {family} does not exist in project {project}"),
                format!(
                    "gcloud compute images list --project {project} --no-standard-images --format='value(family)'"
                ),
            ),
        };
        (
            what,
            format!(
                "Compute Engine has no such image, so no master could boot from it: a new replica's create would \
                 fail, and a roll would delete a master's VM before its new one failed. Nothing was planned. Check \
                 the spelling (`{list}` lists what the project publishes; Google's public images are in projects \
                 such as ubuntu-os-cloud and cos-cloud), or leave `image` unset for the default \
                 ({DEFAULT_FOR_NEW}). An image in another project also needs `compute.images.useReadOnly` there."
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_parse_as_compute_engine_reads_them() {
        let family = |p: &str, f: &str| {
            Some(ImageRef::Family {
                project: p.into(),
                family: f.into(),
            })
        };
        let named = |p: &str, n: &str| {
            Some(ImageRef::Named {
                project: p.into(),
                name: n.into(),
            })
        };
        let cases = [
            (
                DEFAULT_FOR_NEW,
                family("ubuntu-os-cloud", "ubuntu-2404-lts-amd64"),
            ),
            (LEGACY, family("cos-cloud", "cos-stable")),
            (
                "https://www.googleapis.com/compute/v1/projects/debian-cloud/global/images/debian-12-bookworm-v20261118",
                named("debian-cloud", "debian-12-bookworm-v20261118"),
            ),
            ("global/images/my-master", named("mine", "my-master")),
            ("global/images/family/masters", family("mine", "masters")),
            ("projects/x/global/images/family/", None),
            ("projects/x/global/images/a/b", None),
            ("ubuntu-2404-lts-amd64", None),
            ("", None),
        ];
        for (image, want) in cases {
            assert_eq!(ImageRef::parse(image, "mine"), want, "{image}");
        }
        let (summary, detail) = family("ubuntu-os-cloud", "ubuntu-2404-lts")
            .unwrap()
            .not_found();
        assert_eq!(
            summary,
            "Image family ubuntu-2404-lts does not exist in project ubuntu-os-cloud"
        );
        assert!(
            detail.contains("gcloud compute images list --project ubuntu-os-cloud"),
            "{detail}"
        );
    }
}
