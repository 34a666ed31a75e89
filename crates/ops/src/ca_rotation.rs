//! The apply's look at the masters as they run before the cluster moves to another stage of a rotation of its CAs
//! (`domain::ca_rotation` says which stages there are and why): every master must trust exactly the CAs of the
//! stage the cluster is at, and present certificates the stage's issuing CAs signed, read from its own files,
//! before any rolls onto the next.

use ha_domain::ca_rotation::{Ca, MasterKeys, ROTATION};
use ha_master::paths;
use ha_pki::{CertKey, ClusterCas};
use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::{OpError, Result};
use super::observe::observe;

/// Where a master keeps the CA bundle it trusts of each kind, and a certificate that kind issued to it.
fn files_of(ca: Ca) -> (&'static str, &'static str) {
    match ca {
        Ca::Cluster => (paths::CA, paths::APISERVER_CRT),
        Ca::EtcdPeer => (paths::ETCD_CA, paths::ETCD_PEER_CRT),
        Ca::EtcdClient => (paths::ETCD_CLIENT_CA, paths::ETCD_SERVER_CRT),
    }
}

fn of(cas: &ClusterCas, ca: Ca) -> &CertKey {
    match ca {
        Ca::Cluster => &cas.cluster_ca,
        Ca::EtcdPeer => &cas.etcd_peer_ca,
        Ca::EtcdClient => &cas.etcd_client_ca,
    }
}

/// Refused, with the masters behind named, unless every master VM trusts the CAs of the stage `ctx`'s spec is at
/// and presents certificates its issuing CAs signed (its CAs are the cluster's before this apply changes them).
/// Run before anything changes.
pub async fn check_stage(ctx: &ClusterCtx, deadline: Instant) -> Result<()> {
    let spec = &ctx.spec;
    let snap = observe(ctx, &[], deadline).await?;
    let mut files = Vec::new();
    for vm in snap.instances.values() {
        files.push((
            vm.name.clone(),
            super::adopt::files_with_keys(&ctx.settings, vm).await?,
        ));
    }
    for ca in Ca::ALL {
        let current = &of(&spec.cas, ca).cert_pem;
        let next = spec.next_cas.as_ref().map(|n| &of(n, ca).cert_pem);
        let fingerprint = |pem: &str| Ok::<_, OpError>(ha_pki::sha256_fingerprint(pem)?);
        let (current_fp, next_fp) = (
            fingerprint(current)?,
            next.map(|n| fingerprint(n)).transpose()?,
        );
        let (trust_file, leaf_file) = files_of(ca);
        let mut masters = Vec::new();
        for (vm, files) in &files {
            let unreadable = || {
                OpError::Other(format!(
                    "VM {vm}: its {} and the certificates it issued cannot be read from its files",
                    ca.name()
                ))
            };
            let trusted = files
                .get(trust_file)
                .and_then(|b| ha_pki::certificate_fingerprints(b).ok())
                .ok_or_else(unreadable)?;
            let leaf = files.get(leaf_file).ok_or_else(unreadable)?;
            let issuer = [Some(current), next]
                .into_iter()
                .flatten()
                .find(|ca_pem| ha_pki::issued_by(leaf, ca_pem).unwrap_or(false));
            masters.push(MasterKeys {
                master: format!("{vm} ({})", ca.name()),
                // A certificate neither CA issued matches no stage.
                signs: issuer.map_or(Ok(String::new()), |p| fingerprint(p))?,
                verifies: trusted.into_iter().collect(),
            });
        }
        ROTATION
            .masters_ready(
                &masters,
                spec.master.ca_rotation,
                &current_fp,
                next_fp.as_deref(),
            )
            .map_err(|(summary, detail)| OpError::Refused(summary, detail))?;
    }
    Ok(())
}
