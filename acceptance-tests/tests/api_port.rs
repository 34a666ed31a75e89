//! A cluster whose API is on another port than 443 (`api_port = 6443`). Real 1:1 NAT carries every port; ha-sim's
//! NATs used to carry only a fixed set, so the first replica's create waited its whole timeout for `/healthz` on
//! the static IP. Now the create returns, the API answers on 6443 at the static IP, and destroy leaves nothing.

use std::net::IpAddr;
use std::time::Duration;

use acceptance_tests::walk::{assert_sim_empty, edit_config, outputs, set_zones, walk_config_in};
use acceptance_tests::{Sim, Workspace, for_each_client};

const A: &str = "us-central1-a";
const API_PORT: u16 = 6443;

#[test]
fn a_cluster_on_api_port_6443_serves_its_api_there() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("api-port-{client}"));
        // Well under the replica's create timeout: a create that waits for an API nobody carries fails here.
        let ws = Workspace::new(client, "api-port").with_timeout(Duration::from_secs(240));
        let multizone = "  multizone                 = true\n";
        let config = edit_config(
            walk_config_in(&sim, A),
            &[(
                multizone,
                &format!("{multizone}  api_port                  = {API_PORT}\n"),
            )],
        );
        ws.write_main_tf(&config);
        ws.init();
        set_zones(&ws, &[A]);
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

        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(plan.code, Some(0), "[{client}] plan after apply:\n{plan}");
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}
