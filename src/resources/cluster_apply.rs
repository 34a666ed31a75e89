//! Applying `ha_master_cluster`: CAs from pki, GCE objects through `ops::cluster`, the load balancer's shape judged
//! at refresh and repaired at update through `ops::repair`. Kept apart from the schema and planning in cluster.rs.

use std::time::Duration;

use tfplugin::diag::Diagnostics;
use tfplugin_framework::Val;

use super::cluster_model::{ClusterModel, key_store, spec_of};
use super::timeouts::{Op, deadline};
use crate::config::Settings;
use ha_domain::shape::drift_sentences;
use ha_ops::ClusterCtx;
use ha_ops::cloud::Cloud;
use ha_ops::cluster::{self as objects, ClusterNetwork};
use ha_ops::cluster_keys::ClusterKeys;
use ha_ops::lock::lock_cluster;
use ha_ops::refresh::observe_shared;
use ha_ops::repair::repair_shape;
use ha_pki as pki;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Reports a failure; returns `None` (nothing to save) so call sites can `return failed(...)`.
fn failed<T>(
    diags: &mut Diagnostics,
    what: &str,
    name: &str,
    e: impl std::fmt::Display,
) -> Option<T> {
    diags.error(format!("Could not {what} cluster {name}"), format!("{e}"));
    None
}

async fn compute(
    settings: &Settings,
    project: &str,
    name: &str,
    diags: &mut Diagnostics,
) -> Option<Cloud> {
    match Cloud::connect(settings, project).await {
        Ok(c) => Some(c),
        Err(e) => failed(diags, "reach the Compute API for", name, e),
    }
}

fn network(m: &ClusterModel) -> Option<(ClusterNetwork<'_>, String)> {
    Some((
        ClusterNetwork {
            name: m.name.known()?,
            region: m.region.known()?,
            network: m.network.known()?,
            api_port: u16::try_from(*m.api_port.known()?).ok()?,
            api_source_ranges: m
                .api_source_ranges
                .known()
                .map(Vec::as_slice)
                .unwrap_or(&[]),
            etcd_client_source_ranges: m
                .etcd_client_source_ranges
                .known()
                .map(Vec::as_slice)
                .unwrap_or(&[]),
        },
        m.project.known()?.clone(),
    ))
}

pub fn endpoint(ip: &str, port: i64) -> String {
    if port == 443 {
        format!("https://{ip}")
    } else {
        format!("https://{ip}:{port}")
    }
}

pub async fn create(
    settings: &Settings,
    mut p: ClusterModel,
    diags: &mut Diagnostics,
) -> Option<ClusterModel> {
    let Some((net, project)) = network(&p) else {
        diags.error(
            "The cluster's settings are not all known at apply",
            "This is a bug in the provider; please report it.",
        );
        return None;
    };
    let name = net.name.to_string();
    let c = compute(settings, &project, &name, diags).await?;
    let until = deadline(&p.timeouts, Op::Create, DEFAULT_TIMEOUT);
    let cas = match super::cluster_ca::cas_at_create(&p, &name) {
        Ok(c) => c,
        Err(e) => return failed(diags, "make the CAs of", &name, e),
    };
    let sa_key = match pki::service_account_key() {
        Ok(k) => k,
        Err(e) => return failed(diags, "make the service account key of", &name, e),
    };
    // Nothing is in state yet if this fails; the next apply's create finds what this one made (every step is
    // "ensure"), and writes the keys' secret again with its own keys.
    let keys = ClusterKeys::of(&cas, &sa_key);
    let (ip, secret) = match objects::create(&c, &net, &keys, until).await {
        Ok(made) => made,
        Err(e) => return failed(diags, "create", &name, super::advice::with_advice(&e)),
    };
    p.external_ip = Val::Known(ip.clone());
    p.endpoint = Val::Known(endpoint(&ip, p.api_port.known().copied().unwrap_or(443)));
    p.ca_certificate = Val::Known(cas.cluster_ca.cert_pem.clone());
    p.etcd_peer_ca_certificate = Val::Known(cas.etcd_peer_ca.cert_pem.clone());
    p.etcd_client_ca_certificate = Val::Known(cas.etcd_client_ca.cert_pem.clone());
    let mut spec = spec_of(&p, None);
    spec.external_ip = Val::Known(ip);
    spec.ca_certificate = Val::Known(cas.cluster_ca.cert_pem.clone());
    spec.etcd_peer_ca_certificate = Val::Known(cas.etcd_peer_ca.cert_pem.clone());
    spec.etcd_client_ca_certificate = Val::Known(cas.etcd_client_ca.cert_pem.clone());
    // The keys stay out of the spec (and so out of every replica's state): it names their secret.
    spec.ca_private_key = Val::Null;
    spec.etcd_peer_ca_private_key = Val::Null;
    spec.etcd_client_ca_private_key = Val::Null;
    spec.service_account_key = Val::Null;
    spec.keys_secret = Val::Known(secret);
    p.spec = Val::Known(spec);
    p.ca_key_store = Val::Known(key_store::SECRET_MANAGER.into());
    p.private_keys = Val::Known(super::cluster_ca::keys_for_state(&p, &keys));
    p.drift = Val::Known(Vec::new());
    // Replicas take the backups; a new cluster has none yet.
    if p.last_backup.is_unknown() {
        p.last_backup = Val::Null;
    }
    Some(p)
}

/// Refresh: the static address is the cluster's identity; without it the cluster is gone. With it, the firewall
/// rules and the keys' secret are compared with what they should be, the shape of the load balancer and static IP
/// is judged from the snapshot every read of this refresh shares, and what is wrong is recorded in `drift`, so the
/// plan shows it and the update repairs it.
pub async fn read(
    settings: &Settings,
    mut s: ClusterModel,
    diags: &mut Diagnostics,
) -> Option<ClusterModel> {
    fill_from_older_state(&mut s);
    let Some((net, project)) = network(&s) else {
        return Some(s);
    };
    let c = compute(settings, &project, net.name, diags).await?;
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    match ha_ops::cluster::exists(&c, net.region, net.name, until).await {
        Ok(true) => {}
        Ok(false) => return None,
        Err(e) => {
            failed::<()>(diags, "read", net.name, e);
            return Some(s);
        }
    }
    let cluster = net.name.to_string();
    let mut found_wrong: Vec<String> = match ha_ops::cluster::drift(&c, &net, until).await {
        Ok(sentences) => sentences,
        Err(e) => {
            failed::<()>(diags, "read the firewall rules of", net.name, e);
            Vec::new()
        }
    };
    if settings.read_only {
        if let (Some(_), Some(name)) = (keys_to_hold(&s), s.name.known()) {
            let secret = ha_domain::names::cluster_keys_secret(name);
            let (summary, detail) = ha_domain::read_only::keys_not_checked(name, &secret);
            diags.warning(summary, detail);
        }
    } else {
        found_wrong.extend(keys_drift(&c, &s, diags).await);
    }
    let Some(ctx) = context(settings, &s, diags).await else {
        return Some(s);
    };
    match observe_shared(&ctx).await {
        Ok(snap) => s.drift = Val::Known(drift_sentences(&snap.observed)),
        Err(e) => {
            failed::<()>(diags, "observe the load balancer of", &cluster, e);
        }
    }
    // Once each: a refresh whose observation failed keeps the drift it had, which may say so already.
    if let Val::Known(drift) = &mut s.drift {
        for sentence in found_wrong {
            if !drift.contains(&sentence) {
                drift.push(sentence);
            }
        }
    }
    read_last_backup(settings, &mut s, diags).await;
    Some(s)
}

/// What is wrong with the cluster's keys' secret, as a `drift` sentence: gone, or holding other keys than the
/// cluster's state. The update writes it back (`ha_ops::cluster::update`). A secret that cannot be read is a warning.
async fn keys_drift(c: &Cloud, s: &ClusterModel, diags: &mut Diagnostics) -> Option<String> {
    let keys = keys_to_hold(s)?;
    let name = s.name.known()?;
    let secret = ha_domain::names::cluster_keys_secret(name);
    match ha_ops::cluster_keys::holds(c, name, &keys).await {
        Ok(true) => None,
        Ok(false) => Some(format!(
            "Secret {secret} does not hold the cluster's CA keys (deleted, disabled or overwritten); the apply \
             writes them back from the cluster's state."
        )),
        Err(e) => {
            diags.warning(
                format!("Could not read cluster {name}'s keys secret"),
                format!(
                    "{}. The provider's credentials need `secretmanager.versions.access` on secret {secret}; \
                     replicas cannot be signed without it.",
                    e.explain()
                ),
            );
            None
        }
    }
}

/// The keys the cluster's secret must hold (an update writes them back when it does not: a migration from
/// `terraform_state`, or a secret found missing at refresh); none when its keys are kept in state alone.
fn keys_to_hold(p: &ClusterModel) -> Option<ClusterKeys> {
    p.keys_in_secret().then(|| p.keys_held()).flatten()
}

/// `last_backup`: the newest snapshot in the bucket. A bucket that cannot be listed leaves the value as it was,
/// with a warning: a refresh never fails for a backup it only reports.
async fn read_last_backup(settings: &Settings, s: &mut ClusterModel, diags: &mut Diagnostics) {
    let Some(spec) = s.spec.known() else {
        return;
    };
    let (Some(policy), Some(name)) = (spec.backup_policy(), s.name.known().cloned()) else {
        s.last_backup = Val::Null;
        return;
    };
    match ha_ops::backup::latest(settings, &policy, &name).await {
        Ok(latest) => s.last_backup = latest.map_or(Val::Null, Val::Known),
        Err(e) => diags.warning(
            format!("Could not list the backups of cluster {name}"),
            format!(
                "{}. `last_backup` keeps the value it had. Check that bucket {} exists and that the \
                 provider's credentials may list its objects.",
                e.explain(),
                policy.bucket
            ),
        ),
    }
}

/// State written before `deletion_protection` existed: the cluster is protected, as the default says, so
/// upgrading the provider plans nothing.
pub fn fill_from_older_state(s: &mut ClusterModel) {
    if s.deletion_protection.is_null() {
        s.deletion_protection = Val::Known(true);
    }
    if s.etcd_version.is_null() {
        s.etcd_version = Val::Known(ha_domain::etcd_version::LEGACY.into());
    }
    if s.data_disk_type.is_null() {
        s.data_disk_type = Val::Known(ha_domain::master_spec::DEFAULT_DATA_DISK_TYPE.into());
    }
    if s.certificate_validity.is_null() {
        s.certificate_validity = Val::Known(ha_domain::certificates::DEFAULT_VALIDITY.into());
    }
    if s.certificate_renew_before.is_null() {
        s.certificate_renew_before =
            Val::Known(ha_domain::certificates::DEFAULT_RENEW_BEFORE.into());
    }
    // Masters made before `kubernetes_version` run 1.28.15.
    if s.kubernetes_version.is_null() {
        s.kubernetes_version = Val::Known(ha_domain::kubernetes_version::LEGACY.into());
    }
    // Before `default_labels` a cluster's objects carried its own labels only.
    if s.effective_labels.is_null() {
        s.effective_labels = Val::Known(s.labels.known().cloned().unwrap_or_default());
    }
    if let Val::Known(spec) = &mut s.spec {
        spec.fill_from_older_state();
    }
    // Made before `ca_key_store`: the keys are in `spec` (none at all for an imported cluster).
    if s.ca_key_store.is_null()
        && s.spec
            .known()
            .and_then(super::cluster_model::PrivateKeys::from_spec)
            .is_some()
    {
        s.ca_key_store = Val::Known(super::cluster_model::key_store::TERRAFORM_STATE.into());
    }
}

/// The cluster's operation context, from its spec in state (complete once the cluster exists).
async fn context(
    settings: &Settings,
    m: &ClusterModel,
    diags: &mut Diagnostics,
) -> Option<ClusterCtx> {
    let name = m.name.known().cloned().unwrap_or_default();
    let built = match m.ops_spec()? {
        Ok(spec) => ClusterCtx::new(settings, spec).await,
        Err(e) => Err(e),
    };
    match built {
        Ok(ctx) => Some(ctx),
        Err(e) => failed(diags, "prepare the operations on", &name, e),
    }
}

/// Firewall rules follow the configuration; then, under the cluster's lock, the load balancer and static IP are put
/// back into shape from a fresh observation (whatever refresh recorded in `drift`, and anything that moved since).
pub async fn update(
    settings: &Settings,
    prior: ClusterModel,
    mut p: ClusterModel,
    diags: &mut Diagnostics,
) -> Option<ClusterModel> {
    if p.last_backup.is_unknown() {
        p.last_backup = prior.last_backup.clone();
    }
    let until = deadline(&p.timeouts, Op::Update, DEFAULT_TIMEOUT);
    if !rotate_keys(settings, &prior, &mut p, until, diags).await {
        return Some(prior);
    }
    let Some((net, project)) = network(&p) else {
        return Some(prior);
    };
    let name = net.name.to_string();
    let c = compute(settings, &project, &name, diags).await?;
    // Another stage of the Secrets encryption keys: judged against the masters and etcd as they are, before
    // anything changes, so a refusal leaves the cluster and its state as they were.
    if (prior.secrets_encryption_key != p.secrets_encryption_key
        || prior.secrets_decryption_keys != p.secrets_decryption_keys)
        && !check_encryption_stage(settings, &p, until, diags).await
    {
        return Some(prior);
    }
    // The keys first: replicas planned with this spec read them from the secret.
    let certificates = super::cluster_rotation::CaCertificates::of(&p)
        .and_then(|c| ha_pki::certificates_in(&c.cluster).ok())
        .unwrap_or_default();
    match objects::update(&c, &net, keys_to_hold(&p).as_ref(), &certificates, until).await {
        Ok(()) => {}
        Err(ha_ops::OpError::BroughtCaKeyNeeded { which, .. }) => {
            super::cluster_ca::key_needed_at_apply(&name, which, diags);
            return Some(prior);
        }
        Err(e) => {
            failed::<()>(diags, "update", &name, super::advice::with_advice(&e));
            return Some(prior);
        }
    }
    // A restore from a snapshot, or a start with an empty etcd, is the replicas' to run (the first to rejoin
    // restores or founds, `domain::restore`, `domain::start_empty`): the cluster has no VM to repair the load
    // balancer around until they have. So is a change of the `restore` block at the same generation, as after a
    // restore that failed: the replicas that did not finish restore again with it (the repair would wait for an
    // API that has no etcd yet).
    if (super::cluster_model::recovery_planned(Some(&prior), &p) || prior.restore != p.restore)
        && p.spec
            .known()
            .is_some_and(|s| s.snapshot_choice().is_some() || s.starts_empty())
    {
        return Some(p);
    }
    let Some(ctx) = context(settings, &p, diags).await else {
        return Some(prior);
    };
    let lock = match lock_cluster(&ctx, "repair the load balancer", until).await {
        Ok(lock) => lock,
        Err(e) => {
            failed::<()>(
                diags,
                "repair the load balancer of",
                &name,
                super::advice::with_advice(&e),
            );
            p.drift = prior.drift.clone();
            return Some(p);
        }
    };
    // A recovery first: the shape's repair waits for the API at the static IP, which needs etcd's quorum.
    if super::cluster_model::recovery_planned(Some(&prior), &p)
        && let Err(e) = ha_ops::recover::recover(&ctx, until).await
    {
        lock.release().await;
        failed::<()>(
            diags,
            "recover etcd of",
            &name,
            super::advice::with_advice(&e),
        );
        // The generation stays where it was, so the next plan shows the recovery again (resumed from the VMs).
        p.restore = prior.restore.clone();
        if let (Val::Known(spec), Some(old)) = (&mut p.spec, prior.spec.known()) {
            spec.restore_generation = old.restore_generation.clone();
        }
        p.drift = prior.drift.clone();
        return Some(p);
    }
    let repaired = repair_shape(&ctx, until).await;
    lock.release().await;
    match repaired {
        Ok(steps) => {
            if !steps.is_empty() {
                tracing::info!("{name}: load balancer and static IP back in shape");
            }
            p.drift = Val::Known(Vec::new());
            Some(p)
        }
        Err(e) => {
            failed::<()>(
                diags,
                "repair the load balancer of",
                &name,
                super::advice::with_advice(&e),
            );
            // The firewall rules are repaired; the drift stays recorded, so the next plan shows it again.
            p.drift = prior.drift.clone();
            Some(p)
        }
    }
}

/// `ha_ops::encryption_stage::check_stage` under the cluster's lock, so no roll runs while the masters are read;
/// false, with the error reported, when the stage may not start.
/// Another stage of a rotation of the service-account key or the CAs: the masters are checked to run the stage
/// before, then the keys in `p` move (`cluster_rotation::rotated`), with the CA certificates when the CAs' do,
/// before the secret is written with them. False when the apply must stop, with why said; nothing changed then.
async fn rotate_keys(
    settings: &Settings,
    prior: &ClusterModel,
    p: &mut ClusterModel,
    until: tokio::time::Instant,
    diags: &mut Diagnostics,
) -> bool {
    // The masters run the keys of the stage `prior` records.
    if prior.service_account_key_rotation != p.service_account_key_rotation {
        let check = ha_ops::service_account_rotation::check_stage;
        let what = "rotate the service-account key";
        if !checked_under_lock(settings, prior, what, check, until, diags).await {
            return false;
        }
    }
    if prior.ca_rotation != p.ca_rotation {
        let check = ha_ops::ca_rotation::check_stage;
        if !checked_under_lock(settings, prior, "rotate the CAs", check, until, diags).await {
            return false;
        }
    }
    // The next CAs are named after when they were made, so an operator reading a certificate tells them apart.
    let generation = time::OffsetDateTime::now_utc().unix_timestamp().to_string();
    match super::cluster_rotation::rotated(prior, p, &generation) {
        Some(Ok(rotated)) => {
            p.private_keys = Val::Known(rotated.keys);
            if let Some(certificates) = &rotated.certificates {
                let brought = prior.brings_own_ca();
                super::cluster_rotation::CaCertificates::set(p, Some(certificates), brought);
            }
        }
        Some(Err(e)) => {
            let name = prior.name.known().cloned().unwrap_or_default();
            failed::<()>(diags, "rotate the keys of", &name, e);
            return false;
        }
        None => {}
    }
    true
}

async fn check_encryption_stage(
    settings: &Settings,
    p: &ClusterModel,
    until: tokio::time::Instant,
    diags: &mut Diagnostics,
) -> bool {
    let check = ha_ops::encryption_stage::check_stage;
    checked_under_lock(
        settings,
        p,
        "change the Secrets encryption keys",
        check,
        until,
        diags,
    )
    .await
}

/// A look at the cluster as it runs before a change of stage rolls anything (`check`), under the cluster's lock so
/// no other change moves the masters meanwhile; false, with the refusal said as "Could not <doing> of <cluster>",
/// otherwise.
async fn checked_under_lock(
    settings: &Settings,
    m: &ClusterModel,
    doing: &str,
    check: impl AsyncFnOnce(&ClusterCtx, tokio::time::Instant) -> Result<(), ha_ops::OpError>,
    until: tokio::time::Instant,
    diags: &mut Diagnostics,
) -> bool {
    let name = m.name.known().cloned().unwrap_or_default();
    let Some(ctx) = context(settings, m, diags).await else {
        return false;
    };
    let checked = async {
        let lock = lock_cluster(&ctx, doing, until).await?;
        let checked = check(&ctx, until).await;
        lock.release().await;
        checked
    }
    .await;
    match checked {
        Ok(()) => true,
        Err(e) => {
            let doing = format!("{doing} of");
            failed::<()>(diags, &doing, &name, super::advice::with_advice(&e));
            false
        }
    }
}

pub async fn delete(settings: &Settings, s: ClusterModel, diags: &mut Diagnostics) {
    let Some((net, project)) = network(&s) else {
        return;
    };
    let Some(c) = compute(settings, &project, net.name, diags).await else {
        return;
    };
    let until = deadline(&s.timeouts, Op::Delete, DEFAULT_TIMEOUT);
    if let Err(e) = objects::delete(&c, &net, until).await {
        failed::<()>(diags, "delete", net.name, super::advice::with_advice(&e));
    }
}
