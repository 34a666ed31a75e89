//! Verification is real: the server certificate must carry the member's name, and the key stays out of logs.

use std::time::Duration;

use super::Cluster;
use crate::{EtcdError, EtcdTarget, FailureKind, Health};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_name_the_certificate_does_not_carry_is_refused() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;

    // Same endpoint, same CA, but we expect another member there: the handshake must fail.
    let wrong = EtcdTarget::new(a.endpoint, "prod-b");
    let err = c.etcd.status(&wrong).await.unwrap_err();
    let EtcdError::Status { source, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(source.failures[0].kind, FailureKind::Unreachable, "{err}");
    assert!(
        source.failures[0]
            .message
            .contains(r#"not valid for name "prod-b""#),
        "the cause is the name: {source}"
    );

    // Member calls fall over to the next endpoint, and report both when none works.
    let err = c
        .etcd
        .member_list(std::slice::from_ref(&wrong))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("listing etcd members failed"),
        "{err}"
    );
    let list = c
        .etcd
        .member_list(&[wrong.clone(), a.clone()])
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_a_value_per_endpoint_even_when_a_member_is_down() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;
    let down = c.target(7, "prod-down");

    let started = std::time::Instant::now();
    let health = c.etcd.health(&[a.clone(), down.clone()]).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an unreachable member costs one timeout"
    );
    assert_eq!(health[0].target, a);
    assert!(health[0].health.is_healthy(), "{health:?}");
    assert!(
        matches!(&health[1].health, Health::Unreachable { .. }),
        "{health:?}"
    );
    assert_eq!(health[1].health.member_id(), None);
}

/// The provider's own client certificate lives seconds here (minutes in the provider): a handle made with
/// `Etcd::renewing` mints a new one before a connection would present one about to expire, and keeps working past
/// the first one's expiry. The same expired certificate in a plain handle is refused at the handshake: etcd checks
/// it, so the renewal is what keeps the handle working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lived_client_certificate_is_renewed_before_it_expires() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::SystemTime;

    use rcgen::ExtendedKeyUsagePurpose::ClientAuth;

    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;

    const LIFETIME: Duration = Duration::from_secs(4);
    let pki = Arc::new(super::Pki::new_sharing_ca(&c.pki));
    let minted = Arc::new(AtomicUsize::new(0));
    let first_expiry = SystemTime::now() + LIFETIME;
    let expired = pki.issue_until("client", &[], &[ClientAuth], Some(first_expiry));
    let mint: crate::Mint = {
        let (pki, minted, expired) = (pki.clone(), minted.clone(), expired.clone());
        Arc::new(move || {
            // The first mint hands out the certificate the plain handle uses below.
            let (cert_pem, key_pem, expires_at) = match minted.fetch_add(1, Ordering::SeqCst) {
                0 => (expired.0.clone(), expired.1.clone(), first_expiry),
                _ => {
                    let until = SystemTime::now() + LIFETIME;
                    let (cert, key) = pki.issue_until("client", &[], &[ClientAuth], Some(until));
                    (cert, key, until)
                }
            };
            Ok(crate::MintedIdentity {
                cert_pem,
                key_pem,
                expires_at,
            })
        })
    };
    let renewing = crate::Etcd::renewing(
        c.pki.tls.ca_pem.clone(),
        mint,
        Duration::from_secs(2),
        Duration::from_secs(1),
    )
    .unwrap();
    renewing
        .status(&a)
        .await
        .expect("a fresh certificate works");
    assert_eq!(minted.load(Ordering::SeqCst), 1, "one mint up front");
    renewing.status(&a).await.unwrap();
    assert_eq!(
        minted.load(Ordering::SeqCst),
        1,
        "no mint while it is fresh"
    );

    // Past the first certificate's expiry (rcgen's validity has whole seconds).
    tokio::time::sleep(LIFETIME + Duration::from_secs(2)).await;
    renewing
        .status(&a)
        .await
        .expect("a renewed certificate works past the first one's expiry");
    assert!(minted.load(Ordering::SeqCst) >= 2, "renewed");

    let plain = crate::Etcd::new(
        crate::EtcdTls {
            ca_pem: c.pki.tls.ca_pem.clone(),
            client_cert_pem: expired.0,
            client_key_pem: expired.1,
        },
        // Time for the handshake to finish under a loaded machine, so etcd judges the certificate rather than
        // seeing a client that gave up first.
        Duration::from_secs(5),
    );
    let err = plain.status(&a).await.unwrap_err();
    let EtcdError::Status { source, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(source.failures[0].kind, FailureKind::Unreachable, "{err}");
    // etcd logs the rejection after the handshake fails, which the client may hear of first: wait for the line.
    let mut log = c.log("prod-a");
    for _ in 0..100 {
        if log.contains("certificate has expired") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        log = c.log("prod-a");
    }
    assert!(
        log.contains("certificate has expired"),
        "etcd refused it for its expiry:\n{log}"
    );

    let failing = crate::Etcd::renewing(
        c.pki.tls.ca_pem.clone(),
        Arc::new(|| Err("the CA key is gone".into())),
        Duration::from_secs(2),
        Duration::from_secs(1),
    );
    assert_eq!(failing.err().as_deref(), Some("the CA key is gone"));
}

#[test]
fn tls_material_debug_never_shows_the_key() {
    let pki = super::Pki::new();
    let shown = format!(
        "{:?} {:?}",
        pki.tls,
        crate::Etcd::new(pki.tls.clone(), Duration::from_secs(1))
    );
    assert!(
        !shown.contains("PRIVATE KEY")
            && !shown.contains(pki.tls.client_key_pem.lines().nth(1).unwrap()),
        "{shown}"
    );
}
