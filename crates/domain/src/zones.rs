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
}
