//! A CA that can sign: generated fresh, or loaded back from the PEM pair kept in Terraform state. Everything that
//! touches rcgen's signing API lives here, so the rest of the module speaks only in PEM strings.

use super::{CertKey, PkiError};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use std::net::{IpAddr, Ipv4Addr};
use time::{Duration, OffsetDateTime};

/// CAs outlive many replica generations: a cluster is expected to be rebuilt before ten years pass.
const CA_VALIDITY: Duration = Duration::days(3652);
/// Leaf certificates are re-issued whenever a replica is replaced; kube-up used 43800h (5 years) for etcd.
const LEAF_VALIDITY: Duration = Duration::days(1826);
/// Tolerate small clock skew between the machine running Terraform and the masters.
const BACKDATE: Duration = Duration::minutes(5);

/// What a leaf certificate is for; decides key usage and extended key usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
    /// etcd peers dial and accept each other with the same certificate.
    ServerAndClient,
}

/// Subject and names of a leaf certificate.
#[derive(Debug, Clone, Default)]
pub struct LeafSpec {
    pub common_name: String,
    /// Kubernetes reads O as the user's groups (e.g. `system:nodes`).
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ips: Vec<Ipv4Addr>,
}

/// A CA certificate with its signing key.
pub struct Issuer {
    cert_pem: String,
    /// The CA's own expiry: no leaf it signs outlives it (a chain is invalid once any link has expired).
    not_after: OffsetDateTime,
    inner: rcgen::Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Issuer {
    // The signing key is never printed; the certificate is public.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("cert_pem", &self.cert_pem)
            .field("key", &"<redacted>")
            .finish()
    }
}

pub(super) fn p256() -> Result<KeyPair, PkiError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| PkiError::Generate {
        what: "ECDSA P-256 key".into(),
        reason: e.to_string(),
    })
}

fn validity(params: &mut CertificateParams, lifetime: Duration) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + lifetime;
}

impl Issuer {
    /// A new self-signed CA with a fresh P-256 key.
    pub fn generate(common_name: &str) -> Result<(Issuer, CertKey), PkiError> {
        let gen_err = |e: rcgen::Error| PkiError::Generate {
            what: format!("CA {common_name:?}"),
            reason: e.to_string(),
        };
        let key = p256()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        // pathlen 0: these CAs sign only leaves; a stolen leaf key can never mint more certificates.
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, CA_VALIDITY);
        let cert = params.self_signed(&key).map_err(gen_err)?;
        let pair = CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        let issuer = Issuer {
            cert_pem: pair.cert_pem.clone(),
            not_after: params.not_after,
            inner: rcgen::Issuer::new(params, key),
        };
        Ok((issuer, pair))
    }

    /// Loads a CA kept as PEM (certificate + PKCS#8 key), checking that the key belongs to the certificate so a
    /// mixed-up state fails here rather than as an unverifiable certificate on a master.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Issuer, PkiError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| PkiError::LoadCa {
            ca: "CA".into(),
            reason: format!("private key: {e}"),
        })?;
        let (is_ca, spki, not_after) = inspect_ca(cert_pem)?;
        if !is_ca {
            return Err(PkiError::LoadCa {
                ca: "CA".into(),
                reason: "certificate is not a CA (basicConstraints CA:FALSE or absent)".into(),
            });
        }
        if spki != rcgen::PublicKeyData::subject_public_key_info(&key) {
            return Err(PkiError::LoadCa {
                ca: "CA".into(),
                reason: "private key does not match the certificate's public key".into(),
            });
        }
        let inner =
            rcgen::Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| PkiError::LoadCa {
                ca: "CA".into(),
                reason: format!("certificate: {e}"),
            })?;
        Ok(Issuer {
            cert_pem: cert_pem.to_string(),
            not_after,
            inner,
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// When the CA expires: the latest expiry a leaf it signs gets.
    pub fn expires_at(&self) -> OffsetDateTime {
        self.not_after
    }

    /// Issues a leaf certificate with a fresh P-256 key, valid for a replica's lifetime.
    pub fn issue(&self, spec: &LeafSpec, usage: Usage) -> Result<CertKey, PkiError> {
        self.issue_for(spec, usage, LEAF_VALIDITY)
    }

    /// Issues a leaf certificate with a fresh P-256 key that expires `lifetime` from now.
    pub fn issue_for(
        &self,
        spec: &LeafSpec,
        usage: Usage,
        lifetime: Duration,
    ) -> Result<CertKey, PkiError> {
        let now = OffsetDateTime::now_utc();
        self.issue_until(spec, usage, now + lifetime)
    }

    /// Issues a leaf certificate with a fresh P-256 key that expires at `not_after`, or when the CA does if that is
    /// sooner (valid from 5 minutes ago). A leaf that outlived its CA would still be refused after the CA's expiry,
    /// by every verifier, while its expiry said otherwise.
    pub fn issue_until(
        &self,
        spec: &LeafSpec,
        usage: Usage,
        not_after: OffsetDateTime,
    ) -> Result<CertKey, PkiError> {
        let gen_err = |e: rcgen::Error| PkiError::Generate {
            what: format!("certificate {:?}", spec.common_name),
            reason: e.to_string(),
        };
        let key = p256()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        for org in &spec.organizations {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org.as_str());
        }
        params
            .distinguished_name
            .push(DnType::CommonName, spec.common_name.as_str());
        for dns in &spec.dns_names {
            let name = dns.clone().try_into().map_err(gen_err)?;
            params.subject_alt_names.push(SanType::DnsName(name));
        }
        for ip in &spec.ips {
            params
                .subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(*ip)));
        }
        // ECDSA keys only sign; key encipherment is meaningless for them.
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = match usage {
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::ServerAndClient => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        params.use_authority_key_identifier_extension = true;
        params.not_before = OffsetDateTime::now_utc() - BACKDATE;
        params.not_after = not_after.min(self.not_after);
        let cert = params.signed_by(&key, &self.inner).map_err(gen_err)?;
        Ok(CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Whether a PEM certificate is a CA, its DER SubjectPublicKeyInfo, and its expiry.
fn inspect_ca(cert_pem: &str) -> Result<(bool, Vec<u8>, OffsetDateTime), PkiError> {
    let bad = |reason: String| PkiError::LoadCa {
        ca: "CA".into(),
        reason,
    };
    let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .map_err(|e| bad(format!("certificate PEM: {e}")))?;
    let cert = block
        .parse_x509()
        .map_err(|e| bad(format!("certificate DER: {e}")))?;
    let is_ca = cert
        .basic_constraints()
        .map_err(|e| bad(format!("basicConstraints: {e}")))?
        .is_some_and(|bc| bc.value.ca);
    Ok((
        is_ca,
        cert.tbs_certificate.subject_pki.raw.to_vec(),
        cert.validity().not_after.to_datetime(),
    ))
}
