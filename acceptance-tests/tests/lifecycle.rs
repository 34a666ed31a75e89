//! The original docs' walk-through, declaratively, under both clients on ha-sim with real etcd: a cluster and one
//! replica, then 2, 3, 2 and 1 replicas in different zones (for_each), and a cluster with 3 replicas created in
//! one apply; each ends with a destroy that leaves nothing in the sim.
//! After every apply: the next plan is empty; etcd's members are exactly the declared replicas, all healthy and
//! voting; keys written at the start are all still there; the static IP answers /healthz over TLS with a
//! certificate valid for that IP under the cluster CA; the load balancer exists exactly when there are two or more
//! replicas; and the sim holds no object Terraform does not know about (`acceptance_tests::walk::check`). Changes
//! made behind Terraform's back are in drift.rs.

use std::time::Duration;

use acceptance_tests::walk::{
    assert_sim_empty, check, outputs, set_zones, walk_config as config, write_keys,
};
use acceptance_tests::{Sim, Workspace, for_each_client};

#[test]
fn grow_one_two_three_then_shrink_to_one() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("walk-{client}"));
        let ws = Workspace::new(client, "walk").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        let walk: [&[&str]; 5] = [
            &["europe-west1-b"],
            &["europe-west1-b", "europe-west1-c"],
            &["europe-west1-b", "europe-west1-c", "europe-west1-d"],
            &["europe-west1-b", "europe-west1-c"],
            &["europe-west1-b"],
        ];
        for (step, zones) in walk.iter().enumerate() {
            set_zones(&ws, zones);
            let applied = ws.apply();
            // Two replicas are worse than one: the apply that ends with two says so, and only that one.
            let warned = applied
                .combined()
                .contains("Two replicas tolerate no more failures than one");
            assert_eq!(
                warned,
                zones.len() == 2,
                "[{client}] two-replica warning after {zones:?}:\n{}",
                applied.combined()
            );
            if step == 0 {
                let first = outputs(&ws)["replicas"]["value"][0]
                    .as_str()
                    .unwrap()
                    .to_string();
                write_keys(&sim, &first);
            }
            check(client, &ws, &sim, zones.len());
        }
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}

#[test]
fn three_replicas_in_one_apply() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("three-{client}"));
        let ws = Workspace::new(client, "three").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&config(&sim));
        ws.init();
        // The cluster and three replicas from nothing: Terraform creates the replicas in parallel; the provider
        // founds etcd with one and joins the others one at a time, building the load balancer on the way.
        set_zones(&ws, &["europe-west1-b", "europe-west1-c", "europe-west1-d"]);
        ws.apply();
        let first = outputs(&ws)["replicas"]["value"][0]
            .as_str()
            .unwrap()
            .to_string();
        write_keys(&sim, &first);
        check(client, &ws, &sim, 3);
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}
