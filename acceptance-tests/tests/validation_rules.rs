//! Every validation rule of the provider, under both clients: the message, the stage that catches it (validate
//! for literals, plan for values that come from another resource) and the attribute it points at.

use acceptance_tests::walk::edit_config;
use acceptance_tests::{
    AttributePath, REQUIRED_PROVIDERS, Stage, Workspace, assert_validation_error, expect_rejection,
    for_each_client,
};

/// A provider block and a valid cluster to hang replicas on.
const BASE: &str = r#"
provider "ha" {
  project = "p"
  region  = "europe-west1"
}
"#;

fn cluster(extra: &str) -> String {
    format!(
        r#"{BASE}
resource "ha_master_cluster" "c" {{
  name                      = "prod"
  zone                      = "europe-west1-b"
  etcd_client_source_ranges = ["127.0.0.0/8"]
  {extra}
}}
"#
    )
}

fn all_at(stage: Stage, rejections: Vec<acceptance_tests::Rejection>) {
    for r in rejections {
        assert_eq!(r.stage, stage, "{r}");
    }
}

#[test]
fn cluster_name_must_be_a_gce_name() {
    let r = assert_validation_error(
        &edit_config(
            cluster(""),
            &[(
                r#"name                      = "prod""#,
                r#"name = "Prod_1""#,
            )],
        ),
        &[
            r#"Invalid name "Prod_1""#,
            "must start with a lowercase letter",
        ],
        "ha_master_cluster.c.name",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn cluster_name_leaves_room_for_derived_names() {
    let long = "a".repeat(52);
    let r = assert_validation_error(
        &edit_config(cluster(""), &[(r#""prod""#, &format!("{long:?}"))]),
        &["52 characters long", "limited to 51"],
        "ha_master_cluster.c.name",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn cluster_zone_must_be_in_its_region() {
    let r = assert_validation_error(
        &cluster(r#"region = "us-central1""#),
        &[
            r#"Zone "europe-west1-b" is not in region "us-central1""#,
            "Use a zone of us-central1",
        ],
        "ha_master_cluster.c.zone",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn cidr_ranges_must_be_well_formed() {
    let r = assert_validation_error(
        &cluster(r#"api_source_ranges = ["10.0.0.1/8"]"#),
        &[
            r#"CIDR range "10.0.0.1/8" has host bits set"#,
            "did you mean `10.0.0.0/8`",
        ],
        "ha_master_cluster.c.api_source_ranges",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn machine_type_syntax_is_checked() {
    let r = assert_validation_error(
        &cluster(r#"machine_type = "e2-huge""#),
        &[r#"Unknown machine type syntax "e2-huge""#, "e2-standard-2"],
        "ha_master_cluster.c.machine_type",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn timeouts_are_durations() {
    let r = assert_validation_error(
        &cluster(r#"timeouts { create = "5 minutes" }"#),
        &["Invalid duration", "like `30m`"],
        "ha_master_cluster.c.timeouts.create",
    );
    all_at(Stage::Validate, r);
}

/// Fail closed: a duration too large for any clock used to abort the provider in `validate` (the release build
/// aborts on panic), which both clients print as a crashed plugin. Now it is an error at the attribute, and the
/// provider keeps serving.
#[test]
fn huge_timeouts_are_refused_without_crashing_the_provider() {
    for huge in ["99999999999999999999999h", "4000000000000000h"] {
        let config = format!(
            "{REQUIRED_PROVIDERS}\n{}",
            cluster(&format!(r#"timeouts {{ create = "{huge}" }}"#))
        );
        let path = AttributePath::parse("ha_master_cluster.c.timeouts.create");
        for_each_client(|client| {
            let ws = Workspace::new(client, "invalid-huge-timeout");
            ws.write_main_tf(&config);
            let r = expect_rejection(
                &ws,
                &["Invalid duration", "longer than the limit of 24h"],
                &path,
            );
            assert_eq!(r.stage, Stage::Validate, "{r}");
            let out = ws.run(&["validate", "-no-color"]).combined();
            for crash in [
                "plugin exited",
                "unexpected EOF",
                "panicked",
                "Plugin did not respond",
            ] {
                assert!(
                    !out.contains(crash),
                    "[{client}] {huge}: the provider crashed:\n{out}"
                );
            }
        });
    }
}

#[test]
fn disk_sizes_are_bounded() {
    let r = assert_validation_error(
        &cluster("data_disk_size_gb = 1"),
        &["Disk size 1 GB is out of range"],
        "ha_master_cluster.c.data_disk_size_gb",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn etcd_version_must_be_a_version_the_provider_pins() {
    for (value, says) in [
        ("3.6", "etcd 3.6 is not a version this provider runs"),
        ("latest", r#""latest" is not an etcd version"#),
    ] {
        let r = assert_validation_error(
            &cluster(&format!("etcd_version = \"{value}\"")),
            &[says, r#""3.5" (etcd 3.5.24)"#],
            "ha_master_cluster.c.etcd_version",
        );
        all_at(Stage::Validate, r);
    }
}

#[test]
fn label_keys_follow_gce_rules_at_validate() {
    let r = assert_validation_error(
        &cluster(r#"labels = { "Team" = "x" }"#),
        &[
            r#"Invalid label key "Team""#,
            "The key starts with 'T'",
            "start with a lowercase letter",
        ],
        r#"ha_master_cluster.c.labels["Team"]"#,
    );
    all_at(Stage::Validate, r);
}

#[test]
fn label_values_follow_gce_rules_at_validate() {
    let config = cluster("")
        + r#"
resource "ha_master_replica" "r" {
  cluster = ha_master_cluster.c.spec
  labels  = { team = "X Y" }
}
"#;
    let r = assert_validation_error(
        &config,
        &[
            r#"Invalid value "X Y" of label "team""#,
            "only lowercase letters, digits",
        ],
        r#"ha_master_replica.r.labels["team"]"#,
    );
    all_at(Stage::Validate, r);
}

#[test]
fn the_provider_s_own_labels_are_refused_at_validate() {
    let r = assert_validation_error(
        &cluster(r#"labels = { "ha-master-cluster" = "other" }"#),
        &[
            r#"Label "ha-master-cluster" is the provider's own"#,
            "would overwrite this one",
        ],
        r#"ha_master_cluster.c.labels["ha-master-cluster"]"#,
    );
    all_at(Stage::Validate, r);
}

#[test]
fn a_replica_name_leaves_room_for_its_internal_address_and_data_disk() {
    // 60 characters: a GCE name, but `<name>-int` would be 64.
    let config = cluster("")
        + &format!(
            r#"
resource "ha_master_replica" "r" {{
  cluster = ha_master_cluster.c.spec
  name    = "{}"
}}
"#,
            "a".repeat(60)
        );
    let r = assert_validation_error(
        &config,
        &["60 characters long", "limited to 59", "`<name>-int`"],
        "ha_master_replica.r.name",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn replica_zone_must_be_in_the_cluster_region() {
    // The cluster's region comes through a reference: known at plan, not at validate.
    let config = cluster("multizone = true")
        + r#"
resource "ha_master_replica" "r" {
  cluster = ha_master_cluster.c.spec
  zone    = "us-central1-a"
}
"#;
    let r = assert_validation_error(
        &config,
        &[
            r#"Zone "us-central1-a" is not in the cluster's region "europe-west1""#,
            "Choose a zone of europe-west1",
        ],
        "ha_master_replica.r.zone",
    );
    all_at(Stage::Plan, r);
}

#[test]
fn replica_zone_must_be_the_cluster_zone_without_multizone() {
    let config = cluster("")
        + r#"
resource "ha_master_replica" "r" {
  cluster = ha_master_cluster.c.spec
  zone    = "europe-west1-c"
}
"#;
    let r = assert_validation_error(
        &config,
        &[
            r#"Zone "europe-west1-c" differs from the cluster's zone "europe-west1-b""#,
            "multizone = true",
        ],
        "ha_master_replica.r.zone",
    );
    all_at(Stage::Plan, r);
}

#[test]
fn credentials_and_access_token_conflict() {
    let config = r#"
provider "ha" {
  project      = "p"
  credentials  = "{}"
  access_token = "ya29.x"
}

resource "ha_master_cluster" "c" {
  name                      = "prod"
  zone                      = "europe-west1-b"
  etcd_client_source_ranges = ["127.0.0.0/8"]
}
"#;
    assert_validation_error(
        config,
        &["Conflicting credentials", "not both"],
        "provider.ha.access_token",
    );
}

#[test]
fn lock_ttl_leaves_room_for_three_renewals() {
    let r = assert_validation_error(
        &edit_config(
            cluster(""),
            &[(
                r#"region  = "europe-west1""#,
                "region   = \"europe-west1\"\n  lock_ttl = \"2s\"",
            )],
        ),
        &["lock_ttl 2s is too short", "Set lock_ttl to 3s or more"],
        "provider.ha.lock_ttl",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn a_cluster_without_a_project_says_where_to_set_one() {
    // The attribute is absent, so clients can only point at the resource block; the message says where to set it.
    for_each_client(|client| {
        let ws = Workspace::new(client, "no-project");
        ws.write_main_tf(&format!(
            "{REQUIRED_PROVIDERS}\n{}",
            r#"
resource "ha_master_cluster" "c" {
  name                      = "prod"
  zone                      = "europe-west1-b"
  etcd_client_source_ranges = ["127.0.0.0/8"]
}
"#
        ));
        ws.init();
        ws.validate().assert_success();
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure();
        plan.assert_contains("Error: No project");
        plan.assert_contains("with ha_master_cluster.c,");
        plan.assert_contains("or export GOOGLE_PROJECT");
    });
}

#[test]
fn values_unknown_at_plan_are_validated_at_apply_with_the_same_message() {
    for_each_client(|client| {
        let ws = Workspace::new(client, "validated-at-apply");
        ws.write_main_tf(&format!(
            "{REQUIRED_PROVIDERS}\n{BASE}\n{}",
            r#"
resource "terraform_data" "zone" {
  input = "us-central1-a"
}

resource "ha_master_cluster" "c" {
  name                      = "prod"
  region                    = "europe-west1"
  zone                      = terraform_data.zone.output
  etcd_client_source_ranges = ["127.0.0.0/8"]
}
"#
        ));
        ws.init();
        // Unknown at plan: nothing to say yet.
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_success();
        let apply = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        apply.assert_failure();
        apply.assert_contains(r#"Zone "us-central1-a" is not in region "europe-west1""#);
        apply.assert_contains("with ha_master_cluster.c,");
    });
}

#[test]
fn a_restore_from_a_snapshot_must_name_one_it_can_find() {
    // No `backup` block to take the newest from, and no snapshot named.
    let r = assert_validation_error(
        &cluster("restore {\n    source     = \"snapshot\"\n    generation = 1\n  }"),
        &["No snapshot to restore is named", "gs://<bucket>/<object>"],
        "ha_master_cluster.c.restore.source",
    );
    all_at(Stage::Validate, r);
    let r = assert_validation_error(
        &cluster(
            "restore {\n    source     = \"snapshot\"\n    snapshot   = \"s3://b/o.db\"\n    generation = 1\n  }",
        ),
        &[
            "restore.snapshot is not a Cloud Storage object",
            "does not start with gs://",
        ],
        "ha_master_cluster.c.restore.snapshot",
    );
    all_at(Stage::Validate, r);
    let r = assert_validation_error(
        &cluster(
            "restore {\n    source     = \"surviving_member\"\n    snapshot   = \"gs://b/o.db\"\n    generation = 1\n  }",
        ),
        &["restore.snapshot is set for another source"],
        "ha_master_cluster.c.restore.snapshot",
    );
    all_at(Stage::Validate, r);
    let r = assert_validation_error(
        &cluster("restore {\n    source     = \"backup\"\n    generation = 1\n  }"),
        &["Unknown restore source \"backup\"", "\"snapshot\""],
        "ha_master_cluster.c.restore.source",
    );
    all_at(Stage::Validate, r);
}

#[test]
fn a_backup_key_must_be_a_cloud_kms_key_not_one_of_its_versions() {
    let r = assert_validation_error(
        &cluster(
            "backup {\n    bucket       = \"b\"\n    kms_key_name = \"projects/p/locations/europe-west1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/3\"\n  }",
        ),
        &[
            "Invalid backup kms_key_name",
            "projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>",
            "not one of its versions",
        ],
        "ha_master_cluster.c.backup.kms_key_name",
    );
    all_at(Stage::Validate, r);
}
