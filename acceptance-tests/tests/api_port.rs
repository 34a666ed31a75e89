//! A cluster whose API is on another port than 443 (`api_port = 6443`), grown to three replicas behind the load
//! balancer. Two things stood in the way. Real 1:1 NAT carries every port; ha-sim's NATs used to carry only a fixed
//! set, so the first replica's create waited its whole timeout for `/healthz` on the static IP. And the load
//! balancer's health check asks kops' sidecar, which always proxies to `https://127.0.0.1:443`: a kube-apiserver on
//! 6443 never answered it, so every backend stayed unhealthy (`master::healthcheck_port` now redirects the
//! sidecar's port on such a master). Now every backend is healthy, gcloud's `target-pools get-health` says so, the
//! API answers on 6443 at the static IP, every key written before the grow is on every member, and destroy leaves
//! nothing.

use std::net::IpAddr;
use std::time::Duration;

use acceptance_tests::walk::{
    assert_sim_empty, check_on_port, edit_config, outputs, set_zones,
    wait_until_load_balancer_healthy, walk_config_in, write_keys,
};
use acceptance_tests::{Sim, Workspace, for_each_client};

const ZONES: [&str; 3] = ["us-central1-a", "us-central1-b", "us-central1-c"];
const API_PORT: u16 = 6443;

#[test]
fn a_three_replica_cluster_on_api_port_6443_serves_its_api_there_with_every_backend_healthy() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("api-port-{client}"));
        // Well under the replica's create timeout: a create that waits for an API nobody carries fails here.
        let ws = Workspace::new(client, "api-port").with_timeout(Duration::from_secs(300));
        let multizone = "  multizone                 = true\n";
        let config = edit_config(
            walk_config_in(&sim, ZONES[0]),
            &[(
                multizone,
                &format!("{multizone}  api_port                  = {API_PORT}\n"),
            )],
        );
        ws.write_main_tf(&config);
        ws.init();
        set_zones(&ws, &ZONES[..1]);
        ws.apply();
        let out = outputs(&ws);
        let ca = out["ca"]["value"].as_str().unwrap().to_string();
        let ip: IpAddr = out["ip"]["value"].as_str().unwrap().parse().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answer = rt
            .block_on(ha_ops::endpoint::probe(
                &ca,
                ip,
                ip,
                API_PORT,
                Duration::from_secs(5),
            ))
            .unwrap_or_else(|e| panic!("[{client}] https://{ip}:{API_PORT}/healthz: {e}"));
        assert_eq!(answer.status, 200, "[{client}] /healthz on {ip}:{API_PORT}");
        let first = sim.names("instances");
        write_keys(&sim, &first[0]);

        // Two more: the static IP moves to a forwarding rule whose pool must see every master healthy.
        set_zones(&ws, &ZONES);
        ws.apply();
        wait_until_load_balancer_healthy(&sim);
        let health = sim
            .gcloud(&[
                "compute",
                "target-pools",
                "get-health",
                "walk",
                "--region",
                "us-central1",
            ])
            .unwrap_or_else(|e| panic!("[{client}] gcloud target-pools get-health: {e}"));
        let states: Vec<String> = health
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|vm| vm["healthStatus"].as_array().cloned().unwrap_or_default())
            .map(|s| s["healthState"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(
            states, ["HEALTHY"; 3],
            "[{client}] every backend healthy, as gcloud sees the pool: {health}"
        );
        check_on_port(client, &ws, &sim, 3, API_PORT);

        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}
