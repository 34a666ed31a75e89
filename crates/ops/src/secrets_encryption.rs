//! The key the API servers encrypt Secrets with, read from the Secret Manager version the cluster's
//! `secrets_encryption_key` names (`domain::secrets_encryption` says why the user owns it). The provider reads it
//! only when it renders a master, which puts it in that replica's own secret; it is never in Terraform state, nor
//! in instance metadata.

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};

use ha_domain::secrets_encryption::{
    MasterKeys, encrypted_with, masters_ready, nothing_left_under,
};
use ha_master::SecretsKey;
use ha_settings::Settings;
use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::observe::observe;

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

/// Where the API servers keep Secrets in etcd (kube-apiserver's default `--etcd-prefix`, `/registry`, which masters
/// keep).
const SECRETS_PREFIX: &str = "/registry/secrets/";

/// Before the masters roll onto another stage of their keys, the cluster as it runs is checked
/// (`domain::secrets_encryption`): every master reads the key the stage writes with, none writes with a key the
/// stage forgets, and no Secret in etcd is under a key it forgets. The plan judged the stages from state; a roll of
/// the previous stage that failed or was skipped, or Secrets not yet rewritten, are seen only here. Run under the
/// cluster's lock, before anything changes.
pub async fn check_stage(ctx: &ClusterCtx, deadline: Instant) -> Result<()> {
    let keys = ctx.secrets_key().await?;
    let writes = keys
        .as_ref()
        .and_then(|k| k.writes.as_ref())
        .map(SecretsKey::name);
    let reads = keys.map(|k| k.names()).unwrap_or_default();
    let snap = observe(ctx, &[], deadline).await?;
    let mut masters = Vec::new();
    for vm in snap.instances.values() {
        let files = super::adopt::files_with_keys(&ctx.settings, vm).await?;
        masters.push(MasterKeys {
            master: vm.name.clone(),
            writes: files.secrets_key_name(),
            reads: files.secrets_key_names(),
        });
    }
    let refused = |(summary, detail): (String, String)| OpError::Refused(summary, detail);
    masters_ready(&masters, writes.as_deref(), &reads).map_err(refused)?;
    // No member runs (every replica deleted, or none made yet): no API server reads etcd, and a replica made later
    // from a snapshot has its keys checked by the restore (`domain::restore::check_secrets_key`).
    if snap.targets.is_empty() {
        return Ok(());
    }
    let mut under: BTreeMap<String, usize> = BTreeMap::new();
    ctx.etcd
        .scan_prefix(&snap.targets, SECRETS_PREFIX, |_, value| {
            if let Some(name) = encrypted_with(value) {
                *under.entry(name.to_string()).or_default() += 1;
            }
        })
        .await?;
    nothing_left_under(&under, &reads).map_err(refused)
}
