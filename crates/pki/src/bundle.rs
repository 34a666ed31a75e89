//! CA bundles: several CA certificates in one PEM file, as every master trusts both CAs while the cluster's CAs
//! rotate (`domain::ca_rotation`). kube-apiserver's `--client-ca-file`, etcd's `--trusted-ca-file` and a
//! kubeconfig's `certificate-authority-data` all take one.

use super::{PkiError, Result, sha256_fingerprint};

const END: &str = "-----END CERTIFICATE-----";

/// Each certificate of a PEM bundle, in order, each its own PEM ending in a newline; an error when any block is
/// not a certificate, or there is none.
pub fn certificates_in(bundle: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(bundle.as_bytes()) {
        let block = block.map_err(|e| not_bundle(format!("a PEM block cannot be read: {e}")))?;
        if block.label != "CERTIFICATE" {
            return Err(not_bundle(format!(
                "it holds a {} where certificates belong",
                block.label
            )));
        }
    }
    for part in bundle.split_inclusive(END) {
        let Some(begin) = part.find("-----BEGIN") else {
            continue;
        };
        out.push(format!("{}\n", part[begin..].trim_end()));
    }
    if out.is_empty() {
        return Err(not_bundle("it holds no certificate".into()));
    }
    Ok(out)
}

/// The `i`th CA of a bundle (0: the current CA; 1, while the CAs rotate: the next); the text as it is when it is no
/// bundle of certificates or has no such one, so that loading it as a CA says what is wrong where it is used.
pub fn certificate_of_bundle(bundle: &str, i: usize) -> String {
    certificates_in(bundle)
        .ok()
        .and_then(|certs| certs.into_iter().nth(i))
        .unwrap_or_else(|| bundle.to_string())
}

/// The certificates as one bundle, in the order given.
pub fn bundle_of<'a>(certs: impl IntoIterator<Item = &'a str>) -> String {
    certs
        .into_iter()
        .map(|c| format!("{}\n", c.trim_end()))
        .collect()
}

/// The SHA-256 fingerprint of each certificate of a bundle (`sha256_fingerprint`).
pub fn certificate_fingerprints(bundle: &str) -> Result<Vec<String>> {
    certificates_in(bundle)?
        .iter()
        .map(|c| sha256_fingerprint(c))
        .collect()
}

/// Whether the CA `ca_pem` signed `leaf_pem`: its signature checks under the CA's public key and names the CA as
/// its issuer. What tells which of two CAs of the same cluster issued a master's certificate.
pub fn issued_by(leaf_pem: &str, ca_pem: &str) -> Result<bool> {
    let leaf_block = super::certificate_pem(leaf_pem)?;
    let ca_block = super::certificate_pem(ca_pem)?;
    let not_x509 =
        |e: x509_parser::nom::Err<x509_parser::error::X509Error>| PkiError::InvalidRequest {
            field: "certificate",
            reason: format!("not an X.509 certificate: {e}"),
        };
    let leaf = leaf_block.parse_x509().map_err(not_x509)?;
    let ca = ca_block.parse_x509().map_err(not_x509)?;
    Ok(leaf.issuer() == ca.subject() && leaf.verify_signature(Some(ca.public_key())).is_ok())
}

fn not_bundle(reason: String) -> PkiError {
    PkiError::InvalidRequest {
        field: "CA bundle",
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClusterCas, Issuer, LeafSpec, Usage};

    #[test]
    fn a_bundle_splits_into_its_certificates_in_order() {
        let (_, a) = Issuer::generate("a").unwrap();
        let (_, b) = Issuer::generate("b").unwrap();
        let bundle = bundle_of([a.cert_pem.as_str(), b.cert_pem.as_str()]);
        let certs = certificates_in(&bundle).unwrap();
        assert_eq!(certs.len(), 2);
        assert_eq!(certs[0].trim(), a.cert_pem.trim());
        assert_eq!(certs[1].trim(), b.cert_pem.trim());
        assert_eq!(
            certificate_fingerprints(&bundle).unwrap(),
            vec![
                sha256_fingerprint(&a.cert_pem).unwrap(),
                sha256_fingerprint(&b.cert_pem).unwrap()
            ]
        );
        // One certificate is a bundle of one.
        assert_eq!(certificates_in(&a.cert_pem).unwrap().len(), 1);
        // A key where certificates belong, or nothing at all, is refused.
        let with_key = format!("{}{}", a.cert_pem, a.key_pem);
        assert!(certificates_in(&with_key).is_err());
        assert!(certificates_in("").is_err());
        // The current and the next CA by place; what is no such CA comes back as it is, for loading to refuse.
        assert_eq!(certificate_of_bundle(&bundle, 0).trim(), a.cert_pem.trim());
        assert_eq!(certificate_of_bundle(&bundle, 1).trim(), b.cert_pem.trim());
        assert_eq!(certificate_of_bundle(&a.cert_pem, 1), a.cert_pem);
        assert_eq!(certificate_of_bundle("not a CA", 0), "not a CA");
    }

    /// Two CAs of one name (a rotation that reused it) are still told apart by the signature.
    #[test]
    fn the_issuer_is_told_by_the_signature_not_the_name() {
        let (a, a_pair) = Issuer::generate("prod-ca").unwrap();
        let (_, b_pair) = Issuer::generate("prod-ca").unwrap();
        let leaf = a
            .issue(&LeafSpec::default(), Usage::Client)
            .unwrap()
            .cert_pem;
        assert!(issued_by(&leaf, &a_pair.cert_pem).unwrap());
        assert!(!issued_by(&leaf, &b_pair.cert_pem).unwrap());
        // A CA of another name is not the issuer even before the signature is checked.
        let next = ClusterCas::generate_next("prod", "r1").unwrap();
        assert!(!issued_by(&leaf, &next.cluster_ca.cert_pem).unwrap());
        assert!(certificate_fingerprints(&next.cluster_ca.cert_pem).is_ok());
    }
}
