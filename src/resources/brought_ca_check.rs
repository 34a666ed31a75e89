//! How plan checks a CA its user brings (`ca_certificate`, or `next_ca_certificate` for a rotation of it): a CA
//! certificate that has not expired, and a PKCS#8 key that is its own, each fault said at the attribute to fix.

use tfplugin::diag::{AttributePath, Diagnostics};

use ha_pki::{CertKey, PkiError};

/// What the key must look like, for every refusal that names it.
const KEY_FORMAT: &str = "The key must be the CA certificate's own, PEM PKCS#8 (`-----BEGIN PRIVATE KEY-----`, \
     ECDSA P-256/P-384, Ed25519 or RSA); convert another form with `openssl pkcs8 -topk8 -nocrypt -in ca.key`.";

/// The clock a brought CA is judged by: read here, compared by `ha_pki`.
pub(super) fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The attributes a plan's errors are said at, for tests that check each refusal lands where the user fixes it.
#[cfg(test)]
pub(super) fn errors_at(d: &Diagnostics) -> Vec<String> {
    d.iter()
        .filter(|d| d.severity == tfplugin::diag::Severity::Error)
        .map(|d| format!("{:?}", d.attribute))
        .collect()
}

/// A brought CA (`cert` and `key`, given at `attributes`: the certificate's, the key's) as plan checks it,
/// reported at the attribute at fault.
pub(super) fn check_at(
    cert: &str,
    key: &str,
    (cert_attribute, key_attribute): (&str, &str),
    diags: &mut Diagnostics,
) {
    let ca = CertKey {
        cert_pem: cert.to_string(),
        key_pem: key.to_string(),
    };
    if let Err(e) = ha_pki::check_brought_ca(&ca, now()) {
        let (at, what) = match &e {
            PkiError::LoadCa { reason, .. }
                if reason.starts_with("private key") || reason.contains("match") =>
            {
                (key_attribute, format!("{e}. {KEY_FORMAT}"))
            }
            _ => (
                cert_attribute,
                format!(
                    "{e}. It must be a CA certificate (basicConstraints CA:TRUE) that has not expired, PEM."
                ),
            ),
        };
        diags.attr_error(
            AttributePath::attr(at),
            "The cluster CA you brought cannot sign",
            what,
        );
    }
}
