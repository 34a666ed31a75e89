//! Networking tests on real sockets. Each test owns distinct 127.5x.0.0/16 ranges so they run in parallel.

use super::*;
use crate::vm::testkit::*;
use crate::vm::{Vm, VmHandle};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn ip(a: u8, b: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, a, b, d)
}

#[test]
fn pool_hands_out_distinct_addresses_and_survives_a_restart() {
    let mut pool = IpPool::new(ip(50, 0, 0), ip(50, 0, 3)).unwrap();
    let a = pool.allocate().unwrap();
    let b = pool.allocate().unwrap();
    assert_eq!(
        (a, b),
        (ip(50, 0, 2), ip(50, 0, 3)),
        ".0 and .1 are skipped"
    );
    assert!(matches!(pool.allocate(), Err(NetError::Exhausted { .. })));
    assert!(pool.release(a));
    assert!(!pool.release(a));
    pool.allocate_specific(a).unwrap();
    assert!(pool.allocate_specific(a).is_err(), "double allocation");
    assert!(
        pool.allocate_specific(ip(51, 0, 2)).is_err(),
        "outside the range"
    );

    let json = serde_json::to_string(&pool).unwrap();
    let restored: IpPool = serde_json::from_str(&json).unwrap();
    assert_eq!(restored, pool);
    assert_eq!(restored.allocated().collect::<Vec<_>>(), vec![a, b]);

    assert!(
        IpPool::new(ip(0, 0, 0), ip(0, 0, 9)).is_err(),
        "must not cover 127.0.0.1"
    );
    assert!(IpPool::new(Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 9)).is_err());
    assert_eq!(IpPool::internal().clone().allocate().unwrap(), ip(10, 0, 2));
    assert_eq!(IpPool::external().clone().allocate().unwrap(), ip(20, 0, 2));
}

#[test]
fn privileged_guest_ports_are_offset() {
    let map = PortMap::default();
    assert_eq!(
        (map.host_port(443), map.host_port(80), map.host_port(2379)),
        (6443, 6080, 2379)
    );
    assert_eq!(
        PortMap {
            privileged_offset: 0
        }
        .host_port(443),
        443
    );
}

/// A fake backend: port `port` answers with `name`, and 8080 /healthz answers `health_status`.
async fn fake_backend(at: Ipv4Addr, port: u16, name: &'static str, health_status: u16) {
    let data = tokio::net::TcpListener::bind((at, port)).await.unwrap();
    let health = tokio::net::TcpListener::bind((at, 8080)).await.unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = health.accept().await.unwrap();
            tokio::spawn(async move {
                let _ = http::read_request(&mut s).await;
                let _ = http::respond(&mut s, health_status, &[], "").await;
            });
        }
    });
    tokio::spawn(async move {
        loop {
            let (mut s, _) = data.accept().await.unwrap();
            let _ = s.write_all(name.as_bytes()).await;
        }
    });
}

/// Connects and reads what the backend says; Err when the connection is refused or closed without data.
async fn who(at: Ipv4Addr, port: u16) -> Result<String, String> {
    let mut s = tokio::net::TcpStream::connect((at, port))
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = String::new();
    let read = tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut buf)).await;
    match read {
        Ok(Ok(_)) if !buf.is_empty() => Ok(buf),
        other => Err(format!("no answer: {other:?}")),
    }
}

#[tokio::test]
async fn load_balancer_waits_for_propagation_and_skips_unhealthy_backends() {
    let (a, b, c, vip) = (ip(53, 0, 2), ip(53, 0, 3), ip(53, 0, 4), ip(54, 0, 2));
    fake_backend(a, 6443, "a", 200).await;
    fake_backend(b, 6443, "b", 200).await;
    fake_backend(c, 6443, "c", 500).await;
    let check = HealthCheckSpec {
        port: 8080,
        request_path: "/healthz".into(),
        ..HealthCheckSpec::default()
    }
    .scaled(0.01);
    let started = Instant::now();
    let lb = LoadBalancer::start(LbConfig {
        ip: vip,
        ports: vec![443],
        backends: vec![a, c],
        health_check: Some(check),
        propagation_delay: Duration::from_millis(700),
        port_map: PortMap::default(),
        firewall: admit_all(),
    })
    .unwrap();
    // Before propagation the rule carries nothing, healthy backends or not.
    assert!(who(vip, 6443).await.is_err());
    assert!(!lb.is_serving());
    while started.elapsed() < Duration::from_millis(800) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(lb.is_serving());
    for _ in 0..4 {
        assert_eq!(
            who(vip, 6443).await.unwrap(),
            "a",
            "c fails its health check"
        );
    }
    assert_eq!(
        lb.backends(),
        vec![
            Backend {
                ip: a,
                healthy: true
            },
            Backend {
                ip: c,
                healthy: false
            }
        ]
    );

    // Adding b: once it passes two checks it shares the traffic.
    lb.set_backends(&[a, b, c]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut seen = BTreeSet::new();
    for _ in 0..6 {
        seen.insert(who(vip, 6443).await.unwrap());
    }
    assert_eq!(seen, BTreeSet::from(["a".to_string(), "b".to_string()]));
    lb.stop();
    assert!(
        who(vip, 6443).await.is_err(),
        "a deleted rule must not answer"
    );
}

/// A firewall for tests: admits the client to every backend but `denied`, and health probes only to `probed`.
struct TestWall {
    denied: Ipv4Addr,
    probed: Vec<Ipv4Addr>,
}

impl Ingress for TestWall {
    fn admits(&self, from: Source, to: Ipv4Addr, _: u16) -> bool {
        match from {
            Source::Client => to != self.denied,
            Source::Ip(prober) => PROBER_SOURCES.contains(&prober) && self.probed.contains(&to),
        }
    }
}

#[tokio::test]
async fn with_no_healthy_backend_the_pool_sends_to_all_and_the_firewall_drops_what_it_does_not_admit()
 {
    let (a, b, c, vip) = (ip(57, 0, 2), ip(57, 0, 3), ip(57, 0, 4), ip(57, 1, 2));
    // All three would pass their checks, but the firewall admits probes to none of them.
    for (at, name) in [(a, "a"), (b, "b"), (c, "c")] {
        fake_backend(at, 6443, name, 200).await;
    }
    let check = HealthCheckSpec {
        port: 8080,
        request_path: "/healthz".into(),
        ..HealthCheckSpec::default()
    }
    .scaled(0.01);
    let firewall = std::sync::Arc::new(TestWall {
        denied: c,
        probed: vec![],
    });
    let lb = LoadBalancer::start(LbConfig {
        ip: vip,
        ports: vec![443],
        backends: vec![a, b, c],
        health_check: Some(check.clone()),
        propagation_delay: Duration::ZERO,
        port_map: PortMap::default(),
        firewall,
    })
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        lb.backends().iter().all(|x| !x.healthy),
        "{:?}",
        lb.backends()
    );
    // Round robin over all three: a and b answer, the connection to c is dropped (accepted, never answered).
    let mut seen = BTreeSet::new();
    let mut dropped = 0;
    for _ in 0..6 {
        match who(vip, 6443).await {
            Ok(name) => drop(seen.insert(name)),
            Err(_) => dropped += 1,
        }
    }
    assert_eq!(seen, BTreeSet::from(["a".to_string(), "b".to_string()]));
    assert_eq!(
        dropped, 2,
        "every third connection goes to c and is dropped"
    );
    drop(lb);

    // Probes admitted to b only: b alone is healthy and takes every connection.
    let lb = LoadBalancer::start(LbConfig {
        ip: vip,
        ports: vec![443],
        backends: vec![a, b, c],
        health_check: Some(check),
        propagation_delay: Duration::ZERO,
        port_map: PortMap::default(),
        firewall: std::sync::Arc::new(TestWall {
            denied: c,
            probed: vec![b],
        }),
    })
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..3 {
        assert_eq!(who(vip, 6443).await.unwrap(), "b");
    }
    drop(lb);

    // A NAT the firewall does not admit the client through: accepted, never answered, not refused.
    let nat = forward(
        vip,
        c,
        &[443],
        PortMap::default(),
        std::sync::Arc::new(TestWall {
            denied: c,
            probed: vec![],
        }),
    )
    .unwrap();
    let err = who(vip, 6443).await.unwrap_err();
    assert!(
        err.contains("no answer") && err.contains("Elapsed"),
        "{err}"
    );
    nat.stop();
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Which replicas answer `n` fresh HTTPS connections to the static IP.
fn replicas_behind(static_ip: Ipv4Addr, ca: &str, n: usize) -> Result<BTreeSet<String>, String> {
    (0..n)
        .map(
            |_| match block_on(https_get(static_ip, 6443, ca, "/healthz")) {
                Ok((200, replica)) => Ok(replica),
                other => Err(format!("{other:?}")),
            },
        )
        .collect()
}

#[test]
fn static_ip_moves_from_vm1_to_a_load_balancer_to_vm2() {
    let root = tempfile::tempdir().unwrap();
    let pki = ClusterPki::new();
    let static_ip = ip(56, 0, 2);
    // Two independent single-member masters: this test is about where connections land, not about quorum.
    let boot = |name: &str, at: Ipv4Addr| -> VmHandle {
        let me = member(name, at);
        let md = master_metadata(&pki, &me, std::slice::from_ref(&me), "new", static_ip);
        Vm::boot_with(
            &root.path().join(name),
            name,
            at,
            &md,
            &etcd_bin(),
            &fast_opts(),
        )
        .unwrap()
    };
    let (vm1, vm2) = (boot("vm1", ip(55, 0, 2)), boot("vm2", ip(55, 0, 3)));
    wait_healthy(&[&vm1, &vm2]);
    let ca = pki.cluster.ca_pem.clone();
    // The healthcheck sidecar listens on kops' fixed 3990.
    let ports = [443, 3990];

    // 1. The static IP is vm1's access config.
    let nat = forward(
        static_ip,
        vm1.internal_ip(),
        &ports,
        PortMap::default(),
        admit_all(),
    )
    .unwrap();
    assert_eq!(
        replicas_behind(static_ip, &ca, 3).unwrap(),
        BTreeSet::from(["vm1".to_string()])
    );
    // Removing the NAT cuts connections that were open through it, not just the listener.
    let mut held = std::net::TcpStream::connect((static_ip, 3990)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    nat.stop();
    held.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let cut = std::io::Read::read(&mut held, &mut [0u8; 1]);
    assert!(
        matches!(&cut, Ok(0))
            || cut
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "connection through a removed NAT survived: {cut:?}"
    );

    // 2. The IP moves to a forwarding rule over both; nothing answers until the rule has propagated.
    let created = Instant::now();
    let lb = LoadBalancer::start(LbConfig {
        ip: static_ip,
        ports: vec![443],
        backends: vec![vm1.internal_ip(), vm2.internal_ip()],
        health_check: Some(
            HealthCheckSpec {
                port: 3990,
                request_path: "/healthz".into(),
                ..HealthCheckSpec::default()
            }
            .scaled(0.02),
        ),
        propagation_delay: Duration::from_secs(1),
        port_map: PortMap::default(),
        firewall: admit_all(),
    })
    .unwrap();
    assert!(
        replicas_behind(static_ip, &ca, 1).is_err(),
        "served before propagation"
    );
    wait_until(Duration::from_secs(10), "LB to serve both replicas", || {
        replicas_behind(static_ip, &ca, 6).is_ok_and(|seen| seen.len() == 2)
    });
    assert!(created.elapsed() >= Duration::from_secs(1));
    assert!(lb.backends().iter().all(|b| b.healthy));
    drop(lb);

    // 3. The last replica standing gets the IP back as its access config.
    let _nat = forward(
        static_ip,
        vm2.internal_ip(),
        &ports,
        PortMap::default(),
        admit_all(),
    )
    .unwrap();
    assert_eq!(
        replicas_behind(static_ip, &ca, 5).unwrap(),
        BTreeSet::from(["vm2".to_string()])
    );
    // The plain health endpoint travels with the IP too.
    let plain = block_on(async {
        let s = tokio::net::TcpStream::connect((static_ip, 3990))
            .await
            .unwrap();
        http::get(s, "x", "/healthz").await.unwrap()
    });
    assert_eq!(
        (plain.status, plain.header("X-Replica")),
        (200, Some("vm2"))
    );
}
