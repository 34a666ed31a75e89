//! Real verification, no mocks: generated certificates are parsed with x509-parser and their chains checked by
//! rustls' WebPKI verifiers (the same code a TLS handshake runs), including name and EKU checks.

use super::*;
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use x509_parser::extensions::GeneralName;

fn der(pem: &str) -> CertificateDer<'static> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("PEM");
    CertificateDer::from(block.contents)
}

fn roots(ca_pem: &str) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add(der(ca_pem)).expect("CA is a valid trust anchor");
    Arc::new(roots)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Verifies `leaf` as a TLS server certificate for `name` (DNS name or IP literal) under `ca`.
fn verify_server(ca_pem: &str, leaf_pem: &str, name: &str) -> Result<(), rustls::Error> {
    let v = WebPkiServerVerifier::builder_with_provider(roots(ca_pem), provider())
        .build()
        .expect("verifier");
    let name = ServerName::try_from(name.to_string()).expect("server name");
    v.verify_server_cert(&der(leaf_pem), &[], &name, &[], UnixTime::now())
        .map(|_| ())
}

/// Verifies `leaf` as a TLS client certificate under `ca`.
fn verify_client(ca_pem: &str, leaf_pem: &str) -> Result<(), rustls::Error> {
    let v = WebPkiClientVerifier::builder_with_provider(roots(ca_pem), provider())
        .build()
        .expect("verifier");
    v.verify_client_cert(&der(leaf_pem), &[], UnixTime::now())
        .map(|_| ())
}

struct Parsed {
    subject: String,
    issuer: String,
    dns: Vec<String>,
    ips: Vec<IpAddr>,
    server_auth: bool,
    client_auth: bool,
    is_ca: bool,
    validity_days: i64,
}

fn parse(pem: &str) -> Parsed {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("PEM");
    let cert = block.parse_x509().expect("DER");
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    if let Some(san) = cert.subject_alternative_name().expect("SAN ext") {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => dns.push(d.to_string()),
                GeneralName::IPAddress(b) if b.len() == 4 => {
                    ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()))
                }
                other => panic!("unexpected SAN {other:?}"),
            }
        }
    }
    let eku = cert.extended_key_usage().expect("EKU ext");
    let v = cert.validity();
    Parsed {
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        dns,
        ips,
        server_auth: eku.as_ref().is_some_and(|e| e.value.server_auth),
        client_auth: eku.as_ref().is_some_and(|e| e.value.client_auth),
        is_ca: cert.is_ca(),
        validity_days: (v.not_after.timestamp() - v.not_before.timestamp()) / 86400,
    }
}

/// Key generation is the slow part; share one cluster and one replica across tests.
fn fixture() -> &'static (ClusterCas, ReplicaCertRequest, ReplicaCerts) {
    static F: OnceLock<(ClusterCas, ReplicaCertRequest, ReplicaCerts)> = OnceLock::new();
    F.get_or_init(|| {
        let cas = ClusterCas::generate("prod").unwrap();
        let req = ReplicaCertRequest {
            name: "prod-master-b".into(),
            internal_ip: "10.128.0.7".parse().unwrap(),
            static_ip: "34.1.2.3".parse().unwrap(),
            first_service_ip: "10.0.0.1".parse().unwrap(),
            dns_domain: "cluster.local".into(),
            validity: time::Duration::days(365),
        };
        let certs = issue_replica_certs(&cas, &req).unwrap();
        (cas, req, certs)
    })
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn cas_are_ten_year_self_signed_cas_named_after_the_cluster() {
    let (cas, _, _) = fixture();
    for (ca, cn) in [
        (&cas.cluster_ca, "prod-ca"),
        (&cas.etcd_peer_ca, "prod-etcd-peer-ca"),
        (&cas.etcd_client_ca, "prod-etcd-client-ca"),
    ] {
        let p = parse(&ca.cert_pem);
        assert_eq!(p.subject, format!("CN={cn}"));
        assert_eq!(p.issuer, p.subject, "self-signed");
        assert!(p.is_ca);
        assert!(
            (3650..=3653).contains(&p.validity_days),
            "{}",
            p.validity_days
        );
        assert!(ca.key_pem.contains("BEGIN PRIVATE KEY"), "PKCS#8");
        // A CA is its own trust anchor: the chain of length one must verify too (as a client cert it would
        // fail the EKU check, so check the parse and key only).
        Issuer::from_pem(&ca.cert_pem, &ca.key_pem).unwrap();
    }
    assert_ne!(cas.cluster_ca.key_pem, cas.etcd_peer_ca.key_pem);
    assert_ne!(cas.etcd_peer_ca.key_pem, cas.etcd_client_ca.key_pem);
}

#[test]
fn api_server_cert_covers_static_internal_service_ip_and_kubernetes_names_only() {
    let (cas, req, certs) = fixture();
    let p = parse(&certs.api_server.cert_pem);
    assert_eq!(p.issuer, "CN=prod-ca");
    // The static external IP, the internal IP, the first service IP, and loopback (the health-check sidecar and
    // the control-plane kubeconfigs reach their own apiserver at https://127.0.0.1); never the ephemeral IP.
    assert_eq!(
        p.ips,
        vec![
            ip("34.1.2.3"),
            ip("10.128.0.7"),
            ip("10.0.0.1"),
            ip("127.0.0.1")
        ]
    );
    assert_eq!(
        p.dns,
        [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "prod-master-b"
        ]
    );
    assert!(p.server_auth && !p.client_auth && !p.is_ca);
    let ca = &cas.cluster_ca.cert_pem;
    for name in
        p.dns
            .iter()
            .map(String::as_str)
            .chain(["34.1.2.3", "10.128.0.7", "10.0.0.1", "127.0.0.1"])
    {
        verify_server(ca, &certs.api_server.cert_pem, name)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // Not another IP (an ephemeral external IP, another replica), not another domain. Loopback is named: the
    // health-check sidecar and the control-plane components verify their own apiserver at https://127.0.0.1.
    for name in [
        "35.9.9.9",
        "10.128.0.8",
        "kubernetes.default.svc.other.local",
    ] {
        assert!(
            verify_server(ca, &certs.api_server.cert_pem, name).is_err(),
            "{name}"
        );
    }
    // Not under the etcd CAs.
    assert!(
        verify_server(
            &cas.etcd_client_ca.cert_pem,
            &certs.api_server.cert_pem,
            "34.1.2.3"
        )
        .is_err()
    );
    let _ = req;
}

#[test]
fn etcd_server_cert_verifies_by_member_name_and_own_addresses_under_the_client_ca() {
    let (cas, _, certs) = fixture();
    let p = parse(&certs.etcd_server.cert_pem);
    assert_eq!(p.subject, "CN=etcd-prod-master-b");
    assert_eq!(p.issuer, "CN=prod-etcd-client-ca");
    assert_eq!(p.dns, ["prod-master-b"]);
    assert_eq!(p.ips, vec![ip("10.128.0.7"), ip("127.0.0.1")]);
    assert!(p.server_auth && !p.client_auth);
    let ca = &cas.etcd_client_ca.cert_pem;
    for name in ["prod-master-b", "10.128.0.7", "127.0.0.1"] {
        verify_server(ca, &certs.etcd_server.cert_pem, name)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(verify_server(ca, &certs.etcd_server.cert_pem, "35.9.9.9").is_err());
    assert!(verify_server(ca, &certs.etcd_server.cert_pem, "prod-master-c").is_err());
    assert!(
        verify_server(
            &cas.etcd_peer_ca.cert_pem,
            &certs.etcd_server.cert_pem,
            "prod-master-b"
        )
        .is_err()
    );
    // Serving only: it cannot log in to another member as a client.
    assert!(verify_client(ca, &certs.etcd_server.cert_pem).is_err());
}

#[test]
fn etcd_peer_cert_serves_and_dials_under_the_peer_ca_only() {
    let (cas, _, certs) = fixture();
    let p = parse(&certs.etcd_peer.cert_pem);
    assert_eq!(p.subject, "CN=prod-master-b");
    assert_eq!(p.issuer, "CN=prod-etcd-peer-ca");
    assert_eq!(p.dns, ["prod-master-b"]);
    assert_eq!(p.ips, vec![ip("10.128.0.7"), ip("127.0.0.1")]);
    assert!(p.server_auth && p.client_auth);
    let ca = &cas.etcd_peer_ca.cert_pem;
    verify_server(ca, &certs.etcd_peer.cert_pem, "10.128.0.7").unwrap();
    verify_client(ca, &certs.etcd_peer.cert_pem).unwrap();
    // A peer certificate is no etcd client credential.
    assert!(verify_client(&cas.etcd_client_ca.cert_pem, &certs.etcd_peer.cert_pem).is_err());
}

#[test]
fn client_certs_are_client_only_and_signed_by_their_ca() {
    let (cas, _, certs) = fixture();
    let etcd_ca = &cas.etcd_client_ca.cert_pem;
    let cluster_ca = &cas.cluster_ca.cert_pem;
    let before = time::OffsetDateTime::now_utc().unix_timestamp();
    let provider_cert = provider_etcd_client(cas).unwrap();
    let expires = not_after_unix(&provider_cert.cert_pem).unwrap();
    let lifetime = PROVIDER_ETCD_CLIENT_LIFETIME.whole_seconds();
    assert!(
        (before + lifetime..=before + lifetime + 5).contains(&expires),
        "the provider's etcd client certificate lives {}s, not {lifetime}s",
        expires - before
    );
    let cases = [
        (&certs.etcd_apiserver_client, etcd_ca, "CN=client"),
        (&provider_cert, etcd_ca, "CN=terraform-provider-ha"),
        (
            &certs.kubelet,
            cluster_ca,
            "O=system:nodes, CN=system:node:prod-master-b",
        ),
        (
            &certs.controller_manager,
            cluster_ca,
            "CN=system:kube-controller-manager",
        ),
        (&certs.scheduler, cluster_ca, "CN=system:kube-scheduler"),
        (
            &certs.cluster_autoscaler,
            cluster_ca,
            "CN=cluster-autoscaler",
        ),
        (
            &certs.addon_manager,
            cluster_ca,
            "O=system:masters, CN=system:kube-addon-manager",
        ),
        (
            &certs.apiserver_kubelet_client,
            cluster_ca,
            "CN=kube-apiserver-kubelet-client",
        ),
    ];
    for (ck, ca, subject) in cases {
        let p = parse(&ck.cert_pem);
        assert_eq!(p.subject, subject);
        assert!(p.client_auth && !p.server_auth, "{subject}");
        assert!(p.dns.is_empty() && p.ips.is_empty(), "{subject}: no SANs");
        verify_client(ca, &ck.cert_pem).unwrap_or_else(|e| panic!("{subject}: {e}"));
        let other = if ca == etcd_ca { cluster_ca } else { etcd_ca };
        assert!(verify_client(other, &ck.cert_pem).is_err(), "{subject}");
    }
}

#[test]
fn a_ca_round_trips_through_pem_and_still_signs_verifiable_certs() {
    let (_, pair) = Issuer::generate("roundtrip-ca").unwrap();
    let loaded = Issuer::from_pem(&pair.cert_pem, &pair.key_pem).unwrap();
    assert_eq!(loaded.cert_pem(), pair.cert_pem);
    let leaf = loaded
        .issue(
            &LeafSpec {
                common_name: "x".into(),
                dns_names: vec!["x.example".into()],
                ..LeafSpec::default()
            },
            Usage::Server,
        )
        .unwrap();
    assert_eq!(parse(&leaf.cert_pem).issuer, "CN=roundtrip-ca");
    verify_server(&pair.cert_pem, &leaf.cert_pem, "x.example").unwrap();
    // And again from a second load: signing does not depend on the process that made the CA.
    let again = Issuer::from_pem(&pair.cert_pem, &pair.key_pem).unwrap();
    let leaf2 = again.issue(&LeafSpec::default(), Usage::Client).unwrap();
    verify_client(&pair.cert_pem, &leaf2.cert_pem).unwrap();
}

#[test]
fn loading_rejects_a_mismatched_key_a_leaf_and_garbage() {
    let (cas, _, certs) = fixture();
    let err = |r: Result<Issuer>| r.map(|_| ()).unwrap_err().to_string();
    let e = err(Issuer::from_pem(
        &cas.cluster_ca.cert_pem,
        &cas.etcd_peer_ca.key_pem,
    ));
    assert!(e.contains("does not match"), "{e}");
    let e = err(Issuer::from_pem(
        &certs.api_server.cert_pem,
        &certs.api_server.key_pem,
    ));
    assert!(e.contains("not a CA"), "{e}");
    let e = err(Issuer::from_pem("nope", &cas.cluster_ca.key_pem));
    assert!(e.contains("certificate"), "{e}");
    let e = err(Issuer::from_pem(&cas.cluster_ca.cert_pem, "nope"));
    assert!(e.contains("private key"), "{e}");
    // ClusterCas names which CA is broken.
    let mut broken = cas.clone();
    broken.etcd_client_ca.key_pem = cas.cluster_ca.key_pem.clone();
    let e = provider_etcd_client(&broken).unwrap_err().to_string();
    assert!(e.starts_with("loading the etcd client CA"), "{e}");
    assert!(!e.contains("PRIVATE KEY"), "no key material in errors: {e}");
}

#[test]
fn debug_never_prints_keys() {
    let (cas, _, certs) = fixture();
    let (issuer, _) = Issuer::generate("dbg").unwrap();
    for text in [
        format!("{cas:?}"),
        format!("{certs:?}"),
        format!("{issuer:?}"),
    ] {
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert!(text.contains("<redacted>"));
    }
}

#[test]
fn bad_names_are_refused_before_anything_is_issued() {
    let (cas, req, _) = fixture();
    for (name, domain) in [
        ("Prod-B", "cluster.local"),
        ("-b", "cluster.local"),
        ("", "cluster.local"),
        ("b", "cluster..local"),
        ("b", "Cluster.Local"),
    ] {
        let bad = ReplicaCertRequest {
            name: name.into(),
            dns_domain: domain.into(),
            ..req.clone()
        };
        let e = issue_replica_certs(cas, &bad).unwrap_err();
        assert!(
            matches!(e, PkiError::InvalidRequest { .. }),
            "{name} {domain}: {e}"
        );
    }
    assert!(ClusterCas::generate("Bad Name").is_err());
}

#[test]
fn admin_cert_is_a_short_client_cert_under_the_cluster_ca_naming_user_and_groups() {
    let (cas, _, _) = fixture();
    let req = AdminCertRequest {
        user: "alice".into(),
        groups: vec!["system:masters".into()],
        validity: std::time::Duration::from_secs(3600),
    };
    let before = time::OffsetDateTime::now_utc();
    let admin = issue_admin_cert(&cas.cluster_ca, &req).unwrap();
    let p = parse(&admin.cert.cert_pem);
    assert_eq!(p.subject, "O=system:masters, CN=alice");
    assert!(p.client_auth && !p.server_auth && !p.is_ca);
    let (_, block) = x509_parser::pem::parse_x509_pem(admin.cert.cert_pem.as_bytes()).unwrap();
    let not_after = block.parse_x509().unwrap().validity().not_after.timestamp();
    assert_eq!(not_after, admin.not_after.unix_timestamp());
    let lifetime = not_after - before.unix_timestamp();
    assert!((3599..=3601).contains(&lifetime), "{lifetime}");
    verify_client(&cas.cluster_ca.cert_pem, &admin.cert.cert_pem).unwrap();
    // Another CA's API server refuses it; the etcd client CA (same cluster) does too.
    assert!(verify_client(&cas.etcd_client_ca.cert_pem, &admin.cert.cert_pem).is_err());
    // Signing needs the CA key: an imported cluster's empty key is an error naming the cluster CA.
    let keyless = CertKey {
        cert_pem: cas.cluster_ca.cert_pem.clone(),
        key_pem: String::new(),
    };
    let err = issue_admin_cert(&keyless, &req).unwrap_err().to_string();
    assert!(err.contains("cluster CA"), "{err}");
}

/// Every certificate of a replica lives as long as the cluster's `certificate_validity` says, and
/// `not_after_unix` reads that back (what plan compares with the renewal window).
#[test]
fn replica_certificates_live_as_long_as_asked_and_their_expiry_reads_back() {
    let (cas, req, _) = fixture();
    let req = ReplicaCertRequest {
        validity: time::Duration::minutes(10),
        ..req.clone()
    };
    let before = time::OffsetDateTime::now_utc().unix_timestamp();
    let certs = issue_replica_certs(cas, &req).unwrap();
    let after = time::OffsetDateTime::now_utc().unix_timestamp();
    for (what, c) in [
        ("api server", &certs.api_server),
        ("etcd peer", &certs.etcd_peer),
        ("etcd server", &certs.etcd_server),
        ("kubelet", &certs.kubelet),
        ("healthcheck", &certs.healthcheck_client),
    ] {
        let t = not_after_unix(&c.cert_pem).unwrap();
        assert!(
            (before + 600..=after + 600).contains(&t),
            "{what} expires at {t}, not 10 minutes after {before}"
        );
    }
    assert!(not_after_unix("not a certificate").is_err());
}

/// A certificate's fingerprint is the SHA-256 of the DER bytes rcgen signed, whatever the PEM's line breaks.
#[test]
fn a_fingerprint_is_the_sha256_of_the_certificates_der() {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["a.example".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let want: String = ring::digest::digest(&ring::digest::SHA256, cert.der())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(sha256_fingerprint(&cert.pem()).unwrap(), want);
    assert_eq!(
        sha256_fingerprint(&cert.pem().replace('\n', "\r\n")).unwrap(),
        want
    );
    let (cas, req, _) = fixture();
    let certs = issue_replica_certs(cas, req).unwrap();
    assert_ne!(
        sha256_fingerprint(&certs.api_server.cert_pem).unwrap(),
        sha256_fingerprint(&certs.etcd_peer.cert_pem).unwrap()
    );
    assert!(sha256_fingerprint("").is_err());
}

/// A CA that expires in an hour, as a ten-year CA does in its last hour.
fn ca_expiring_in_an_hour() -> CertKey {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(3651);
    params.not_after = now + time::Duration::hours(1);
    let cert = params.self_signed(&key).unwrap();
    CertKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// No certificate outlives the CA that signed it: a chain is refused once its CA expires, whatever the leaf says,
/// so a leaf's expiry (what plan reads to renew, and what `ha_admin_credentials` reports) is capped at the CA's.
#[test]
fn no_certificate_outlives_its_ca() {
    let ca = ca_expiring_in_an_hour();
    let issuer = Issuer::from_pem(&ca.cert_pem, &ca.key_pem).unwrap();
    let ca_expiry = not_after_unix(&ca.cert_pem).unwrap();
    assert_eq!(issuer.expires_at().unix_timestamp(), ca_expiry);

    let year = issuer
        .issue_for(
            &LeafSpec::default(),
            Usage::Client,
            time::Duration::days(365),
        )
        .unwrap();
    assert_eq!(
        not_after_unix(&year.cert_pem).unwrap(),
        ca_expiry,
        "a year-long leaf"
    );
    verify_client(&ca.cert_pem, &year.cert_pem).unwrap();

    // Shorter than what the CA has left: as asked.
    let before = time::OffsetDateTime::now_utc().unix_timestamp();
    let short = issuer
        .issue_for(
            &LeafSpec::default(),
            Usage::Client,
            time::Duration::minutes(10),
        )
        .unwrap();
    let t = not_after_unix(&short.cert_pem).unwrap();
    assert!((before + 600..=before + 601).contains(&t), "{t}");

    let admin = issue_admin_cert(
        &ca,
        &AdminCertRequest {
            user: "alice".into(),
            groups: vec![],
            validity: std::time::Duration::from_secs(2 * 3600),
        },
    )
    .unwrap();
    assert_eq!(
        admin.not_after.unix_timestamp(),
        ca_expiry,
        "the reported expiry"
    );
    assert_eq!(not_after_unix(&admin.cert.cert_pem).unwrap(), ca_expiry);
}

/// A cluster CA the user brings is taken only as a CA with its own key and time left; what it signs verifies
/// under it, and the etcd CAs are made fresh beside it.
#[test]
fn a_brought_cluster_ca_signs_only_when_it_is_a_live_ca_with_its_own_key() {
    let (issuer, corp) = Issuer::generate("corp-root").unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let cas = ClusterCas::with_cluster_ca("prod", corp.clone(), now).unwrap();
    assert_eq!(cas.cluster_ca, corp);
    assert!(
        parse(&cas.etcd_peer_ca.cert_pem)
            .subject
            .contains("prod-etcd-peer-ca")
    );
    let req = fixture().1.clone();
    let certs = issue_replica_certs(&cas, &req).unwrap();
    verify_server(&corp.cert_pem, &certs.api_server.cert_pem, "34.1.2.3").unwrap();

    let (_, other) = Issuer::generate("other").unwrap();
    let (leaf_ca, _) = Issuer::generate("leaf-signer").unwrap();
    let leaf = leaf_ca
        .issue(
            &LeafSpec {
                common_name: "not-a-ca".into(),
                ..LeafSpec::default()
            },
            Usage::Server,
        )
        .unwrap();
    let expires = issuer.expires_at().unix_timestamp();
    let cases: [(&str, CertKey, i64, &str); 4] = [
        (
            "another CA's key",
            CertKey {
                key_pem: other.key_pem.clone(),
                ..corp.clone()
            },
            now,
            "does not match",
        ),
        ("a leaf", leaf, now, "not a CA"),
        (
            "no key",
            CertKey {
                key_pem: String::new(),
                ..corp.clone()
            },
            now,
            "private key",
        ),
        ("expired", corp.clone(), expires + 1, "expired"),
    ];
    for (case, ca, at, says) in cases {
        let err = ClusterCas::with_cluster_ca("prod", ca, at)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(says) && err.contains("cluster CA"),
            "{case}: {err}"
        );
        assert!(!err.contains("PRIVATE KEY"), "{case}: {err}");
    }
}

#[test]
fn public_key_fingerprints_name_each_key_of_a_bundle() {
    let (a, b) = (
        service_account_key().unwrap(),
        service_account_key().unwrap(),
    );
    let (pa, pb) = (
        service_account_public_key(&a).unwrap(),
        service_account_public_key(&b).unwrap(),
    );
    let fa = public_key_fingerprints(&pa).unwrap();
    let both = public_key_fingerprints(&format!("{pa}{pb}")).unwrap();
    assert_eq!(fa.len(), 1);
    assert_eq!(fa[0].len(), 16);
    assert_eq!(both.len(), 2);
    assert_eq!(both[0], fa[0]);
    assert_ne!(both[0], both[1]);
    // A private key is not a public one.
    assert!(public_key_fingerprints(&a).is_err());
}
