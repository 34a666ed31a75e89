//! A cluster CA of the user's own (`ca_certificate` with the write-only `ca_private_key_wo`), made with openssl as
//! an organisation's PKI would make it, on ha-sim with real etcd. Under Terraform (1.11+): the cluster is created
//! with it, the API answers on the static IP with a certificate that verifies under it (the walk-through's check
//! probes with the `ca` output), no file of the workspace holds the key, the state holds the three private keys
//! the provider made and no more, and a second replica joins in an apply whose configuration no longer gives the
//! key (it is read from the cluster's secret). Another CA is refused at plan; a keys secret deleted by hand is
//! refused at plan until the key is given again, then written back. Under OpenTofu 1.6, which has no write-only
//! attributes, the key is refused at validate, naming it, and nothing is made.

use std::time::Duration;

use acceptance_tests::openssl::{key_material, openssl_ca};
use acceptance_tests::walk::{
    assert_private_keys_only_in_the_cluster, check, cluster_keys_secret_written, edit_config,
    replicas_by_zone, set_zones, walk_config, write_keys,
};
use acceptance_tests::{Client, Sim, Workspace, for_each_client};

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";

/// The walk-through's cluster with the CA in `corp.crt` and, when `with_key`, its key.
fn config(sim: &Sim, ca: &str, with_key: bool) -> String {
    let key = if with_key {
        "\n  ca_private_key_wo         = file(\"corp.key\")"
    } else {
        ""
    };
    edit_config(
        walk_config(sim),
        &[(
            "  name                      = \"walk\"\n",
            &format!(
                "  name                      = \"walk\"\n  ca_certificate            = file(\"{ca}.crt\"){key}\n"
            ),
        )],
    )
}

#[test]
fn a_cluster_runs_on_a_ca_of_its_users_own_and_no_state_holds_its_key() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("brought-ca-{client}"));
        let ws = Workspace::new(client, "brought-ca").with_timeout(Duration::from_secs(300));
        let key = openssl_ca(&ws, "corp");
        ws.write_main_tf(&config(&sim, "corp", true));
        ws.init();
        set_zones(&ws, &[B]);
        if client == Client::OpenTofu {
            let refused = ws.run(&["plan", "-input=false", "-no-color"]);
            refused.assert_failure();
            refused.assert_contains("`ca_private_key_wo` is write-only");
            assert!(
                sim.names("instances").is_empty(),
                "[{client}] nothing was made"
            );
            return;
        }
        ws.apply();
        let ca = ws.read_file("corp.crt");
        assert_eq!(
            acceptance_tests::walk::outputs(&ws)["ca"]["value"],
            serde_json::json!(ca),
            "[{client}] the cluster's CA is the one brought"
        );
        // The static IP answers with a certificate that verifies under the brought CA (`check` probes with it).
        write_keys(&sim, &replicas_by_zone(&ws)[B]);
        check(client, &ws, &sim, 1);
        let scalar = key_material(&key);
        let holding = ws.files_holding(scalar, &["corp.key"]);
        assert!(
            holding.is_empty(),
            "[{client}] the CA's key is in {holding:?}"
        );
        assert_private_keys_only_in_the_cluster(client, &ws, 3);

        // The key is not needed to sign a new replica: it is read from the cluster's secret.
        ws.write_main_tf(&config(&sim, "corp", false));
        set_zones(&ws, &[B, C]);
        ws.apply();
        check(client, &ws, &sim, 2);

        // Another CA on the running cluster is refused at plan.
        openssl_ca(&ws, "other");
        ws.write_main_tf(&config(&sim, "other", false));
        let refused = ws.run(&["plan", "-input=false", "-no-color"]);
        refused.assert_failure();
        refused.assert_contains("The cluster CA of running cluster walk cannot change");

        // The keys secret deleted by hand: plan asks for the key, which only the secret and the user hold; given
        // it, the apply writes the secret back.
        ws.write_main_tf(&config(&sim, "corp", false));
        sim.gcloud(&["secrets", "delete", "walk-cluster-keys", "--quiet"])
            .unwrap_or_else(|e| panic!("[{client}] {e}"));
        let refused = ws.run(&["plan", "-input=false", "-no-color"]);
        refused.assert_failure();
        refused.assert_contains("This apply needs the key of cluster walk's CA");
        ws.write_main_tf(&config(&sim, "corp", true));
        ws.apply();
        cluster_keys_secret_written(client, &sim);
        check(client, &ws, &sim, 2);
        let holding = ws.files_holding(scalar, &["corp.key"]);
        assert!(
            holding.is_empty(),
            "[{client}] the CA's key is in {holding:?}"
        );
        ws.destroy();
    });
}
