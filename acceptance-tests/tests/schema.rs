//! The provider starts under both clients (handshake, TLS, GetProviderSchema) and describes both resources, the
//! data source and (to Terraform, which has them) the ephemeral resource.

use acceptance_tests::{REQUIRED_PROVIDERS, Workspace, for_each_client};

#[test]
fn providers_schema_lists_both_resources_with_descriptions() {
    for_each_client(|client| {
        let ws = Workspace::new(client, "schema");
        ws.write_main_tf(REQUIRED_PROVIDERS);
        ws.init();
        let schema = ws.providers_schema_json();
        let address = client.provider_address();
        let resources = &schema["provider_schemas"][&address]["resource_schemas"];
        assert!(
            resources.is_object(),
            "[{client}] no resource schemas for {address}:\n{schema:#}"
        );
        for name in ["ha_master_cluster", "ha_master_replica"] {
            let description = resources[name]["block"]["description"]
                .as_str()
                .unwrap_or_default();
            assert!(
                !description.trim().is_empty(),
                "[{client}] {name} has no description:\n{:#}",
                resources[name]
            );
        }
        // `ha_admin_credentials`: a data source for every client, an ephemeral resource where the client has
        // them (OpenTofu 1.6 does not list them); its key and kubeconfig are sensitive in both.
        let provider = &schema["provider_schemas"][&address];
        let mut kinds = vec!["data_source_schemas"];
        if client == acceptance_tests::Client::Terraform {
            kinds.push("ephemeral_resource_schemas");
        }
        for kind in kinds {
            let attrs = &provider[kind]["ha_admin_credentials"]["block"]["attributes"];
            for secret in ["client_key_pem", "kubeconfig", "cluster"] {
                assert_eq!(
                    attrs[secret]["sensitive"], true,
                    "[{client}] {kind} ha_admin_credentials.{secret} must be sensitive:\n{provider:#}"
                );
            }
        }
    });
}

/// The provider declares its schema optional after the first ask (`get_provider_schema_optional`): a plan starts
/// three provider processes, and both clients ask only the first for the schema, reusing it for the others.
#[test]
fn a_plan_asks_for_the_schema_once_though_it_starts_several_processes() {
    for_each_client(|client| {
        let mut ws = Workspace::new(client, "schema-once");
        ws.write_main_tf(&format!(
            "{REQUIRED_PROVIDERS}{}",
            r#"
provider "ha" {
  project = "p"
  zone    = "us-central1-b"
}

resource "ha_master_cluster" "c" {
  name                      = "c"
  etcd_client_source_ranges = ["127.0.0.0/8"]
}
"#
        ));
        ws.init();
        ws.set_env("TF_LOG_PROVIDER", "debug");
        let plan = ws.plan();
        let started = |rpc: &str| {
            plan.stderr
                .lines()
                .filter(|l| l.contains("rpc started") && l.contains(&format!("rpc={rpc}")))
                .count()
        };
        let processes = plan
            .stderr
            .lines()
            .filter(|l| l.contains("plugin listening"))
            .count();
        assert!(
            processes >= 2,
            "[{client}] a plan starts several provider processes, saw {processes}:\n{plan}"
        );
        assert_eq!(
            started("GetProviderSchema"),
            1,
            "[{client}] GetProviderSchema calls:\n{plan}"
        );
    });
}
