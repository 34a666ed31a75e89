//! The cluster's `secrets_encryption_key`: the Secret Manager secret version that holds the key the API servers
//! encrypt Kubernetes Secrets in etcd with (ha-master's `encryption` module renders what they run).
//!
//! The user owns the secret, not the cluster, because a snapshot is only as good as its key: a cluster destroyed
//! or restored elsewhere must still find the key its backups need, so the key must outlive the cluster. A version
//! is named explicitly (never `latest`): the key of a running cluster cannot change under it, since its API
//! servers could not read what they wrote before.
//!
//! Only a new cluster takes a key, and the key stays: turning encryption on, off or to another key on a running
//! cluster is a staged change (every API server must first read the new key, then write with it, then every
//! Secret be rewritten, then the old key go), which is not built yet. [`change`] refuses it at plan.

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

/// Whether the cluster may go from `before` (its state; `None` before it exists) to `after` (the configuration):
/// a new cluster takes any key, an existing one keeps the one it was made with. An imported cluster whose masters
/// encrypt must be given the version that holds their key: the plan reads it and compares ([`adopt`]).
pub fn change(exists: bool, before: Option<&str>, after: Option<&str>) -> Result<(), Problem> {
    if !exists || before == after {
        return Ok(());
    }
    if let Some(name) = before.and_then(adopted) {
        return match after {
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
    let what = match (before, after) {
        (None, Some(_)) => "turn on encryption of Secrets for a running cluster",
        (Some(_), None) => "turn off encryption of Secrets for a running cluster",
        _ => "change the key of a running cluster",
    };
    Err((
        format!("secrets_encryption_key cannot {what}"),
        format!(
            "Its API servers would stop reading the Secrets they wrote: a change of key must be staged (every API server \
             reads the new key, then writes with it, then every Secret is rewritten), and this provider does not stage \
             it yet. Keep the value the cluster was made with ({}); a new cluster takes a key when it is created.",
            before.map_or("none".to_string(), |b| format!("{b:?}"))
        ),
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
        let (summary, detail) = change(true, Some(NAME), None).unwrap_err();
        assert!(summary.contains("must name the key"), "{summary}");
        assert!(detail.contains(NAME), "{detail}");
        assert_eq!(change(true, Some(NAME), Some(V)), Ok(()));
        assert_eq!(adopt(NAME, V, NAME), Ok(()));
        let (_, detail) = adopt(NAME, V, "ha-ffffffffffffffff").unwrap_err();
        assert!(
            detail.contains(NAME) && detail.contains("ha-ffffffffffffffff"),
            "{detail}"
        );
        // A cluster made without a key, or with a version, is unchanged by this: no turning on.
        assert!(change(true, None, Some(V)).is_err());
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

    #[test]
    fn only_a_new_cluster_takes_a_key_and_an_existing_one_keeps_its_own() {
        let k1 = Some("projects/p/secrets/s/versions/1");
        let k2 = Some("projects/p/secrets/s/versions/2");
        for (exists, before, after, ok) in [
            (false, None, k1, true),
            (false, None, None, true),
            (true, k1, k1, true),
            (true, None, None, true),
            (true, None, k1, false),
            (true, k1, None, false),
            (true, k1, k2, false),
        ] {
            let got = change(exists, before, after);
            assert_eq!(got.is_ok(), ok, "{exists} {before:?} -> {after:?}: {got:?}");
            if let Err((summary, detail)) = got {
                assert!(
                    summary.starts_with("secrets_encryption_key cannot"),
                    "{summary}"
                );
                assert!(detail.contains("staged"), "{detail}");
            }
        }
    }
}
