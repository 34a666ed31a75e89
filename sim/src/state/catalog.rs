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
