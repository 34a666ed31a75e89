//! The fixed geography of the simulated cloud: which regions and zones exist.

/// (region, zone suffixes). Two regions the provider's examples use, plus us-east1 so a test can pick a
/// region nobody else uses.
pub const REGIONS: &[(&str, &[&str])] = &[
    ("europe-west1", &["b", "c", "d"]),
    ("us-central1", &["a", "b", "c", "f"]),
    ("us-east1", &["b", "c", "d"]),
];

/// Every zone name, in catalog order.
pub fn zones() -> impl Iterator<Item = String> {
    REGIONS
        .iter()
        .flat_map(|(r, zs)| zs.iter().map(move |z| format!("{r}-{z}")))
}

pub fn is_region(name: &str) -> bool {
    REGIONS.iter().any(|(r, _)| *r == name)
}

/// The region of a known zone (`us-central1-a` → `us-central1`); `None` for unknown zones.
pub fn region_of(zone: &str) -> Option<&'static str> {
    REGIONS.iter().find_map(|(r, zs)| {
        let suffix = zone.strip_prefix(r)?.strip_prefix('-')?;
        zs.contains(&suffix).then_some(*r)
    })
}

pub fn zones_of(region: &str) -> Vec<String> {
    REGIONS
        .iter()
        .filter(|(r, _)| *r == region)
        .flat_map(|(r, zs)| zs.iter().map(move |z| format!("{r}-{z}")))
        .collect()
}

/// A predefined machine type: vCPUs and memory in MB, as `machineTypes.get` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineType {
    pub cpus: u32,
    pub memory_mb: u32,
}

/// The predefined series the sim offers in every zone (real zones differ: C3 and N2D are not in every zone), from
/// the Compute Engine machine family pages: (series, class, vCPU counts, MB per vCPU). The shared-core types are
/// listed apart.
const SERIES: &[(&str, &str, &[u32], u32)] = &[
    ("e2", "standard", &[2, 4, 8, 16, 32], 4096),
    ("e2", "highmem", &[2, 4, 8, 16], 8192),
    ("e2", "highcpu", &[2, 4, 8, 16, 32], 1024),
    ("n1", "standard", &[1, 2, 4, 8, 16, 32, 64, 96], 3840),
    (
        "n2",
        "standard",
        &[2, 4, 8, 16, 32, 48, 64, 80, 96, 128],
        4096,
    ),
    (
        "n2",
        "highmem",
        &[2, 4, 8, 16, 32, 48, 64, 80, 96, 128],
        8192,
    ),
    (
        "n2d",
        "standard",
        &[2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224],
        4096,
    ),
    ("n2d", "highmem", &[2, 4, 8, 16, 32, 48, 64, 80, 96], 8192),
    ("c3", "standard", &[4, 8, 22, 44, 88, 176], 4096),
    ("t2d", "standard", &[1, 2, 4, 8, 16, 32, 48, 60], 4096),
];

/// Shared-core types: (name, vCPUs, MB).
const SHARED_CORE: &[(&str, u32, u32)] = &[
    ("e2-micro", 2, 1024),
    ("e2-small", 2, 2048),
    ("e2-medium", 2, 4096),
    ("f1-micro", 1, 614),
    ("g1-small", 1, 1740),
];

/// Every predefined machine type of a zone, by name, in catalog order (the sim's zones all offer the same).
pub fn machine_types() -> impl Iterator<Item = (String, MachineType)> {
    let shared = SHARED_CORE
        .iter()
        .map(|&(name, cpus, memory_mb)| (name.to_string(), MachineType { cpus, memory_mb }));
    let series = SERIES.iter().flat_map(|&(series, class, counts, per_cpu)| {
        counts.iter().map(move |&cpus| {
            let t = MachineType {
                cpus,
                memory_mb: cpus * per_cpu,
            };
            (format!("{series}-{class}-{cpus}"), t)
        })
    });
    // C3 with local SSD, as GCE lists it beside the plain type.
    let lssd = SERIES
        .iter()
        .filter(|(series, ..)| *series == "c3")
        .flat_map(|&(series, class, counts, per_cpu)| {
            counts.iter().map(move |&cpus| {
                let t = MachineType {
                    cpus,
                    memory_mb: cpus * per_cpu,
                };
                (format!("{series}-{class}-{cpus}-lssd"), t)
            })
        });
    shared.chain(series).chain(lssd)
}

/// The predefined type `name`, if the sim's zones offer it.
pub fn machine_type(name: &str) -> Option<MachineType> {
    machine_types().find(|(n, _)| n == name).map(|(_, t)| t)
}

/// A custom type (`custom-4-16384`, `n2-custom-8-32768-ext`): not listed, made to measure at insert.
pub fn is_custom_machine_type(name: &str) -> bool {
    let rest = match name.split_once("custom-") {
        Some((series, rest)) if series.is_empty() || series.ends_with('-') => rest,
        _ => return false,
    };
    let rest = rest.strip_suffix("-ext").unwrap_or(rest);
    let mut parts = rest.split('-');
    let numbers = (parts.next(), parts.next(), parts.next());
    matches!(numbers, (Some(c), Some(m), None)
        if c.parse::<u32>().is_ok() && m.parse::<u32>().is_ok())
}

/// A stable numeric id for a catalog entry, so zone/region ids do not change across restarts.
pub fn stable_id(name: &str) -> u64 {
    // FNV-1a: tiny, deterministic, good enough to give distinct ids to a dozen names.
    name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_image_is_found_in_every_form_insert_takes_and_only_when_published() {
        let url =
            "http://127.0.0.1:1/compute/v1/projects/cos-cloud/global/images/family/cos-stable";
        for (reference, want) in [
            (url, Some("cos-stable-121-18867-294-5")),
            (
                "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64",
                Some("ubuntu-2404-noble-amd64-v20261118"),
            ),
            (
                "projects/debian-cloud/global/images/debian-12-bookworm-v20261118",
                Some("debian-12-bookworm-v20261118"),
            ),
            (
                "projects/debian-cloud/zones/-/imageFamilyViews/debian-12",
                Some("debian-12-bookworm-v20261118"),
            ),
            (
                "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts",
                None,
            ),
            (
                "projects/cos-cloud/global/images/family/ubuntu-2404-lts-amd64",
                None,
            ),
            ("global/images/family/cos-stable", None),
            ("cos-stable", None),
        ] {
            assert_eq!(
                image_named(reference, "walk").map(|i| i.name),
                want,
                "{reference}"
            );
        }
        assert_eq!(
            image_named("global/images/family/cos-stable", "cos-cloud").map(|i| i.family),
            Some("cos-stable")
        );
    }

    #[test]
    fn zones_map_to_their_region() {
        assert_eq!(region_of("us-central1-f"), Some("us-central1"));
        assert_eq!(region_of("europe-west1-b"), Some("europe-west1"));
        assert_eq!(region_of("europe-west1-a"), None);
        assert_eq!(region_of("us-central1"), None);
        assert_eq!(zones().count(), 10);
        assert_eq!(
            zones_of("europe-west1"),
            ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
        );
    }
}

/// A public boot image the sim's catalogue lists: its project, name and family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub project: &'static str,
    pub name: &'static str,
    pub family: &'static str,
}

/// Public images, one per family (the newest; GCE keeps older ones too, deprecated): the families a master may boot
/// from (docs/guides/gce.md: Ubuntu LTS, Container-Optimized OS) and gcloud's default (Debian). A family not here
/// is answered 404, as GCE answers a family nobody publishes.
pub const IMAGES: &[Image] = &[
    Image {
        project: "ubuntu-os-cloud",
        name: "ubuntu-2404-noble-amd64-v20261118",
        family: "ubuntu-2404-lts-amd64",
    },
    Image {
        project: "ubuntu-os-cloud",
        name: "ubuntu-2204-jammy-v20261118",
        family: "ubuntu-2204-lts",
    },
    Image {
        project: "cos-cloud",
        name: "cos-stable-121-18867-294-5",
        family: "cos-stable",
    },
    Image {
        project: "cos-cloud",
        name: "cos-121-18867-294-5",
        family: "cos-121-lts",
    },
    Image {
        project: "debian-cloud",
        name: "debian-12-bookworm-v20261118",
        family: "debian-12",
    },
];

/// The image a `sourceImage` names (a URL, `projects/P/global/images/NAME`, `projects/P/global/images/family/F`,
/// `global/images/...` in `project`, or the `projects/P/zones/Z/imageFamilyViews/F` gcloud sends for
/// `--image-family`), if the catalogue has it; `None` for a reference of another shape too.
pub fn image_named(reference: &str, project: &str) -> Option<Image> {
    let rel = reference
        .split_once("/projects/")
        .map_or(reference, |(_, r)| r)
        .trim_start_matches("projects/");
    if let Some((owner, rest)) = rel.split_once("/zones/")
        && let Some((_, family)) = rest.split_once("/imageFamilyViews/")
    {
        return IMAGES
            .iter()
            .copied()
            .find(|i| i.project == owner && i.family == family);
    }
    let (owner, rest) = match rel.split_once("/global/images/") {
        Some((owner, rest)) => (owner, rest),
        None => (project, rel.strip_prefix("global/images/")?),
    };
    IMAGES.iter().copied().find(|i| {
        i.project == owner
            && match rest.strip_prefix("family/") {
                Some(family) => i.family == family,
                None => i.name == rest,
            }
    })
}
