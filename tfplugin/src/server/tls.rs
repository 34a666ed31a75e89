//! AutoMTLS, go-plugin style: a fresh server certificate per process, and only the client that launched us may
//! connect, proven by presenting the exact certificate it put in `PLUGIN_CLIENT_CERT`.
//!
//! Traps this module exists to avoid (each reproduced against real clients):
//! - go-plugin's client certificate is self-signed with CA:TRUE. The WebPKI verifier rejects a CA used as an end
//!   entity (`CaUsedAsEndEntity`), so we pin the certificate byte for byte instead of building a chain.
//! - That certificate is ECDSA P-521, which `ring` cannot verify. If the server's CertificateRequest does not list
//!   a P-521 scheme, the Go client sends no certificate at all. Signature verification therefore comes from
//!   aws-lc-rs, while everything else uses `ring`: aws-lc's first use of its RNG costs ~25 ms per process.
//! - grpc-go 1.80 (Terraform 1.15) refuses a server that does not select ALPN `h2`.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme,
};

/// The TLS side of the handshake: the config to accept connections with, and our certificate's DER for the
/// handshake line.
pub(crate) struct ServerTls {
    pub config: Arc<ServerConfig>,
    pub cert_der: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("PLUGIN_CLIENT_CERT holds no PEM certificate")]
    NoClientCert,
    #[error("PLUGIN_CLIENT_CERT is not valid PEM: {0}")]
    BadClientCert(String),
    #[error("generating the server certificate: {0}")]
    ServerCert(#[from] rcgen::Error),
    #[error("building the TLS server configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Builds the mutual-TLS configuration for a client whose certificate is `client_cert_pem`.
pub(crate) fn server_tls(client_cert_pem: &str) -> Result<ServerTls, TlsError> {
    let pinned = parse_client_certs(client_cert_pem)?;
    let provider = Arc::new(hybrid_provider());

    // rcgen is built with `ring` only, so key generation stays off aws-lc (see the module docs). SAN localhost,
    // because go-plugin verifies the server as "localhost" with our certificate as its only root.
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let cert_der = certified.cert.der().to_vec();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));

    let verifier = PinnedClientCert {
        pinned,
        algorithms: provider.signature_verification_algorithms,
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(vec![CertificateDer::from(cert_der.clone())], key)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        cert_der,
    })
}

/// `ring` for key exchange, ciphers and randomness (fast to start); aws-lc-rs's signature verification, which
/// covers ECDSA P-521.
fn hybrid_provider() -> CryptoProvider {
    CryptoProvider {
        signature_verification_algorithms: rustls::crypto::aws_lc_rs::default_provider()
            .signature_verification_algorithms,
        ..rustls::crypto::ring::default_provider()
    }
}

fn parse_client_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadClientCert(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::NoClientCert);
    }
    Ok(certs)
}

/// Accepts exactly the certificate(s) from `PLUGIN_CLIENT_CERT`, and checks that the peer holds the private key
/// (the handshake signature). No chain, no expiry, no name checks: the pin is stronger than all of them, and
/// go-plugin's certificate is a CA, which chain validation would reject.
#[derive(Debug)]
struct PinnedClientCert {
    pinned: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for PinnedClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    /// What the CertificateRequest advertises; it must include the P-521 schemes or the Go client sends nothing.
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_schemes_include_p521() {
        let algorithms = hybrid_provider().signature_verification_algorithms;
        let v = PinnedClientCert {
            pinned: vec![],
            algorithms,
        };
        assert!(
            v.supported_verify_schemes()
                .contains(&SignatureScheme::ECDSA_NISTP521_SHA512)
        );
        assert!(v.root_hint_subjects().is_empty());
    }

    #[test]
    fn only_the_pinned_certificate_is_accepted() {
        let a = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let v = parse_client_certs(&a.cert.pem()).unwrap();
        let verifier = PinnedClientCert {
            pinned: v,
            algorithms: hybrid_provider().signature_verification_algorithms,
        };
        let now = UnixTime::now();
        assert!(verifier.verify_client_cert(a.cert.der(), &[], now).is_ok());
        assert!(verifier.verify_client_cert(b.cert.der(), &[], now).is_err());
    }

    #[test]
    fn bad_pem_is_an_error_not_a_panic() {
        assert!(matches!(
            parse_client_certs("not a certificate"),
            Err(TlsError::NoClientCert)
        ));
        let broken = "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n";
        assert!(parse_client_certs(broken).is_err());
    }

    #[test]
    fn server_config_offers_h2() {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let tls = server_tls(&c.cert.pem()).unwrap();
        assert_eq!(tls.config.alpn_protocols, vec![b"h2".to_vec()]);
        assert!(!tls.cert_der.is_empty());
    }
}
