//! The key the API servers encrypt Secrets with, read from the Secret Manager version the cluster's
//! `secrets_encryption_key` names (`domain::secrets_encryption` says why the user owns it). The provider reads it
//! only when it renders a master, which puts it in that replica's own secret; it is never in Terraform state, nor
//! in instance metadata.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use ha_master::SecretsKey;
use ha_settings::Settings;

use super::error::{OpError, Result};

/// Keys already read by this process, by version name: a version's payload never changes, so one read serves
/// every replica of a plan or an apply.
static READ: LazyLock<Mutex<HashMap<String, SecretsKey>>> = LazyLock::new(Default::default);

/// The key in version `reference`; refused, naming the version and the way out, when it is not there or is not
/// a key. Plan calls it too, so a wrong version is heard of before anything is made.
pub async fn read(settings: &Settings, reference: &str) -> Result<SecretsKey> {
    if let Some(key) = READ
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(reference)
    {
        return Ok(key.clone());
    }
    let version = ha_domain::secrets_encryption::parse(reference)
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    let secrets = ha_secrets::Secrets::connect(settings, &version.project).await?;
    let payload = secrets
        .read(&version.secret, Some(version.version))
        .await?
        .ok_or_else(|| {
            OpError::Refused(
                format!("secrets_encryption_key {reference}: no such secret version"),
                "Create it, e.g. `head -c 32 /dev/urandom | gcloud secrets versions add SECRET --data-file=-`, \
                 and name the version it prints; the provider's credentials need \
                 `secretmanager.versions.access` on the secret. A version that was disabled or destroyed cannot be \
                 read either: enable it again (`gcloud secrets versions enable`)."
                    .into(),
            )
        })?;
    let key = SecretsKey::from_payload(&payload).map_err(|why| {
        OpError::Refused(
            format!("secrets_encryption_key {reference} is not a key: {why}"),
            "Add a version that holds 32 random bytes (`head -c 32 /dev/urandom | gcloud secrets versions add \
             SECRET --data-file=-`) and name it."
                .into(),
        )
    })?;
    READ.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(reference.to_string(), key.clone());
    tracing::info!(
        "secrets encryption key {} read from {reference}",
        key.name()
    );
    Ok(key)
}
