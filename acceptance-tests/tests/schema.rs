//! The provider starts under both clients (handshake, TLS, GetProviderSchema) and describes both resources.

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
    });
}
