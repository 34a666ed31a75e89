//! The kubeconfig recipe users are pointed to keeps drift checks quiet: `examples/quickstart` applied against
//! ha-sim as a user would (endpoints and token from the environment), then `examples/kubeconfig`, a root module of
//! its own reading the cluster's `spec` from that state, writes `admin.kubeconfig`. kubectl reaches the API with it,
//! and the second plan of both root modules is empty with `-detailed-exitcode` (the recipe it replaces,
//! `triggers_replace = [timestamp()]` beside the cluster, made every plan of the cluster's module exit 2).
//! OpenTofu 1.6 has no ephemeral resources and takes the data source the example's header names, with the same
//! arguments.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use acceptance_tests::{Client, Sim, Workspace, for_each_client, repo_root};

/// `examples/<name>/main.tf` as the client runs it: unchanged for Terraform, the data source for OpenTofu 1.6.
fn example(client: Client, name: &str) -> String {
    let text = std::fs::read_to_string(repo_root().join("examples").join(name).join("main.tf"))
        .expect("the example");
    match client {
        Client::Terraform => text,
        Client::OpenTofu => text
            .replace(
                "ephemeral \"ha_admin_credentials\"",
                "data \"ha_admin_credentials\"",
            )
            .replace(
                "ephemeral.ha_admin_credentials",
                "data.ha_admin_credentials",
            ),
    }
}

/// A workspace whose provider reaches `sim` through the environment, as the examples expect.
fn workspace(client: Client, scenario: &str, sim: &Sim) -> Workspace {
    Workspace::new(client, scenario)
        .with_timeout(Duration::from_secs(300))
        .with_env("GOOGLE_COMPUTE_CUSTOM_ENDPOINT", sim.url())
        .with_env("GOOGLE_SECRET_MANAGER_CUSTOM_ENDPOINT", sim.url())
        .with_env("GOOGLE_OAUTH_ACCESS_TOKEN", "sim-token")
}

fn kubectl_version(dir: &Path) -> Result<String, String> {
    let out = Command::new("kubectl")
        .args(["--kubeconfig=admin.kubeconfig", "version", "-o", "json"])
        .arg("--request-timeout=10s")
        .current_dir(dir)
        .output()
        .expect("kubectl is on PATH");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        Err(text(&out.stderr))
    }
}

/// The UTC day (days since the epoch), which the example's trigger follows.
fn utc_day() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    since.as_secs() / 86_400
}

#[test]
fn the_kubeconfig_example_serves_kubectl_and_leaves_both_plans_empty() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("kubeconfig-{client}"));
        let cluster = workspace(client, "kubeconfig-cluster", &sim);
        cluster.write_main_tf(&example(client, "quickstart"));
        cluster.write_file(
            "terraform.tfvars.json",
            r#"{"zones": ["europe-west1-b"], "project": "walk"}"#,
        );
        cluster.init();
        cluster.apply();

        let admin = workspace(client, "kubeconfig-admin", &sim);
        admin.write_main_tf(&example(client, "kubeconfig"));
        let state = cluster.path().join("terraform.tfstate");
        admin.write_file(
            "terraform.tfvars.json",
            &serde_json::json!({"project": "walk", "cluster_state": state}).to_string(),
        );
        admin.init();
        // The trigger is the UTC day: a run that straddles midnight is run again, once.
        for attempt in 0..2 {
            let day = utc_day();
            admin.apply();
            let version = kubectl_version(admin.path())
                .unwrap_or_else(|e| panic!("[{client}] kubectl with the example's file: {e}"));
            assert!(version.contains("serverVersion"), "[{client}] {version}");
            let admin_plan = admin.plan_detailed_exitcode();
            if day != utc_day() && attempt == 0 {
                continue;
            }
            assert_eq!(
                admin_plan, 0,
                "[{client}] the kubeconfig module's second plan"
            );
            break;
        }
        assert_eq!(
            cluster.plan_detailed_exitcode(),
            0,
            "[{client}] the cluster's module plans nothing"
        );
    });
}
