//! The cluster's `secrets_encryption_key`: the Secret Manager secret version that holds the key the API servers
//! encrypt Kubernetes Secrets in etcd with (ha-master's `encryption` module renders what they run).
//!
//! The user owns the secret, not the cluster, because a snapshot is only as good as its key: a cluster destroyed
//! or restored elsewhere must still find the key its backups need, so the key must outlive the cluster. A version
//! is named explicitly (never `latest`): the key of a running cluster cannot change under it, since its API
//! servers could not read what they wrote before.
//!
//! A running cluster changes its key in stages, each one a roll of every replica ([`change`] refuses a step that
//! is not safe): a key is first only read (`secrets_decryption_keys`), then written with once every API server
//! reads it, and the old key, still read, goes only when no Secret is left under it, which the apply checks in
//! etcd before it lets a master forget a key. Turning encryption on and off are the same stages with plain
//! (`identity`, always read) as the other end. docs/guides/secrets.md walks the user through them.

use super::Problem;

/// `projects/<project>/secrets/<secret>/versions/<n>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyVersion {
    pub project: String,
    pub secret: String,
    pub version: u64,
}

/// The version named by `reference`, or why it is not one.
pub fn parse(reference: &str) -> Result<KeyVersion, Problem> {
    let refused = |why: &str| {
        (
            format!("secrets_encryption_key {reference:?} is not a Secret Manager secret version"),
            format!(
                "{why}. Name one version explicitly, as `projects/PROJECT/secrets/SECRET/versions/1` (`gcloud secrets \
                 versions list SECRET` shows them); never `latest`, since the key must not change under a running \
                 cluster."
            ),
        )
    };
    let parts: Vec<&str> = reference.split('/').collect();
    let ["projects", project, "secrets", secret, "versions", version] = parts.as_slice() else {
        return Err(refused(
            "It must have the form projects/PROJECT/secrets/SECRET/versions/N",
        ));
    };
    if project.is_empty() || secret.is_empty() {
        return Err(refused("The project and the secret must both be named"));
    }
    // Secret Manager's secret ids: letters, digits, `-` and `_`, at most 255.
    if secret.len() > 255
        || !secret
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(refused(
            "A secret id has only letters, digits, `-` and `_`, at most 255 of them",
        ));
    }
    let version = version
        .parse::<u64>()
        .ok()
        .filter(|v| *v > 0 && !version.starts_with('0'))
        .ok_or_else(|| {
            refused(&format!(
                "The version must be a number from 1, not {version:?}"
            ))
        })?;
    Ok(KeyVersion {
        project: project.to_string(),
        secret: secret.to_string(),
        version,
    })
}

/// The key an imported cluster's masters encrypt with, as its state names it: the key's name (`ha-<16 hex>`,
/// ha-master's `SecretsKey::name`), since nothing on a master names the Secret Manager version it came from. The
/// configuration must then name a version that holds that very key ([`adopt`]). None when `state` is a version.
pub fn adopted(state: &str) -> Option<&str> {
    let hex = state.strip_prefix("ha-")?;
    (hex.len() == 16 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then_some(state)
}

/// The keys a cluster's API servers use, by Secret Manager version: the one every write uses (`secrets_encryption_key`;
/// none writes plain) and those only read (`secrets_decryption_keys`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keys<'a> {
    pub writes: Option<&'a str>,
    pub reads: &'a [String],
}

impl Keys<'_> {
    /// Whether API servers with these keys read what `key` (a version) encrypted.
    pub fn read(&self, key: &str) -> bool {
        self.writes == Some(key) || self.reads.iter().any(|r| r == key)
    }
}

/// Whether the cluster may go from `before` (its state; `None` before it exists) to `after` (the configuration).
/// A new cluster takes any keys. A running one changes one stage at a time, because its replicas roll one after
/// another and the API servers of both stages serve side by side meanwhile:
/// - it writes with a key only once every API server reads it (`after.writes` was read before), or some would meet
///   Secrets they cannot read;
/// - it keeps reading the key it wrote with (`before.writes` stays read), since the API servers not yet rolled
///   still write with it.
///
/// A key read and no longer wanted may go: the apply checks that no Secret in etcd is still under it first.
/// An imported cluster whose masters encrypt must be given the version that holds their key: the plan reads it and
/// compares ([`adopt`]).
pub fn change(exists: bool, before: Keys<'_>, after: Keys<'_>) -> Result<(), Problem> {
    if let Some(dup) = after.writes.filter(|w| after.reads.iter().any(|r| r == w)) {
        return Err((
            "secrets_decryption_keys names the key secrets_encryption_key writes with".into(),
            format!(
                "{dup} is in both. The key every write uses is read as well: list only the keys the API servers \
                 should read and no longer write with in `secrets_decryption_keys`."
            ),
        ));
    }
    if let Some(dup) = after
        .reads
        .iter()
        .enumerate()
        .find_map(|(i, r)| after.reads[..i].contains(r).then_some(r))
    {
        return Err((
            "secrets_decryption_keys names a version twice".into(),
            format!("{dup} is listed twice; list each version once."),
        ));
    }
    if !exists || before == after {
        return Ok(());
    }
    if let Some(name) = before.writes.and_then(adopted) {
        return match after.writes {
            Some(_) => Ok(()),
            None => Err((
                "secrets_encryption_key must name the key this cluster's masters encrypt with"
                    .into(),
                format!(
                    "The masters of this imported cluster encrypt Secrets with key {name}, and nothing on them names \
                     the Secret Manager version it came from. Set `secrets_encryption_key` to that version \
                     (`projects/<project>/secrets/<secret>/versions/<n>`): the plan reads it and checks it holds \
                     {name}. Left unset, the next roll would start API servers that cannot read a single Secret."
                ),
            )),
        };
    }
    if let Some(new) = after.writes.filter(|w| !before.read(w)) {
        return Err((
            format!(
                "secrets_encryption_key cannot {} before every API server reads it",
                if before.writes.is_none() {
                    "turn on encryption of Secrets with a key"
                } else {
                    "change to a key"
                }
            ),
            format!(
                "The replicas roll one at a time, so API servers still without {new} would meet Secrets the rolled \
                 ones wrote with it and could not read them. Stage it: first add {new:?} to \
                 `secrets_decryption_keys` and keep `secrets_encryption_key` as it is ({}), apply (every replica \
                 rolls and reads the key), then make it `secrets_encryption_key`. See docs/guides/secrets.md.",
                before
                    .writes
                    .map_or("unset".to_string(), |b| format!("{b:?}"))
            ),
        ));
    }
    if let Some(old) = before.writes.filter(|w| !after.read(w)) {
        return Err((
            "secrets_decryption_keys must keep the key the masters write with".into(),
            format!(
                "The running API servers write Secrets with {old}, and those not yet rolled go on writing with it \
                 during the roll: keep {old:?} in `secrets_decryption_keys` until every Secret is rewritten under \
                 the new setting (`kubectl get secrets --all-namespaces -o json | kubectl replace -f -`), then \
                 remove it. See docs/guides/secrets.md."
            ),
        ));
    }
    Ok(())
}

/// The versions `before` read and `after` no longer does: the apply checks that no Secret is left under them.
pub fn dropped<'a>(before: Keys<'a>, after: Keys<'_>) -> Vec<&'a str> {
    before
        .writes
        .into_iter()
        .chain(before.reads.iter().map(String::as_str))
        .filter(|k| !after.read(k) && adopted(k).is_none())
        .collect()
}

/// The name of the key a stored value is encrypted with, from the envelope the API server writes
/// (`k8s:enc:<provider>:v1:<key name>:<ciphertext>`, `k8s:enc:kms:v2:<name>:` alike); none for a value stored
/// plain.
pub fn encrypted_with(value: &[u8]) -> Option<&str> {
    let rest = value.strip_prefix(b"k8s:enc:")?;
    let mut fields = rest.splitn(4, |b| *b == b':');
    let (_provider, _version, name) = (fields.next()?, fields.next()?, fields.next()?);
    fields.next()?;
    std::str::from_utf8(name).ok()
}

/// What one running master does with Secrets, read from the configuration on it: the key it writes with (none:
/// plain) and every key it reads, the written one included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterKeys {
    pub master: String,
    pub writes: Option<String>,
    pub reads: Vec<String>,
}

/// Whether the cluster's masters, as they run now, may be rolled one by one onto a stage that writes with key
/// `writes` and reads `reads` (names, as the configuration says them): every running master must already read
/// the key the new stage writes with, and every key a running master writes with must be one the new stage reads.
/// Plan judges the stages from state; this judges them from the masters, which a failed or partial roll of the
/// previous stage leaves behind.
pub fn masters_ready(
    masters: &[MasterKeys],
    writes: Option<&str>,
    reads: &[String],
) -> Result<(), Problem> {
    let reads_new = |m: &&MasterKeys| writes.is_none_or(|w| m.reads.iter().any(|r| r == w));
    let behind: Vec<&MasterKeys> = masters.iter().filter(|m| !reads_new(m)).collect();
    if let Some(first) = behind.first() {
        return Err((
            format!(
                "Master {} does not read key {} yet, which this change writes with",
                first.master,
                writes.unwrap_or_default()
            ),
            format!(
                "The masters {} were not rolled onto the stage that reads it (a roll failed or was skipped). \
                 Put `secrets_encryption_key` back as it was and apply until every replica has rolled, then \
                 change it again. See docs/guides/secrets.md.",
                behind
                    .iter()
                    .map(|m| m.master.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let keeps = |k: &String| writes == Some(k.as_str()) || reads.contains(k);
    if let Some(m) = masters
        .iter()
        .find(|m| m.writes.as_ref().is_some_and(|w| !keeps(w)))
    {
        return Err((
            format!(
                "Master {} still writes Secrets with key {}, which this change stops reading",
                m.master,
                m.writes.as_deref().unwrap_or_default()
            ),
            "Keep that key's version in `secrets_decryption_keys` until every replica has rolled onto a stage \
             that no longer writes with it, and every Secret is rewritten. See docs/guides/secrets.md."
                .into(),
        ));
    }
    Ok(())
}

/// Whether etcd may be left to API servers that read only `keeps` (key names): `under` counts the stored Secrets
/// by the key they are encrypted with; any under another key would become unreadable.
pub fn nothing_left_under(
    under: &std::collections::BTreeMap<String, usize>,
    keeps: &[String],
) -> Result<(), Problem> {
    let stranded: Vec<String> = under
        .iter()
        .filter(|(name, _)| !keeps.contains(name))
        .map(|(name, n)| format!("{n} under {name}"))
        .collect();
    if stranded.is_empty() {
        return Ok(());
    }
    Err((
        format!(
            "Secrets are still encrypted with a key this change stops reading: {}",
            stranded.join(", ")
        ),
        "Rewrite them under the key the masters write with now (`kubectl get secrets --all-namespaces -o json | \
         kubectl replace -f -`, with a credential that may update every Secret), then apply again. Nothing was \
         changed: the masters still read every key they read before."
            .into(),
    ))
}

/// Whether `version`, whose key is named `holds`, is the one an imported cluster's masters encrypt with
/// (`adopted`).
pub fn adopt(adopted: &str, version: &str, holds: &str) -> Result<(), Problem> {
    if adopted == holds {
        return Ok(());
    }
    Err((
        "secrets_encryption_key holds another key than the masters encrypt with".into(),
        format!(
            "{version} holds key {holds}, but this imported cluster's masters encrypt Secrets with {adopted}: with \
             it, the next roll would start API servers that cannot read a single Secret. Name the version that \
             holds the masters' key (`gcloud secrets versions list <secret>`)."
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An imported cluster's state names its masters' key; a configuration without a version for it is refused
    /// with the key's name, one with a version goes on to the read, which must find that key.
    #[test]
    fn an_imported_cluster_must_be_given_the_version_of_its_masters_key() {
        const NAME: &str = "ha-0123456789abcdef";
        const V: &str = "projects/p/secrets/k/versions/1";
        assert_eq!(adopted(NAME), Some(NAME));
        for not in [
            V,
            "ha-0123456789abcde",
            "ha-0123456789ABCDEF",
            "0123456789abcdef",
        ] {
            assert_eq!(adopted(not), None, "{not}");
        }
        let keys = |writes| Keys { writes, reads: &[] };
        let (summary, detail) = change(true, keys(Some(NAME)), keys(None)).unwrap_err();
        assert!(summary.contains("must name the key"), "{summary}");
        assert!(detail.contains(NAME), "{detail}");
        assert_eq!(change(true, keys(Some(NAME)), keys(Some(V))), Ok(()));
        assert_eq!(adopt(NAME, V, NAME), Ok(()));
        let (_, detail) = adopt(NAME, V, "ha-ffffffffffffffff").unwrap_err();
        assert!(
            detail.contains(NAME) && detail.contains("ha-ffffffffffffffff"),
            "{detail}"
        );
        // A cluster made without a key, or with a version, is unchanged by this: no turning on in one step.
        assert!(change(true, keys(None), keys(Some(V))).is_err());
    }

    #[test]
    fn an_explicit_version_parses_and_anything_else_is_refused_with_the_form() {
        assert_eq!(
            parse("projects/p-1/secrets/etcd_key-2/versions/3"),
            Ok(KeyVersion {
                project: "p-1".into(),
                secret: "etcd_key-2".into(),
                version: 3
            })
        );
        for bad in [
            "projects/p/secrets/s/versions/latest",
            "projects/p/secrets/s/versions/0",
            "projects/p/secrets/s/versions/01",
            "projects/p/secrets/s",
            "projects//secrets/s/versions/1",
            "projects/p/secrets/a.b/versions/1",
            "projects/p/secrets/s/versions/1/",
            "p/s/1",
            "",
        ] {
            let (summary, detail) = parse(bad).unwrap_err();
            assert!(
                summary.contains("secrets_encryption_key"),
                "{bad}: {summary}"
            );
            assert!(
                detail.contains("projects/PROJECT/secrets/SECRET/versions/1"),
                "{bad}: {detail}"
            );
        }
    }

    /// Every stage of turning on, changing and turning off a key, and every shortcut past one, from `(writes,
    /// reads)` to `(writes, reads)`; a refusal names the attribute to set and the guide.
    #[test]
    fn a_running_cluster_changes_its_key_one_safe_stage_at_a_time() {
        const K1: &str = "projects/p/secrets/s/versions/1";
        const K2: &str = "projects/p/secrets/s/versions/2";
        type Stage = (Option<&'static str>, &'static [&'static str]);
        let keys = |(writes, reads): Stage| {
            (
                writes,
                reads.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            )
        };
        let cases: &[(bool, Stage, Stage, Option<&str>)] = &[
            // A new cluster takes any keys; nothing changing is always fine.
            (false, (None, &[]), (Some(K1), &[K2]), None),
            (true, (Some(K1), &[]), (Some(K1), &[]), None),
            (true, (None, &[]), (None, &[]), None),
            // Turning on: read it first, then write with it.
            (true, (None, &[]), (None, &[K1]), None),
            (true, (None, &[K1]), (Some(K1), &[]), None),
            (
                true,
                (None, &[]),
                (Some(K1), &[]),
                Some("before every API server reads it"),
            ),
            // Changing: read the new one, write with it while still reading the old, then drop the old.
            (true, (Some(K1), &[]), (Some(K1), &[K2]), None),
            (true, (Some(K1), &[K2]), (Some(K2), &[K1]), None),
            (true, (Some(K2), &[K1]), (Some(K2), &[]), None),
            (
                true,
                (Some(K1), &[]),
                (Some(K2), &[K1]),
                Some("before every API server reads it"),
            ),
            (
                true,
                (Some(K1), &[K2]),
                (Some(K2), &[]),
                Some("must keep the key the masters write with"),
            ),
            // Turning off: write plain while still reading the key, then drop it.
            (true, (Some(K1), &[]), (None, &[K1]), None),
            (true, (None, &[K1]), (None, &[]), None),
            (
                true,
                (Some(K1), &[]),
                (None, &[]),
                Some("must keep the key the masters write with"),
            ),
            // Malformed whatever the stage.
            (
                false,
                (None, &[]),
                (Some(K1), &[K1]),
                Some("names the key secrets_encryption_key writes with"),
            ),
            (
                true,
                (None, &[]),
                (None, &[K1, K1]),
                Some("names a version twice"),
            ),
        ];
        for (exists, before, after, refused) in cases {
            let (bw, br) = keys(*before);
            let (aw, ar) = keys(*after);
            let got = change(
                *exists,
                Keys {
                    writes: bw,
                    reads: &br,
                },
                Keys {
                    writes: aw,
                    reads: &ar,
                },
            );
            match (refused, got) {
                (None, Ok(())) => {}
                (Some(says), Err((summary, detail))) => {
                    assert!(summary.contains(says), "{before:?} -> {after:?}: {summary}");
                    assert!(
                        summary.starts_with("secrets_"),
                        "names the attribute: {summary}"
                    );
                    assert!(!detail.is_empty());
                }
                (want, got) => panic!("{before:?} -> {after:?}: wanted {want:?}, got {got:?}"),
            }
        }
    }

    /// What the apply must find no Secret under before it lets the masters forget a key.
    #[test]
    fn the_keys_a_stage_drops_are_those_no_longer_read() {
        const K1: &str = "projects/p/secrets/s/versions/1";
        const K2: &str = "projects/p/secrets/s/versions/2";
        let one = [K1.to_string()];
        let two = [K2.to_string()];
        let k = |writes, reads| Keys { writes, reads };
        assert_eq!(dropped(k(Some(K2), &one), k(Some(K2), &[])), [K1]);
        assert_eq!(dropped(k(None, &one), k(None, &[])), [K1]);
        assert!(dropped(k(Some(K1), &[]), k(Some(K2), &one)).is_empty());
        assert!(dropped(k(Some(K1), &two), k(Some(K2), &one)).is_empty());
        // An imported cluster's key name is not a version: adopting a version drops nothing.
        assert!(dropped(k(Some("ha-0123456789abcdef"), &[]), k(Some(K1), &[])).is_empty());
    }

    #[test]
    fn a_stored_value_names_the_key_it_is_encrypted_with() {
        assert_eq!(
            encrypted_with(b"k8s:enc:secretbox:v1:ha-0123456789abcdef:\x00\x01"),
            Some("ha-0123456789abcdef")
        );
        assert_eq!(
            encrypted_with(b"k8s:enc:kms:v2:cloudkms:abc"),
            Some("cloudkms")
        );
        assert_eq!(
            encrypted_with(b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret"),
            None
        );
        assert_eq!(
            encrypted_with(b"k8s:enc:secretbox:v1:ha-x"),
            None,
            "no ciphertext after the name"
        );
        assert_eq!(encrypted_with(b"{\"kind\":\"Secret\"}"), None);
    }

    /// The masters as they run decide, not the state: one not rolled onto the stage that reads the new key, or
    /// still writing with a key the change forgets, stops it, named.
    #[test]
    fn a_stage_waits_for_every_master_to_run_the_one_before() {
        let m = |name: &str, writes: Option<&str>, reads: &[&str]| MasterKeys {
            master: name.into(),
            writes: writes.map(String::from),
            reads: reads.iter().map(|r| r.to_string()).collect(),
        };
        let s = |v: &[&str]| v.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        let both = [
            m("a", Some("k1"), &["k1", "k2"]),
            m("b", Some("k1"), &["k1", "k2"]),
        ];
        assert_eq!(masters_ready(&both, Some("k2"), &s(&["k1"])), Ok(()));
        let behind = [
            m("a", Some("k1"), &["k1", "k2"]),
            m("b", Some("k1"), &["k1"]),
        ];
        let (summary, detail) = masters_ready(&behind, Some("k2"), &s(&["k1"])).unwrap_err();
        assert!(
            summary.contains("Master b") && summary.contains("k2"),
            "{summary}"
        );
        assert!(detail.contains("b") && !detail.contains("a,"), "{detail}");
        // Writing plain needs no master to read anything; forgetting a key a master still writes with does.
        assert_eq!(masters_ready(&behind, None, &s(&["k1"])), Ok(()));
        let (summary, _) = masters_ready(&both, Some("k2"), &[]).unwrap_err();
        assert!(
            summary.contains("still writes Secrets with key k1"),
            "{summary}"
        );
        let plain = [m("a", None, &[]), m("b", None, &["k1"])];
        assert_eq!(masters_ready(&plain, None, &[]), Ok(()));
    }

    #[test]
    fn etcd_is_left_only_when_no_secret_is_under_a_forgotten_key() {
        let under =
            std::collections::BTreeMap::from([("k1".to_string(), 3), ("k2".to_string(), 1)]);
        assert_eq!(
            nothing_left_under(&under, &["k2".into(), "k1".into()]),
            Ok(())
        );
        let (summary, detail) = nothing_left_under(&under, &["k2".into()]).unwrap_err();
        assert!(
            summary.contains("3 under k1") && !summary.contains("k2"),
            "{summary}"
        );
        assert!(detail.contains("kubectl replace"), "{detail}");
        assert_eq!(nothing_left_under(&Default::default(), &[]), Ok(()));
    }
}
