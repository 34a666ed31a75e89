//! A read-only provider (the `read_only` setting, or `HA_READ_ONLY`), for drift jobs: its identity may read
//! Compute Engine and nothing secret. What its plans say they did not look at, and why its applies are refused.

/// What a replica's refresh says when the provider is read-only: etcd was not asked.
pub fn etcd_not_read(cluster: &str) -> (String, String) {
    (
        format!("etcd of cluster {cluster} was not read: the provider is read_only"),
        "A read-only provider reads no CA key, so it has no client certificate to present to etcd and does not dial it. This plan shows what Compute Engine shows (VMs, load balancer, firewall rules, metadata), not etcd's members or their health: a removed or unhealthy member does not show here. `ha_cluster_health`, read by a provider that is not read-only, names each fault.".to_string(),
    )
}

/// What a cluster's refresh says when the provider is read-only: its keys' secret was not compared with state.
pub fn keys_not_checked(cluster: &str, secret: &str) -> (String, String) {
    (
        format!("Cluster {cluster}'s keys secret was not checked: the provider is read_only"),
        format!(
            "Secret {secret} holds the cluster's CA keys, which a read-only provider does not read, so this plan would not show it deleted or overwritten. The next plan of a provider that is not read-only does."
        ),
    )
}

/// What a replica's plan says instead of the quorum, protection and fault-tolerance judgements it could not make.
pub fn guard_not_run(cluster: &str, replica: &str) -> (String, String) {
    (
        format!("Did not check replica {replica}'s change against etcd: the provider is read_only"),
        format!(
            "Quorum, deletion protection and fault tolerance are judged from the members of cluster {cluster}'s etcd, which a read-only provider does not read. A read-only provider cannot apply this plan; a provider that is not read-only judges the change again before it touches anything."
        ),
    )
}

/// Why an apply (a create, update or delete, or a credential minted) is refused: nothing was changed.
pub fn apply_refused(what: &str) -> (String, String) {
    (
        format!("The provider is read_only: {what} was not done"),
        "A read-only provider (the provider's `read_only`, or HA_READ_ONLY in the environment) plans and refreshes only: it reads no CA key and never reaches etcd, so it can neither sign nor change membership. Nothing was changed. Apply with a provider that is not read-only, whose identity may read the cluster's keys and reach etcd (docs/guides/drift-jobs.md).".to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sentence_names_the_setting_and_what_was_left() {
        for (summary, detail) in [
            etcd_not_read("prod"),
            keys_not_checked("prod", "prod-cluster-keys"),
            guard_not_run("prod", "prod-abc"),
            apply_refused("create of replica prod-abc"),
        ] {
            assert!(summary.contains("read_only"), "{summary}");
            assert!(!detail.is_empty());
        }
        assert!(apply_refused("x").1.contains("Nothing was changed"));
        assert!(
            keys_not_checked("prod", "prod-cluster-keys")
                .1
                .contains("prod-cluster-keys")
        );
    }
}
