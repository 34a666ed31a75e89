//! Whether a replica VM's metadata is still what the provider wrote: its startup configuration (`user-data`, see
//! docs/master-config.md) and `cluster-name`. The provider owns the whole set, as Google's provider owns an
//! instance's `metadata`: an item removed, changed or added by hand is drift, and the repair writes the set back.

use std::collections::BTreeMap;

/// One sentence per item that differs between what the provider wrote and what the VM carries, in key order.
/// Values are never quoted: `user-data` holds private keys.
pub fn metadata_drift(
    wrote: &BTreeMap<String, String>,
    carries: &[(String, String)],
) -> Vec<String> {
    let carries: BTreeMap<&str, &str> = carries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut drift = Vec::new();
    for (key, value) in wrote {
        match carries.get(key.as_str()) {
            None => drift.push(format!("metadata item {key} was removed from the VM")),
            Some(have) if have != value => {
                drift.push(format!("metadata item {key} was changed on the VM"))
            }
            Some(_) => {}
        }
    }
    for key in carries.keys().filter(|k| !wrote.contains_key(**k)) {
        drift.push(format!("metadata item {key} was added to the VM"));
    }
    drift
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrote() -> BTreeMap<String, String> {
        [
            ("cluster-name", "walk"),
            ("user-data", "#cloud-config\nsecret"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn items(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// (what the VM carries, the sentences expected)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);

    #[test]
    fn each_kind_of_hand_edit_is_one_sentence_and_no_value_is_quoted() {
        let cases: &[Case] = &[
            // Untouched, in whatever order GCE lists the items.
            (
                &[
                    ("user-data", "#cloud-config\nsecret"),
                    ("cluster-name", "walk"),
                ],
                &[],
            ),
            (
                &[("cluster-name", "walk")],
                &["metadata item user-data was removed from the VM"],
            ),
            (
                &[
                    ("cluster-name", "walk"),
                    ("user-data", "#cloud-config\nedited"),
                ],
                &["metadata item user-data was changed on the VM"],
            ),
            (
                &[
                    ("cluster-name", "walk"),
                    ("user-data", "#cloud-config\nsecret"),
                    ("ssh-keys", "me:ssh-ed25519 AAAA"),
                ],
                &["metadata item ssh-keys was added to the VM"],
            ),
            (
                &[],
                &[
                    "metadata item cluster-name was removed from the VM",
                    "metadata item user-data was removed from the VM",
                ],
            ),
        ];
        for (carries, want) in cases {
            let got = metadata_drift(&wrote(), &items(carries));
            assert_eq!(got, *want, "{carries:?}");
            assert!(got.iter().all(|s| !s.contains("secret")), "{got:?}");
        }
    }
}
