//! Write-only attributes (#30) judged by the real clients, on the framework's example provider
//! (`framework/examples/write_only_provider.rs`, installed from a mirror as ours is): under a client that supports
//! them (Terraform 1.11+), the resource reads the secret at plan and apply, the plan after shows no change, and
//! neither the state nor a saved plan holds the secret; under one that does not (OpenTofu 1.6), validate refuses
//! the attribute by name before anything is planned, so no state is written with the secret in it.

use std::path::PathBuf;
use std::sync::Arc;

use acceptance_tests::{Client, Mirror, Workspace, for_each_client};

const SECRET: &str = "a-secret-no-state-may-hold";

/// The example provider, which `cargo test` builds beside the test executables.
fn example_provider() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target directory")
        .join("examples/write_only_provider");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test --workspace` builds the framework's examples",
        bin.display()
    );
    bin
}

fn config(secret: &str) -> String {
    format!(
        r#"terraform {{
  required_providers {{
    ha = {{ source = "registry.terraform.io/hamaster/ha" }}
  }}
}}

resource "ha_sealed" "s" {{
  name      = "sealed"
  secret_wo = "{secret}"
}}

output "length" {{
  value = ha_sealed.s.secret_length
}}
"#
    )
}

#[test]
fn a_write_only_secret_is_read_and_never_stored_and_refused_where_it_would_be() {
    let parent = tempfile::tempdir().unwrap();
    let mirror = Arc::new(Mirror::content_addressed(parent.path(), &example_provider()).unwrap());
    for_each_client(|client| {
        let ws = Workspace::with_mirror(client, "write-only", mirror.clone());
        ws.write_main_tf(&config(SECRET));
        ws.init().assert_success();
        match client {
            Client::Terraform => {
                let saved = ws.run(&["plan", "-input=false", "-no-color", "-out=saved.tfplan"]);
                saved.assert_success();
                ws.apply().assert_success();
                let length = ws.run(&["output", "-raw", "length"]);
                assert_eq!(
                    length.stdout.trim(),
                    SECRET.len().to_string(),
                    "[{client}] the resource read the secret at apply"
                );
                assert_eq!(
                    ws.state_values("ha_sealed.s")["secret_wo"],
                    serde_json::Value::Null,
                    "[{client}] state holds the write-only attribute null"
                );
                assert_eq!(
                    ws.plan_detailed_exitcode(),
                    0,
                    "[{client}] a write-only value plans no change once applied"
                );
                // Another secret of the same length: still no change (nothing of it is stored to differ).
                ws.write_main_tf(&config(&SECRET.replace('a', "b")));
                assert_eq!(
                    ws.plan_detailed_exitcode(),
                    0,
                    "[{client}] nothing stored to differ"
                );
            }
            Client::OpenTofu => {
                let refused = ws.run(&["plan", "-input=false", "-no-color", "-out=saved.tfplan"]);
                refused.assert_failure();
                refused.assert_contains("`secret_wo` is write-only");
                let applied = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
                applied.assert_failure();
                applied.assert_contains("`secret_wo` is write-only");
            }
        }
        let holding = ws.files_holding(SECRET, &[]);
        assert!(
            holding.is_empty(),
            "[{client}] the secret is in {holding:?}"
        );
    });
}
