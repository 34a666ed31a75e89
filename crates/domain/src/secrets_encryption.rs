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

/// Whether the cluster may go from `before` (its state; `None` before it exists) to `after` (the configuration):
/// a new cluster takes any key, an existing one keeps the one it was made with.
pub fn change(exists: bool, before: Option<&str>, after: Option<&str>) -> Result<(), Problem> {
    if !exists || before == after {
        return Ok(());
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

#[cfg(test)]
mod tests {
    use super::*;

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
