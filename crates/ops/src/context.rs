//! Everything an operation on one cluster needs: its settings as plain values, its CAs, and clients for the
//! Compute API and for etcd (with the provider's own etcd client certificate, minted from the cluster's CA).

use std::time::Duration;

use ha_domain::names::DerivedNames;
use ha_etcd::{Etcd, EtcdTls};
use ha_gce::Compute;
use ha_pki as pki;
use ha_settings::Settings;

use super::error::Result;
use super::spec::Spec;

/// Clients and settings for one cluster.
pub struct ClusterCtx {
    pub spec: Spec,
    pub(crate) compute: Compute,
    pub(crate) etcd: Etcd,
    pub etcd_via_internal_ip: bool,
    /// How long a replica out of the pool keeps serving before it stops.
    pub drain_delay: Duration,
    /// How long a rolled replica must stay healthy before the next one rolls (the provider's `roll_soak`).
    pub roll_soak: Duration,
    /// The provider's `lock_ttl` (`ops::lock::Timing::with_ttl`).
    pub lock_ttl: Duration,
    pub names: DerivedNames,
    /// The provider's settings, for the backends a change reaches only sometimes (Cloud Storage, for a backup).
    pub(crate) settings: Settings,
}

/// Renew the provider's etcd client certificate with this much of its `PROVIDER_ETCD_CLIENT_LIFETIME` left (15
/// minutes): every connection it makes has at least ten minutes of slack for clock skew between the provider and
/// the masters. A lifetime at most twice this keeps any connection made with the previous certificate valid until
/// the renewal after, which forgets it.
const PROVIDER_ETCD_CLIENT_RENEW_BEFORE: Duration = Duration::from_secs(10 * 60);

/// Mints the provider's etcd client certificate from the cluster's etcd client CA, for `Etcd::renewing`.
fn provider_etcd_client_mint(cas: &pki::ClusterCas) -> ha_etcd::Mint {
    let cas = cas.clone();
    std::sync::Arc::new(move || {
        let minted = pki::provider_etcd_client(&cas).map_err(|e| e.to_string())?;
        let expires_at = pki::not_after_unix(&minted.cert_pem).map_err(|e| e.to_string())?;
        Ok(ha_etcd::MintedIdentity {
            cert_pem: minted.cert_pem,
            key_pem: minted.key_pem,
            expires_at: std::time::UNIX_EPOCH + Duration::from_secs(expires_at.max(0) as u64),
        })
    })
}

/// Why a read-only provider's reads have no answer from etcd: it holds no key to present, so it does not dial.
pub const READ_ONLY_ETCD: &str = "not dialed: the provider is read_only";

impl ClusterCtx {
    /// The keys the masters encrypt Secrets with and still read, from the versions
    /// `spec.master.secrets_encryption_key` and `secrets_decryption_keys` name; none without any. Read only where
    /// a master is rendered, a snapshot labelled or a key's end checked, never for a refresh or a delete: a version
    /// disabled later must not stop the cluster from being read or taken down.
    pub async fn secrets_keys(&self) -> Result<Option<ha_master::SecretsEncryption>> {
        let master = &self.spec.master;
        if master.secrets_encryption_key.is_none() && master.secrets_decryption_keys.is_empty() {
            return Ok(None);
        }
        let writes = match &master.secrets_encryption_key {
            Some(reference) => {
                Some(super::secrets_encryption::read(&self.settings, reference).await?)
            }
            None => None,
        };
        let mut reads = Vec::new();
        for reference in &master.secrets_decryption_keys {
            reads.push(super::secrets_encryption::read(&self.settings, reference).await?);
        }
        Ok(Some(ha_master::SecretsEncryption { writes, reads }))
    }

    /// The cluster's context, its CA keys read from their secret. A read-only provider reads none, and its
    /// context never dials etcd: reads see etcd as not answering ([`READ_ONLY_ETCD`]), and nothing can be signed.
    pub async fn new(settings: &Settings, mut spec: Spec) -> Result<ClusterCtx> {
        if !settings.read_only {
            super::cluster_keys::fill(settings, &mut spec).await?;
        }
        Self::build(settings, spec).await
    }

    /// For reading alone (`ops::health`): when the cluster's CA keys cannot be used (their secret gone or
    /// overwritten), etcd is still reached, with the API server's etcd client certificate from a master as for an
    /// imported cluster, and the refusal comes back to be reported. Nothing may be signed with such a context.
    pub async fn for_reading(
        settings: &Settings,
        spec: Spec,
    ) -> Result<(ClusterCtx, Option<String>)> {
        if settings.read_only {
            return Ok((Self::build(settings, spec).await?, None));
        }
        let mut filled = spec.clone();
        match super::cluster_keys::fill(settings, &mut filled).await {
            Ok(()) => Ok((Self::build(settings, filled).await?, None)),
            Err(refused @ crate::OpError::Refused(..)) => Ok((
                Self::build(settings, spec).await?,
                Some(refused.to_string()),
            )),
            Err(e) => Err(e),
        }
    }

    async fn build(settings: &Settings, spec: Spec) -> Result<ClusterCtx> {
        let compute = Compute::new(settings)
            .await?
            .for_project(spec.project.clone());
        // An imported cluster has no CA keys in state (they are never on a master): its etcd client certificate
        // comes from a replica's configuration instead of being minted.
        let dial_timeout = settings.etcd_dial_timeout.max(Duration::from_secs(1));
        // While the CAs rotate, members present certificates from either CA: both are trusted, and the
        // provider's own certificate comes from the CAs that issue at the stage, which every member trusts.
        let trusted = spec.trusted_cas()?.etcd_client_ca;
        let issuing = spec.issuing_cas()?.clone();
        let etcd = if settings.read_only {
            Etcd::disabled(READ_ONLY_ETCD)
        } else if issuing.etcd_client_ca.key_pem.is_empty() {
            let client = super::adopt::etcd_client_from_replicas(
                settings,
                &compute,
                &spec.region,
                &spec.name,
            )
            .await?;
            let tls = EtcdTls {
                ca_pem: trusted,
                client_cert_pem: client.cert_pem,
                client_key_pem: client.key_pem,
            };
            Etcd::new(tls, dial_timeout)
        } else {
            Etcd::renewing(
                trusted,
                provider_etcd_client_mint(&issuing),
                PROVIDER_ETCD_CLIENT_RENEW_BEFORE,
                dial_timeout,
            )
            .map_err(|e| {
                crate::OpError::Other(format!(
                    "the provider's etcd client certificate could not be minted from the cluster's etcd client \
                     CA: {e}"
                ))
            })?
        };
        Ok(ClusterCtx {
            names: spec.names(),
            spec,
            compute,
            etcd,
            etcd_via_internal_ip: settings.etcd_via_internal_ip,
            drain_delay: settings.drain_delay,
            roll_soak: settings.roll_soak,
            lock_ttl: settings.lock_ttl,
            settings: settings.clone(),
        })
    }
}
