//! Invalid configurations are rejected at validate or plan, under both clients, pointing at the attribute.
//! Add a case per rule: the config (required_providers is added for you), substrings of the error, and the
//! attribute path the error must show.

use acceptance_tests::{Stage, assert_validation_error};

#[test]
fn cluster_zone_must_be_a_gce_zone() {
    let rejections = assert_validation_error(
        r#"
provider "ha" {
  project = "p"
}

resource "ha_master_cluster" "x" {
  name                      = "x"
  zone                      = "mars"
  etcd_client_source_ranges = ["127.0.0.0/8"]
}
"#,
        &[
            r#"Invalid zone "mars""#,
            "A zone is a region followed by a letter",
        ],
        "ha_master_cluster.x.zone",
    );
    // A literal is checked by ValidateResourceConfig, so validate already catches it.
    for r in rejections {
        assert_eq!(r.stage, Stage::Validate, "{r}");
    }
}
