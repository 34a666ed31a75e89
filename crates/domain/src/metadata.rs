//! Whether a replica VM's metadata is still what the provider wrote: its startup configuration (`user-data`, see
//! docs/master-config.md) and `cluster-name`. The provider owns the whole set, as Google's provider owns an
//! instance's `metadata`: an item removed, changed or added by hand is drift.
//!
//! State keeps a digest of each item the provider wrote, never its value (`startup_metadata`, replica schema
//! version 3): a copy would put the whole startup configuration in every state version and saved plan, and a
//! master an earlier release made keeps its private keys in it. So a repair can write an item back only when it
//! still holds a value with the recorded digest: the VM's own (the item is unchanged) or one the provider makes
//! from the cluster's settings (`cluster-name`). `user-data` cannot be made again without the certificates the VM
//! was built with, which no state keeps, so a `user-data` removed or changed by hand is repaired by rebuilding the
//! VM (`must_rebuild`), with a fresh startup configuration and certificates, as a roll does.

use std::collections::BTreeMap;

/// The items the provider can make again from the cluster's settings alone.
pub const REMADE_ITEMS: [&str; 1] = ["cluster-name"];

/// How the state records an item's value: `sha256:` and the hex of its SHA-256.
pub fn digest(value: &str) -> String {
    let sum = ring::digest::digest(&ring::digest::SHA256, value.as_bytes());
    let hex: String = sum.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The digest of every item of a VM's metadata, as the state records them.
pub fn digests<'a>(
    items: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> BTreeMap<String, String> {
    items
        .into_iter()
        .map(|(k, v)| (k.clone(), digest(v)))
        .collect()
}

/// What happened to one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    Removed,
    Changed,
    Added,
}

impl Edit {
    const ALL: [Edit; 3] = [Edit::Removed, Edit::Changed, Edit::Added];

    fn words(self) -> &'static str {
        match self {
            Edit::Removed => "was removed from the VM",
            Edit::Changed => "was changed on the VM",
            Edit::Added => "was added to the VM",
        }
    }
}

/// One item that differs between what the provider wrote and what the VM carries. The state records it as its
/// sentence (`drift`), which [`ItemDrift::parse`] reads back at plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemDrift {
    pub key: String,
    pub edit: Edit,
}

impl ItemDrift {
    /// `metadata item KEY was …`. Values are never quoted.
    pub fn sentence(&self) -> String {
        format!("metadata item {} {}", self.key, self.edit.words())
    }

    /// The item a [`ItemDrift::sentence`] names; none for any other text.
    pub fn parse(sentence: &str) -> Option<ItemDrift> {
        let rest = sentence.strip_prefix("metadata item ")?;
        Edit::ALL.into_iter().find_map(|edit| {
            let key = rest.strip_suffix(edit.words())?.strip_suffix(' ')?;
            (!key.is_empty()).then(|| ItemDrift {
                key: key.to_string(),
                edit,
            })
        })
    }

    /// Whether writing the provider's items back needs a value neither the VM nor the settings still hold.
    fn needs_lost_value(&self) -> bool {
        self.edit != Edit::Added && !REMADE_ITEMS.contains(&self.key.as_str())
    }
}

/// Every item that differs between what the provider wrote (`wrote`: digests, as state keeps them) and what the
/// VM carries, in key order.
pub fn item_drift(
    wrote: &BTreeMap<String, String>,
    carries: &[(String, String)],
) -> Vec<ItemDrift> {
    let carries: BTreeMap<&str, &str> = carries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut drift = Vec::new();
    let mut item = |key: &str, edit| {
        drift.push(ItemDrift {
            key: key.to_string(),
            edit,
        })
    };
    for (key, recorded) in wrote {
        match carries.get(key.as_str()) {
            None => item(key, Edit::Removed),
            Some(have) if digest(have) != *recorded => item(key, Edit::Changed),
            Some(_) => {}
        }
    }
    for key in carries.keys().filter(|k| !wrote.contains_key(**k)) {
        item(key, Edit::Added);
    }
    drift
}

/// One sentence per item that differs (`item_drift`), as refresh records them in `drift`.
pub fn metadata_drift(
    wrote: &BTreeMap<String, String>,
    carries: &[(String, String)],
) -> Vec<String> {
    item_drift(wrote, carries)
        .iter()
        .map(ItemDrift::sentence)
        .collect()
}

/// Whether the drift refresh recorded (`drift`'s sentences) can be repaired only by rebuilding the VM: an item the
/// provider wrote was removed or changed, and it is one only the VM held (`user-data`).
pub fn must_rebuild(drift: &[String]) -> bool {
    drift
        .iter()
        .filter_map(|s| ItemDrift::parse(s))
        .any(|d| d.needs_lost_value())
}

/// The items to write back: each the provider wrote, with the value that has its recorded digest, from what the VM
/// carries or from what the settings make (`remade`); items added by hand are left out. `Err` names an item no
/// value is held for (the plan rebuilds the VM instead, [`must_rebuild`]).
pub fn restored(
    wrote: &BTreeMap<String, String>,
    carries: &[(String, String)],
    remade: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let carries: BTreeMap<&str, &str> = carries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    wrote
        .iter()
        .map(|(key, recorded)| {
            let held = [
                carries.get(key.as_str()).copied(),
                remade.get(key).map(String::as_str),
            ];
            held.into_iter()
                .flatten()
                .find(|v| digest(v) == *recorded)
                .map(|v| (key.clone(), v.to_string()))
                .ok_or_else(|| key.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> BTreeMap<String, String> {
        [
            ("cluster-name", "walk"),
            ("user-data", "#cloud-config\nsecret"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn wrote() -> BTreeMap<String, String> {
        digests(&values())
    }

    fn items(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_digest_is_the_sha256_of_the_value_and_never_the_value() {
        // `printf abc | sha256sum`
        assert_eq!(
            digest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(wrote().values().all(|d| !d.contains("secret")));
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

    #[test]
    fn every_sentence_reads_back_as_its_item_and_no_other_text_does() {
        for edit in Edit::ALL {
            for key in ["user-data", "ssh-keys", "a b"] {
                let d = ItemDrift {
                    key: key.into(),
                    edit,
                };
                assert_eq!(ItemDrift::parse(&d.sentence()), Some(d.clone()), "{d:?}");
            }
        }
        for other in [
            "",
            "metadata item  was added to the VM",
            "metadata item user-data was renamed",
            "the label x was changed",
        ] {
            assert_eq!(ItemDrift::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn only_a_lost_value_needs_a_rebuild() {
        let drift = |pairs: &[(&str, Edit)]| -> Vec<String> {
            pairs
                .iter()
                .map(|(key, edit)| {
                    ItemDrift {
                        key: key.to_string(),
                        edit: *edit,
                    }
                    .sentence()
                })
                .collect()
        };
        use Edit::*;
        let cases: &[(&[(&str, Edit)], bool)] = &[
            (&[], false),
            (&[("ssh-keys", Added)], false),
            // The settings make the cluster's name again.
            (&[("cluster-name", Changed)], false),
            (&[("cluster-name", Removed)], false),
            (&[("user-data", Changed)], true),
            (&[("user-data", Removed)], true),
            // A kube-up master's items, imported: only the VM held them.
            (&[("kube-env", Changed)], true),
            (&[("ssh-keys", Added), ("user-data", Changed)], true),
        ];
        for (items, want) in cases {
            assert_eq!(must_rebuild(&drift(items)), *want, "{items:?}");
        }
    }

    #[test]
    fn a_write_back_takes_each_value_with_the_recorded_digest_and_drops_what_was_added() {
        let remade = BTreeMap::from([("cluster-name".to_string(), "walk".to_string())]);
        let want = values();
        type Case<'a> = (&'a [(&'a str, &'a str)], Result<(), &'a str>);
        let cases: &[Case] = &[
            (
                &[
                    ("cluster-name", "walk"),
                    ("user-data", "#cloud-config\nsecret"),
                ],
                Ok(()),
            ),
            (
                &[
                    ("cluster-name", "x"),
                    ("user-data", "#cloud-config\nsecret"),
                    ("ssh-keys", "me:ssh-ed25519 AAAA"),
                ],
                Ok(()),
            ),
            (&[("user-data", "#cloud-config\nsecret")], Ok(())),
            (
                &[("cluster-name", "walk"), ("user-data", "edited")],
                Err("user-data"),
            ),
            (&[("cluster-name", "walk")], Err("user-data")),
        ];
        for (carries, expect) in cases {
            let got = restored(&wrote(), &items(carries), &remade);
            match expect {
                Ok(()) => assert_eq!(got, Ok(want.clone()), "{carries:?}"),
                Err(key) => assert_eq!(got, Err(key.to_string()), "{carries:?}"),
            }
        }
        // Settings that make another name do not pass for the recorded one.
        let other = BTreeMap::from([("cluster-name".to_string(), "other".to_string())]);
        let got = restored(
            &wrote(),
            &items(&[("user-data", "#cloud-config\nsecret")]),
            &other,
        );
        assert_eq!(got, Err("cluster-name".to_string()));
    }
}
