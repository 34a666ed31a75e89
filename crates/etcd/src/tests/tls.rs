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
