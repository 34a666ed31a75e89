use super::instances::spec;
use super::*;
use crate::{
    Error, FirewallSpec, ForwardingRuleSpec, HealthCheckSpec, InstanceRef, TargetPoolSpec,
};

fn firewall() -> FirewallSpec {
    FirewallSpec {
        name: "prod-etcd".into(),
        network: "default".into(),
        tcp_ports: vec!["2379-2380".into()],
        source_ranges: vec![],
        source_tags: vec!["ha-master".into()],
        target_tags: vec!["ha-master".into()],
        description: None,
    }
}

#[tokio::test]
async fn firewall_ensure_conflict_update_delete() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let f = c.ensure_firewall(&firewall(), deadline()).await.unwrap();
    assert_eq!(f.tcp_ports, ["2379-2380"]);
    assert!(
        f.network.ends_with("/global/networks/default"),
        "{}",
        f.network
    );
    c.ensure_firewall(&firewall(), deadline()).await.unwrap();

    let mut wider = firewall();
    wider.tcp_ports = vec!["443".into(), "2379-2380".into()];
    wider.source_ranges = vec!["10.0.0.0/8".into()];
    let err = c.ensure_firewall(&wider, deadline()).await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict { .. }) && err.to_string().contains("tcp ports"),
        "{err}"
    );
    let f = c.update_firewall(&wider, deadline()).await.unwrap();
    assert_eq!(f.source_ranges, ["10.0.0.0/8"]);
    c.ensure_firewall(&wider, deadline()).await.unwrap();

    c.delete_firewall("prod-etcd", deadline()).await.unwrap();
    assert_eq!(c.get_firewall("prod-etcd", deadline()).await.unwrap(), None);
    c.delete_firewall("prod-etcd", deadline()).await.unwrap();
}

/// The multi-master load balancer, built and torn down in dependency order.
#[tokio::test]
async fn health_check_target_pool_and_forwarding_rule() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let ip = c
        .reserve_external_address(REGION, "api", deadline())
        .await
        .unwrap()
        .ip;
    c.insert_instance(&spec("m-1"), deadline()).await.unwrap();
    c.insert_instance(&spec("m-2"), deadline()).await.unwrap();
    let m1 = InstanceRef {
        zone: ZONE.into(),
        name: "m-1".into(),
    };
    let m2 = InstanceRef {
        zone: ZONE.into(),
        name: "m-2".into(),
    };

    let mut hc = HealthCheckSpec::new("prod-hc");
    hc.port = 8080;
    hc.request_path = "/healthz".into();
    let link = c.ensure_http_health_check(&hc, deadline()).await.unwrap();
    assert!(link.ends_with("/global/httpHealthChecks/prod-hc"), "{link}");
    c.ensure_http_health_check(&hc, deadline()).await.unwrap();

    let pool = TargetPoolSpec {
        name: "prod-pool".into(),
        region: REGION.into(),
        health_check: Some("prod-hc".into()),
        instances: vec![m1.clone()],
        description: None,
    };
    let p = c.ensure_target_pool(&pool, deadline()).await.unwrap();
    assert_eq!(
        (p.instances.clone(), p.health_checks.clone()),
        (vec![m1.clone()], vec!["prod-hc".to_string()])
    );
    c.ensure_target_pool(&pool, deadline()).await.unwrap();

    c.add_target_pool_instance(REGION, "prod-pool", &m2, deadline())
        .await
        .unwrap();
    c.add_target_pool_instance(REGION, "prod-pool", &m2, deadline())
        .await
        .unwrap();
    assert_eq!(
        sim.calls("targetPools.addInstance").await,
        1,
        "a member is not added twice"
    );
    let p = c
        .get_target_pool(REGION, "prod-pool", deadline())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.instances, [m1.clone(), m2.clone()]);

    let rule = ForwardingRuleSpec {
        name: "prod-api".into(),
        region: REGION.into(),
        ip_address: ip.clone(),
        port_range: "443".into(),
        target_pool: "prod-pool".into(),
        description: None,
    };
    let r = c.ensure_forwarding_rule(&rule, deadline()).await.unwrap();
    assert_eq!(
        (
            r.ip_address.as_str(),
            r.port_range.as_str(),
            r.target_pool.as_str()
        ),
        (ip.as_str(), "443-443", "prod-pool")
    );
    c.ensure_forwarding_rule(&rule, deadline()).await.unwrap();
    let err = c
        .ensure_forwarding_rule(
            &ForwardingRuleSpec {
                port_range: "80".into(),
                ..rule.clone()
            },
            deadline(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ports 443-443 (want 80)"), "{err}");

    let health = c
        .target_pool_health(REGION, "prod-pool", &m1, deadline())
        .await
        .unwrap();
    assert_eq!(health.len(), 1, "{health:?}");
    assert_eq!(health[0].instance, m1);
    assert_eq!(health[0].ip_address.as_deref(), Some(ip.as_str()));
    assert!(
        health[0].healthy(),
        "API-only sim: RUNNING counts as healthy"
    );

    c.remove_target_pool_instance(REGION, "prod-pool", &m1, deadline())
        .await
        .unwrap();
    c.remove_target_pool_instance(REGION, "prod-pool", &m1, deadline())
        .await
        .unwrap();
    assert_eq!(sim.calls("targetPools.removeInstance").await, 1);

    // A pool in use by a rule cannot go: the error names both.
    let err = c
        .delete_target_pool(REGION, "prod-pool", deadline())
        .await
        .unwrap_err();
    assert_eq!(
        err.reason(),
        Some("resourceInUseByAnotherResource"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("target pool projects/proj/regions/us-central1/targetPools/prod-pool"),
        "{err}"
    );

    c.delete_forwarding_rule(REGION, "prod-api", deadline())
        .await
        .unwrap();
    assert_eq!(
        c.get_forwarding_rule(REGION, "prod-api", deadline())
            .await
            .unwrap(),
        None
    );
    c.delete_target_pool(REGION, "prod-pool", deadline())
        .await
        .unwrap();
    c.delete_http_health_check("prod-hc", deadline())
        .await
        .unwrap();
    for gone in [
        c.delete_forwarding_rule(REGION, "prod-api", deadline())
            .await,
        c.delete_target_pool(REGION, "prod-pool", deadline()).await,
        c.delete_http_health_check("prod-hc", deadline()).await,
    ] {
        gone.unwrap();
    }
}
