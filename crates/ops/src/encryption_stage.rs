//! The apply's look at the cluster as it runs before its masters roll onto another stage of their Secrets
//! encryption keys (`domain::secrets_encryption` says which stages there are and why). Its own file because it
//! reads the masters and etcd through a cluster context, which itself reads keys through `secrets_encryption`.

use std::collections::BTreeMap;

use ha_domain::secrets_encryption::{
    MasterKeys, encrypted_with, masters_ready, nothing_left_under,
};
use ha_master::SecretsKey;
use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::observe::observe;

/// Where the API servers keep Secrets in etcd (kube-apiserver's default `--etcd-prefix`, `/registry`, which masters
/// keep).
const SECRETS_PREFIX: &str = "/registry/secrets/";

/// Before the masters roll onto another stage of their keys, the cluster as it runs is checked
/// (`domain::secrets_encryption`): every master reads the key the stage writes with, none writes with a key the
/// stage forgets, and no Secret in etcd is under a key it forgets. The plan judged the stages from state; a roll of
/// the previous stage that failed or was skipped, or Secrets not yet rewritten, are seen only here. Run under the
/// cluster's lock, before anything changes.
pub async fn check_stage(ctx: &ClusterCtx, deadline: Instant) -> Result<()> {
    let keys = ctx.secrets_keys().await?;
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
