//! GCE resource names (RFC 1035: `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters) and the names this provider
//! derives from a cluster's name. Derived names keep kube-up's conventions (`<master>-ip`, `<master>` pool and
//! rule, `<master>-etcd` firewall), so clusters made by the original scripts can be adopted.

use super::Problem;

/// GCE's limit for every resource name.
pub const MAX_NAME: usize = 63;
/// The longest suffix derived from a cluster name (see [`DerivedNames`]).
pub const LONGEST_SUFFIX: &str = "-etcd-client";
/// A cluster name must leave room for its longest derived name.
pub const MAX_CLUSTER_NAME: usize = MAX_NAME - LONGEST_SUFFIX.len();

/// Checks a name against RFC 1035 as GCE applies it, with a message that says what to change.
pub fn check_rfc1035(name: &str, max: usize) -> Result<(), Problem> {
    let bad = |why: String| {
        Err((
            format!("Invalid name {name:?}"),
            format!(
                "{why}. Google Compute Engine names must start with a lowercase letter, contain only lowercase letters, digits and hyphens, not end with a hyphen, and be at most {max} characters."
            ),
        ))
    };
    if name.is_empty() {
        return bad("The name is empty".into());
    }
    if name.len() > max {
        return bad(format!("The name is {} characters long", name.len()));
    }
    let first = name.as_bytes()[0];
    if !first.is_ascii_lowercase() {
        return bad(format!("It starts with {:?}", first as char));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return bad(format!("It contains {c:?}"));
    }
    if name.ends_with('-') {
        return bad("It ends with a hyphen".into());
    }
    Ok(())
}

pub fn check_cluster_name(name: &str) -> Result<(), Problem> {
    check_rfc1035(name, MAX_CLUSTER_NAME).map_err(|(s, d)| {
        (s, format!("{d} A cluster name is limited to {MAX_CLUSTER_NAME} so that derived names such as `<name>{LONGEST_SUFFIX}` fit."))
    })
}

pub fn check_instance_name(name: &str) -> Result<(), Problem> {
    check_rfc1035(name, MAX_NAME)
}

/// A replica's reserved internal address is `<replica>-int`: its IP is known before the VM exists.
pub const INTERNAL_ADDRESS_SUFFIX: &str = "-int";
/// A replica's etcd data disk is `<replica>-pd`: it outlives the VM.
pub const DATA_DISK_SUFFIX: &str = "-pd";
/// A replica name must leave room for the longest name derived from it.
pub const MAX_REPLICA_NAME: usize = MAX_NAME - longest(INTERNAL_ADDRESS_SUFFIX, DATA_DISK_SUFFIX);

const fn longest(a: &str, b: &str) -> usize {
    if a.len() > b.len() { a.len() } else { b.len() }
}

/// A replica's VM name: a GCE name short enough that `<name>-int` and `<name>-pd` are GCE names too, since the
/// provider makes those objects at apply.
pub fn check_replica_name(name: &str) -> Result<(), Problem> {
    check_rfc1035(name, MAX_REPLICA_NAME).map_err(|(s, d)| {
        (s, format!("{d} A replica name is limited to {MAX_REPLICA_NAME} so that the names derived from it, `<name>{INTERNAL_ADDRESS_SUFFIX}` (its internal address) and `<name>{DATA_DISK_SUFFIX}` (its data disk), fit GCE's {MAX_NAME}."))
    })
}

/// The Secret Manager secret that holds a replica's keys. Secrets are per project and instances per zone, so the
/// zone is part of the name; at most 59 + 1 + 63 + 5 characters, well under Secret Manager's 255.
pub fn keys_secret(replica: &str, zone: &str) -> String {
    format!("{replica}-{zone}-keys")
}

/// The Secret Manager secret that holds a cluster's CA keys and service-account signing key, which the provider reads
/// when it signs a replica's certificates (docs/guides/secrets.md). No replica secret can take this name: theirs
/// end in `-<zone>-keys`, and no zone is called `cluster`.
pub fn cluster_keys_secret(cluster: &str) -> String {
    format!("{cluster}-cluster-keys")
}

/// The GCE objects a cluster owns, named from the cluster's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedNames {
    /// The static regional address every kubelet and user talks to.
    pub address: String,
    /// etcd peer traffic, only between masters (by tag).
    pub firewall_etcd_peer: String,
    /// The API port from the allowed API source ranges.
    pub firewall_api: String,
    /// etcd's client port, only from the admin ranges.
    pub firewall_etcd_client: String,
    /// The plain-HTTP health port, only from GCE's health checkers.
    pub firewall_health: String,
    /// The network tag every master carries, which the firewalls target.
    pub master_tag: String,
    /// Load balancer objects, present only with two or more replicas.
    pub health_check: String,
    pub target_pool: String,
    pub forwarding_rule: String,
}

impl DerivedNames {
    pub fn for_cluster(cluster: &str) -> Self {
        Self {
            address: format!("{cluster}-ip"),
            firewall_etcd_peer: format!("{cluster}-etcd"),
            firewall_api: format!("{cluster}-https"),
            firewall_etcd_client: format!("{cluster}{LONGEST_SUFFIX}"),
            firewall_health: format!("{cluster}-healthz"),
            master_tag: format!("{cluster}-master"),
            health_check: format!("{cluster}-healthz"),
            target_pool: cluster.to_string(),
            forwarding_rule: cluster.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_gce_names() {
        for ok in ["a", "prod", "kube-master-1", &"a".repeat(63)] {
            assert!(check_rfc1035(ok, MAX_NAME).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_with_the_reason() {
        let cases = [
            ("", "empty"),
            ("Prod", "starts with 'P'"),
            ("1prod", "starts with '1'"),
            ("prod_1", "contains '_'"),
            ("prod-", "ends with a hyphen"),
            (&*"a".repeat(64), "64 characters long"),
        ];
        for (name, why) in cases {
            let (_, detail) = check_rfc1035(name, MAX_NAME).unwrap_err();
            assert!(detail.contains(why), "{name:?}: {detail}");
        }
    }

    #[test]
    fn replica_names_leave_room_for_their_internal_address_and_data_disk() {
        assert_eq!(MAX_REPLICA_NAME, 59);
        let longest = "a".repeat(MAX_REPLICA_NAME);
        assert!(check_replica_name(&longest).is_ok());
        for suffix in [INTERNAL_ADDRESS_SUFFIX, DATA_DISK_SUFFIX] {
            assert!(
                check_instance_name(&format!("{longest}{suffix}")).is_ok(),
                "{suffix}"
            );
        }
        for n in 60..=63 {
            let (_, detail) = check_replica_name(&"a".repeat(n)).unwrap_err();
            assert!(detail.contains(&format!("{n} characters long")), "{detail}");
            assert!(
                detail.contains("limited to 59") && detail.contains("`<name>-int`"),
                "{detail}"
            );
        }
    }

    #[test]
    fn cluster_names_leave_room_for_derived_names() {
        let longest = "a".repeat(MAX_CLUSTER_NAME);
        assert!(check_cluster_name(&longest).is_ok());
        let derived = DerivedNames::for_cluster(&longest);
        for n in [
            &derived.address,
            &derived.firewall_etcd_client,
            &derived.health_check,
            &derived.master_tag,
        ] {
            assert!(check_instance_name(n).is_ok(), "{n}");
        }
        assert!(check_cluster_name(&"a".repeat(MAX_CLUSTER_NAME + 1)).is_err());
    }
}
