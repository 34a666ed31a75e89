//! Zones and regions. A GCE zone name is its region plus a one-letter suffix (`europe-west1-b` is in
//! `europe-west1`); the rules here decide where a replica may live.

use super::Problem;

/// The region a zone belongs to, or `None` if the name is not zone-shaped.
pub fn region_of(zone: &str) -> Option<&str> {
    let (region, suffix) = zone.rsplit_once('-')?;
    let well_formed = suffix.len() == 1
        && suffix.as_bytes()[0].is_ascii_lowercase()
        && check_region(region).is_ok();
    well_formed.then_some(region)
}

/// Checks a region name's shape (`<area>-<location><digit>`, e.g. `us-central1`, `europe-west1`).
pub fn check_region(region: &str) -> Result<(), Problem> {
    let parts: Vec<&str> = region.split('-').collect();
    let ok = parts.len() == 2
        && !parts[0].is_empty()
        && parts[0].bytes().all(|b| b.is_ascii_lowercase())
        && parts[1].len() >= 2
        && parts[1].as_bytes()[0].is_ascii_lowercase()
        && parts[1].bytes().last().is_some_and(|b| b.is_ascii_digit())
        && parts[1]
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err((
            format!("Invalid region {region:?}"),
            "A region looks like `europe-west1` or `us-central1`. Run `gcloud compute regions list` to see them.".into(),
        ))
    }
}

pub fn check_zone(zone: &str) -> Result<(), Problem> {
    if region_of(zone).is_some() {
        Ok(())
    } else {
        Err((
            format!("Invalid zone {zone:?}"),
            "A zone is a region followed by a letter, like `europe-west1-b`. Run `gcloud compute zones list` to see them.".into(),
        ))
    }
}

/// Where a replica may be placed, given its cluster.
pub fn check_replica_zone(
    zone: &str,
    cluster_region: &str,
    cluster_zone: &str,
    multizone: bool,
) -> Result<(), Problem> {
    check_zone(zone)?;
    if region_of(zone) != Some(cluster_region) {
        return Err((
            format!("Zone {zone:?} is not in the cluster's region {cluster_region:?}"),
            format!(
                "Every replica must be in the cluster's region, because they share one regional static IP and load balancer. Choose a zone of {cluster_region}, such as {cluster_region}-b."
            ),
        ));
    }
    if !multizone && zone != cluster_zone {
        return Err((
            format!("Zone {zone:?} differs from the cluster's zone {cluster_zone:?}"),
            format!(
                "The cluster is not multizone, so every replica runs in {cluster_zone}. Remove `zone` from this replica, or set `multizone = true` on the cluster to spread replicas over zones."
            ),
        ));
    }
    Ok(())
}

/// Judges a zone against the zones its region has, as Compute Engine lists them: `None` if it is one of them, else
/// the sentence for the user, naming the closest (by edit distance, then name) so a typo is one edit away from fixed.
pub fn check_zone_exists(zone: &str, region: &str, zones: &[String]) -> Option<Problem> {
    if zones.iter().any(|z| z == zone) {
        return None;
    }
    let closest = zones
        .iter()
        .min_by_key(|z| (strsim::levenshtein(zone, z), z.as_str()))
        .map(|z| format!(" The closest is `{z}`."))
        .unwrap_or_default();
    Some((
        format!("Zone {zone} does not exist"),
        format!(
            "Compute Engine lists these zones in {region}: {}.{closest} Run `gcloud compute zones list --filter=region:{region}` to see them.",
            zones.join(", ")
        ),
    ))
}

/// The sentence for a region Compute Engine does not know.
pub fn unknown_region(region: &str) -> Problem {
    (
        format!("Region {region} does not exist"),
        "Compute Engine does not know this region. Run `gcloud compute regions list` to see the regions your project can use.".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_of_zones() {
        assert_eq!(region_of("europe-west1-b"), Some("europe-west1"));
        assert_eq!(region_of("us-central1-f"), Some("us-central1"));
        assert_eq!(
            region_of("northamerica-northeast2-a"),
            Some("northamerica-northeast2")
        );
        for bad in [
            "europe-west1",
            "europe-west1-",
            "europe-west1-bb",
            "us-central-a",
            "",
            "b",
        ] {
            assert_eq!(region_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn replica_placement() {
        assert!(
            check_replica_zone("europe-west1-b", "europe-west1", "europe-west1-b", false).is_ok()
        );
        assert!(
            check_replica_zone("europe-west1-c", "europe-west1", "europe-west1-b", true).is_ok()
        );
        let (s, d) = check_replica_zone("europe-west1-c", "europe-west1", "europe-west1-b", false)
            .unwrap_err();
        assert!(
            s.contains("differs") && d.contains("multizone = true"),
            "{s} {d}"
        );
        let (s, _) = check_replica_zone("us-central1-a", "europe-west1", "europe-west1-b", true)
            .unwrap_err();
        assert!(s.contains("not in the cluster's region"), "{s}");
        assert!(check_replica_zone("nonsense", "europe-west1", "europe-west1-b", true).is_err());
    }

    #[test]
    fn a_zone_that_does_not_exist_is_named_with_the_closest_that_does() {
        let zones: Vec<String> = ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
            .map(String::from)
            .into();
        assert_eq!(
            check_zone_exists("europe-west1-c", "europe-west1", &zones),
            None
        );
        for (typo, closest) in [
            // One edit from every zone: the first by name.
            ("europe-west1-q", "europe-west1-b"),
            ("europe-west1-z", "europe-west1-b"),
            ("europe-west1-dd", "europe-west1-d"),
            ("europe-wset1-c", "europe-west1-c"),
        ] {
            let (summary, detail) = check_zone_exists(typo, "europe-west1", &zones).unwrap();
            assert_eq!(summary, format!("Zone {typo} does not exist"));
            assert!(
                detail.contains(&format!("The closest is `{closest}`.")),
                "{typo}: {detail}"
            );
            assert!(
                detail.contains("europe-west1-b, europe-west1-c, europe-west1-d"),
                "{detail}"
            );
        }
        // A region with no zones listed still gets a sentence.
        let (_, detail) = check_zone_exists("x-y1-a", "x-y1", &[]).unwrap();
        assert!(!detail.contains("closest"), "{detail}");
    }
}
