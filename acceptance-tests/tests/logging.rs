//! The provider's logs never carry a secret. Under both clients, with the provider logging everything it logs
//! (`TF_LOG_PROVIDER=trace`), a cluster and a replica are created and refreshed on ha-sim; then neither the
//! access token from the provider block nor any private key that ended up in state (CA keys, the replica's
//! keys) appears anywhere in what the provider printed, while the log itself is there and says what happened.

use acceptance_tests::walk::{edit_config, set_zones, walk_config};
use acceptance_tests::{Sim, Workspace, for_each_client};
use serde_json::Value;

/// An access token that cannot appear in a log by accident.
const TOKEN: &str = "ya29.log-scan-4f1c9e7a2b";

/// Every PEM private key in state, at any depth (the cluster's `private_keys` nests its CA keys).
fn private_keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.contains("PRIVATE KEY") => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| private_keys(i, out)),
        Value::Object(fields) => fields.values().for_each(|v| private_keys(v, out)),
        _ => {}
    }
}

/// The lines of a PEM body long enough to be unique to that key.
fn key_fingerprints(pem: &str) -> Vec<&str> {
    pem.lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 40)
        .collect()
}

#[test]
fn provider_logs_at_trace_hold_no_token_and_no_private_key() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("logging-{client}"));
        let config = edit_config(
            walk_config(&sim),
            &[("\"sim-token\"", &format!("{TOKEN:?}"))],
        );
        let ws = Workspace::new(client, "logging").with_env("TF_LOG_PROVIDER", "trace");
        ws.write_main_tf(&config);
        ws.init();
        set_zones(&ws, &["europe-west1-b"]);
        let apply = ws.apply();
        let plan = ws.plan();
        let logs = format!(
            "{}{}{}{}",
            apply.stdout, apply.stderr, plan.stdout, plan.stderr
        );

        // The log is there and useful: the provider's own lines, the join's phases.
        assert!(
            logs.contains("provider.terraform-provider-ha"),
            "[{client}] no provider log lines at trace"
        );
        assert!(
            logs.contains("rpc=ApplyResourceChange"),
            "[{client}] the trace names the RPCs it served"
        );

        assert!(
            !logs.contains(TOKEN),
            "[{client}] the access token is in the provider's log"
        );
        let mut keys = Vec::new();
        private_keys(&ws.show_json(), &mut keys);
        assert_eq!(
            keys.len(),
            4,
            "[{client}] state should hold the cluster's three CA keys and its service-account key"
        );
        for key in &keys {
            for line in key_fingerprints(key) {
                assert!(
                    !logs.contains(line),
                    "[{client}] a private key from state is in the provider's log: {line}"
                );
            }
        }
        assert!(
            !logs.contains("PRIVATE KEY"),
            "[{client}] a PEM private key is in the provider's log"
        );
    });
}
