//! The apply's look at the masters as they run before the cluster moves to another stage of a rotation of its
//! service-account key (`domain::service_account_rotation` says which stages there are and why): every master
//! must run the keys of the stage the cluster is at, read from its own files, before any rolls onto the next.

use ha_domain::service_account_rotation::{MasterKeys, ROTATION};
use ha_master::paths;
use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::observe::observe;

/// Refused, with the masters behind named, unless every master VM signs and verifies service-account tokens with
/// the keys of the stage `ctx`'s spec is at (its keys are the cluster's before this apply changes them). Run
/// before anything changes.
pub async fn check_stage(ctx: &ClusterCtx, deadline: Instant) -> Result<()> {
    let spec = &ctx.spec;
    let current = fingerprint_of_private(&spec.service_account_key)?;
    let next = spec
        .next_service_account_key
        .as_deref()
        .map(fingerprint_of_private)
        .transpose()?;
    let snap = observe(ctx, &[], deadline).await?;
    let mut masters = Vec::new();
    for vm in snap.instances.values() {
        let files = super::adopt::files_with_keys(&ctx.settings, vm).await?;
        let unreadable = || {
            OpError::Other(format!(
                "VM {}: its service-account keys cannot be read from its files",
                vm.name
            ))
        };
        let signs = files
            .get(paths::SERVICE_ACCOUNT_KEY)
            .ok_or_else(unreadable)
            .and_then(|k| fingerprint_of_private(k).map_err(|_| unreadable()))?;
        let verifies = files
            .get(paths::SERVICE_ACCOUNT_PUB)
            .and_then(|p| ha_pki::public_key_fingerprints(p).ok())
            .ok_or_else(unreadable)?;
        masters.push(MasterKeys {
            master: vm.name.clone(),
            signs,
            verifies: verifies.into_iter().collect(),
        });
    }
    ROTATION
        .masters_ready(
            &masters,
            spec.master.service_account_key_rotation,
            &current,
            next.as_deref(),
        )
        .map_err(|(summary, detail)| OpError::Refused(summary, detail))
}

fn fingerprint_of_private(private_pem: &str) -> Result<String> {
    let public = ha_pki::service_account_public_key(private_pem)?;
    ha_pki::public_key_fingerprints(&public)?
        .pop()
        .ok_or_else(|| OpError::Other("a service-account key without a public half".into()))
}
