//! Where a replica's private keys are (docs/guides/secrets.md): in Secret Manager for every VM this provider makes, or
//! still in the instance metadata of a VM an earlier release (or kube-up) made. Upgrading the provider moves
//! nothing by itself (a plan that rebuilt every master would be no upgrade); the plan says where the keys are and
//! which change moves them: the replica's next rebuild.

use std::collections::BTreeMap;

use crate::topology::Refusal;

/// What every PEM private key (PKCS#8, PKCS#1 or SEC 1) contains.
const PRIVATE_KEY_MARK: &str = "PRIVATE KEY-----";

/// Whether a VM's metadata (as the provider last wrote it) holds a private key.
pub fn in_metadata(metadata: &BTreeMap<String, String>) -> bool {
    metadata.values().any(|v| v.contains(PRIVATE_KEY_MARK))
}

/// The plan's warning for a replica whose keys are still in metadata. `rebuilding`: this plan rebuilds its VM,
/// which moves them. One summary for every replica, so Terraform shows it once with a count.
pub fn warning(replica: &str, rebuilding: bool) -> Refusal {
    let summary = "Replica keys are still in instance metadata".to_string();
    let detail = if rebuilding {
        format!(
            "Replica {replica}'s VM keeps its private keys in its instance metadata, where anyone who may read \
             the instance (roles/compute.viewer) or reach its metadata server reads them. This apply rebuilds the \
             VM, and the new one fetches its keys from its secret in Secret Manager instead."
        )
    } else {
        format!(
            "Replica {replica}'s VM was made by an earlier release and keeps its private keys (among them two \
             with cluster-admin rights and etcd's client key) in its instance metadata, where anyone who may read \
             the instance (roles/compute.viewer) or reach its metadata server reads them. The replica's next \
             rebuild moves them to its secret in Secret Manager: any change the plan shows as a roll (a new \
             `kubernetes_version`, `etcd_version` or `image`, or certificates due for renewal) does it. Upgrading \
             the provider rolls nothing by itself; the Secrets guide (docs/guides/secrets.md) says how to roll now."
        )
    };
    (summary, detail)
}

/// The plan's warning for a cluster whose CA keys are still in its `spec`, and so in every replica's state.
pub fn ca_keys_in_state_warning(cluster: &str) -> Refusal {
    (
        "CA keys are still in every replica's state".into(),
        format!(
            "Cluster {cluster} was made by an earlier release and keeps its three CA private keys and its \
             service-account signing key in `spec`, so every ha_master_replica's `cluster` input copies them \
             into state: whoever reads the state, a saved plan or a state backup can sign any identity in the \
             cluster, cluster-admin included. Set `ca_key_store = \"secret_manager\"` on the cluster to move \
             them to its own Secret Manager secret ({cluster}-cluster-keys), which no master may read; the \
             cluster keeps one copy in its state. Every replica's plan then shows its `cluster` input \
             changing, and no master rolls. Upgrading the provider moves nothing by itself."
        ),
    )
}

/// The warning an imported cluster's plan carries while its service-account key, read from a master at import, is
/// in its `spec` and so in every replica's state.
pub fn imported_key_in_state_warning(cluster: &str) -> Refusal {
    (
        "The service-account signing key is in every replica's state".into(),
        format!(
            "Cluster {cluster} was imported: its service-account signing key, read from a master, is in `spec`, \
             so every ha_master_replica's `cluster` input copies it into state, and whoever reads the state, a \
             saved plan or a state backup can mint a token for any service account in the cluster. Set \
             `ca_key_store = \"secret_manager\"` on the cluster to move it to the cluster's own Secret Manager \
             secret ({cluster}-cluster-keys), which no master may read; the cluster keeps one copy in its state. \
             Every replica's plan then shows its `cluster` input changing, and no master rolls."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_key_of_any_pem_kind_in_any_item_counts() {
        let md = |v: &str| BTreeMap::from([("user-data".to_string(), v.to_string())]);
        for (value, holds) in [
            (
                "-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\n",
                true,
            ),
            ("-----BEGIN RSA PRIVATE KEY-----\n", true),
            ("-----BEGIN EC PRIVATE KEY-----\n", true),
            (
                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                false,
            ),
            (
                "#cloud-config\nruncmd: [[sh, /etc/srv/kubernetes/fetch-keys.sh]]\n",
                false,
            ),
            ("", false),
        ] {
            assert_eq!(in_metadata(&md(value)), holds, "{value}");
        }
        assert!(!in_metadata(&BTreeMap::new()));
    }

    #[test]
    fn the_ca_keys_warning_names_the_cluster_the_setting_and_that_nothing_rolls() {
        let (_, detail) = ca_keys_in_state_warning("prod");
        for part in [
            "Cluster prod",
            "ca_key_store = \"secret_manager\"",
            "prod-cluster-keys",
            "no master rolls",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
    }

    #[test]
    fn the_warning_names_the_replica_and_what_moves_the_keys() {
        let (s1, later) = warning("m-b", false);
        let (s2, now) = warning("m-c", true);
        assert_eq!(s1, s2, "one summary, so Terraform groups them");
        assert!(
            later.contains("m-b") && later.contains("next rebuild"),
            "{later}"
        );
        assert!(
            now.contains("m-c") && now.contains("This apply rebuilds"),
            "{now}"
        );
    }
}
