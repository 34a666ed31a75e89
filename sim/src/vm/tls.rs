//! TLS material from the VM's files: the API server's serving config and the etcd client config it uses for health.
//!
//! The provider is pinned to ring explicitly (not the process default) because other crates in the workspace may enable
//! a second rustls provider, and then the implicit default would be ambiguous.

use super::VmError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(what: &str, path: &Path, e: impl std::fmt::Display) -> VmError {
    VmError::Tls(format!("{what} {}: {e}", path.display()))
}

pub(crate) fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, VmError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_err("read certificates", path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_err("parse certificates", path, e))?;
    if certs.is_empty() {
        return Err(tls_err(
            "read certificates",
            path,
            "no PEM CERTIFICATE block",
        ));
    }
    Ok(certs)
}

pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, VmError> {
    // Accepts PKCS#8, SEC1 ("EC PRIVATE KEY", what cfssl writes) and PKCS#1 RSA keys.
    PrivateKeyDer::from_pem_file(path).map_err(|e| tls_err("read private key", path, e))
}

/// The API server's serving config: its own cert chain, and client certificates verified against `--client-ca-file`
/// when one is given. As Go's `VerifyClientCertIfGiven`, which kube-apiserver uses: a client without a certificate
/// connects (and is anonymous), one whose certificate does not verify under the CA fails the handshake.
pub(crate) fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, VmError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| VmError::Tls(format!("TLS versions: {e}")))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in load_certs(ca)? {
                roots
                    .add(c)
                    .map_err(|e| tls_err("trust client CA", ca, e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| tls_err("verify clients under", ca, e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(load_certs(cert)?, load_key(key)?)
        .map_err(|e| tls_err("use serving certificate", cert, e))?;
    Ok(Arc::new(config))
}

/// A client config trusting `ca` and presenting `cert`/`key` (etcd runs with --client-cert-auth).
pub(crate) fn client_config(
    ca: &Path,
    cert: &Path,
    key: &Path,
) -> Result<Arc<rustls::ClientConfig>, VmError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in load_certs(ca)? {
        roots.add(c).map_err(|e| tls_err("trust CA", ca, e))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| VmError::Tls(format!("TLS versions: {e}")))?
        .with_root_certificates(roots)
        .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
        .map_err(|e| tls_err("use client certificate", cert, e))?;
    Ok(Arc::new(config))
}
