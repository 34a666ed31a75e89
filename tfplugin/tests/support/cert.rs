//! A client certificate shaped like go-plugin's AutoMTLS certificate: ECDSA P-521, self-signed, CA:TRUE, key usage
//! digitalSignature+keyEncipherment+keyCertSign, EKU clientAuth+serverAuth, SAN localhost.
//!
//! Those details are what broke naive servers (a CA as end entity, a curve `ring` cannot verify), so the tests must
//! present exactly this shape. rcgen can make P-521 keys only with its aws-lc backend, and enabling that here would
//! switch the library's own server-key generation to aws-lc in test builds; so the certificate is assembled with
//! yasna and signed with aws-lc-rs directly.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P521_SHA512_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use yasna::models::ObjectIdentifier;
use yasna::{DERWriter, Tag};

pub struct ClientCert {
    pub der: Vec<u8>,
    pkcs8: Vec<u8>,
}

impl ClientCert {
    /// The PEM go-plugin puts in PLUGIN_CLIENT_CERT.
    pub fn pem(&self) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.der);
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for chunk in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(chunk).unwrap());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    }

    pub fn chain_and_key(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![CertificateDer::from(self.der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.pkcs8.clone())),
        )
    }
}

fn oid(c: &[u64]) -> ObjectIdentifier {
    ObjectIdentifier::from_slice(c)
}

const ECDSA_WITH_SHA512: &[u64] = &[1, 2, 840, 10045, 4, 3, 4];
const EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];
const SECP521R1: &[u64] = &[1, 3, 132, 0, 35];

pub fn go_plugin_style() -> ClientCert {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P521_SHA512_ASN1_SIGNING, &rng)
        .expect("P-521 key")
        .as_ref()
        .to_vec();
    let key =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P521_SHA512_ASN1_SIGNING, &pkcs8).expect("parse P-521 key");
    let point = key.public_key().as_ref().to_vec();

    let tbs = yasna::construct_der(|w| tbs_certificate(w, &point));
    let signature = key
        .sign(&rng, &tbs)
        .expect("sign certificate")
        .as_ref()
        .to_vec();
    let der = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_der(&tbs);
            w.next()
                .write_sequence(|w| w.next().write_oid(&oid(ECDSA_WITH_SHA512)));
            w.next().write_bitvec_bytes(&signature, signature.len() * 8);
        })
    });
    ClientCert { der, pkcs8 }
}

fn tbs_certificate(w: DERWriter, point: &[u8]) {
    w.write_sequence(|w| {
        w.next().write_tagged(Tag::context(0), |w| w.write_u8(2)); // v3
        w.next().write_u64(rand_serial());
        w.next()
            .write_sequence(|w| w.next().write_oid(&oid(ECDSA_WITH_SHA512)));
        name(w.next());
        w.next().write_sequence(|w| {
            utc_time(w.next(), "000101000000Z");
            utc_time(w.next(), "491231235959Z");
        });
        name(w.next());
        w.next().write_sequence(|w| {
            w.next().write_sequence(|w| {
                w.next().write_oid(&oid(EC_PUBLIC_KEY));
                w.next().write_oid(&oid(SECP521R1));
            });
            w.next().write_bitvec_bytes(point, point.len() * 8);
        });
        w.next().write_tagged(Tag::context(3), |w| {
            w.write_sequence(|w| {
                // keyUsage (critical): digitalSignature (bit 0), keyEncipherment (2), keyCertSign (5).
                extension(w.next(), &[2, 5, 29, 15], true, |w| {
                    w.write_bitvec_bytes(&[0b1010_0100], 6)
                });
                // extKeyUsage: clientAuth, serverAuth.
                extension(w.next(), &[2, 5, 29, 37], false, |w| {
                    w.write_sequence(|w| {
                        w.next().write_oid(&oid(&[1, 3, 6, 1, 5, 5, 7, 3, 2]));
                        w.next().write_oid(&oid(&[1, 3, 6, 1, 5, 5, 7, 3, 1]));
                    })
                });
                // basicConstraints (critical): CA:TRUE, the detail WebPKI verifiers reject as an end entity.
                extension(w.next(), &[2, 5, 29, 19], true, |w| {
                    w.write_sequence(|w| w.next().write_bool(true))
                });
                // subjectAltName: DNS localhost.
                extension(w.next(), &[2, 5, 29, 17], false, |w| {
                    w.write_sequence(|w| {
                        w.next().write_tagged_implicit(Tag::context(2), |w| {
                            w.write_ia5_string("localhost")
                        })
                    })
                });
            })
        });
    })
}

fn name(w: DERWriter) {
    w.write_sequence(|w| {
        for (attr, value) in [
            (&[2u64, 5, 4, 10][..], "HashiCorp"),
            (&[2, 5, 4, 3][..], "localhost"),
        ] {
            w.next().write_set(|w| {
                w.next().write_sequence(|w| {
                    w.next().write_oid(&oid(attr));
                    w.next().write_utf8_string(value);
                })
            });
        }
    });
}

fn utc_time(w: DERWriter, s: &str) {
    // UTCTime is universal tag 23 over ASCII text.
    w.write_tagged_implicit(
        Tag {
            tag_class: yasna::TagClass::Universal,
            tag_number: 23,
        },
        |w| w.write_bytes(s.as_bytes()),
    );
}

fn extension(w: DERWriter, id: &[u64], critical: bool, value: impl FnOnce(DERWriter)) {
    w.write_sequence(|w| {
        w.next().write_oid(&oid(id));
        if critical {
            w.next().write_bool(true);
        }
        w.next().write_bytes(&yasna::construct_der(value));
    });
}

fn rand_serial() -> u64 {
    let mut b = [0u8; 8];
    aws_lc_rs::rand::fill(&mut b).expect("random serial");
    u64::from_be_bytes(b) >> 1 // positive
}
