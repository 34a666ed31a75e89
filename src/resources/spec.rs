//! The cluster spec: everything a replica inherits from its cluster, handed over through a Terraform reference
//! (`cluster = ha_master_cluster.prod.spec`), never through a side channel. It carries the CA keys replicas sign
//! their certificates with, so the attribute is sensitive: it lives only in state and on the masters.
//!
//! At plan time the settings are known (they come from configuration) and the generated parts (IP, CAs) are
//! unknown, so replicas can validate their placement before anything exists.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tfplugin::value::Type;
use tfplugin_framework::Val;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClusterSpec {
    pub id: Val<String>,
    pub name: Val<String>,
    pub project: Val<String>,
    pub region: Val<String>,
    pub zone: Val<String>,
    pub multizone: Val<bool>,
    pub etcd_quorum_read: Val<bool>,
    pub machine_type: Val<String>,
    pub image: Val<String>,
    pub boot_disk_size_gb: Val<i64>,
    pub data_disk_size_gb: Val<i64>,
    pub network: Val<String>,
    pub subnetwork: Val<String>,
    pub tags: Val<Vec<String>>,
    pub labels: Val<BTreeMap<String, String>>,
    pub api_port: Val<i64>,
    pub service_cluster_ip_range: Val<String>,
    pub dns_domain: Val<String>,
    pub external_ip: Val<String>,
    pub ca_certificate: Val<String>,
    pub ca_private_key: Val<String>,
    pub etcd_peer_ca_certificate: Val<String>,
    pub etcd_peer_ca_private_key: Val<String>,
    pub etcd_client_ca_certificate: Val<String>,
    pub etcd_client_ca_private_key: Val<String>,
    /// The cluster-wide service-account signing key: every API server must sign and verify tokens with it.
    pub service_account_key: Val<String>,
    /// The cluster's `deletion_protection`: a replica's delete refuses to remove the last voting member while on.
    pub deletion_protection: Val<bool>,
}

impl ClusterSpec {
    pub fn value_type() -> Type {
        let s = || Type::String;
        Type::object([
            ("id", s()),
            ("name", s()),
            ("project", s()),
            ("region", s()),
            ("zone", s()),
            ("multizone", Type::Bool),
            ("etcd_quorum_read", Type::Bool),
            ("machine_type", s()),
            ("image", s()),
            ("boot_disk_size_gb", Type::Number),
            ("data_disk_size_gb", Type::Number),
            ("network", s()),
            ("subnetwork", s()),
            ("tags", Type::list(s())),
            ("labels", Type::map(s())),
            ("api_port", Type::Number),
            ("service_cluster_ip_range", s()),
            ("dns_domain", s()),
            ("external_ip", s()),
            ("ca_certificate", s()),
            ("ca_private_key", s()),
            ("etcd_peer_ca_certificate", s()),
            ("etcd_peer_ca_private_key", s()),
            ("etcd_client_ca_certificate", s()),
            ("etcd_client_ca_private_key", s()),
            ("service_account_key", s()),
            ("deletion_protection", Type::Bool),
        ])
    }

    /// A spec stored before `deletion_protection` existed has it null; such a cluster is protected (the
    /// default), and saying so in refreshed state keeps the upgrade's plan empty.
    pub fn fill_from_older_state(&mut self) {
        if self.deletion_protection.is_null() {
            self.deletion_protection = Val::Known(true);
        }
    }

    /// The settings changed from `old` to `self` that a running master only reads at boot, from the startup
    /// configuration written when its replica was created (`tags` are set on the VM at creation too). The provider
    /// does not roll masters in place yet, so such a change reaches a replica only when it is replaced. Values not
    /// known on both sides are not compared.
    pub fn startup_changes(&self, old: &ClusterSpec) -> Vec<&'static str> {
        fn differs<T: PartialEq>(new: &Val<T>, old: &Val<T>) -> bool {
            matches!((new.known(), old.known()), (Some(a), Some(b)) if a != b)
        }
        [
            ("multizone", differs(&self.multizone, &old.multizone)),
            (
                "etcd_quorum_read",
                differs(&self.etcd_quorum_read, &old.etcd_quorum_read),
            ),
            ("tags", differs(&self.tags, &old.tags)),
            ("api_port", differs(&self.api_port, &old.api_port)),
            (
                "service_cluster_ip_range",
                differs(
                    &self.service_cluster_ip_range,
                    &old.service_cluster_ip_range,
                ),
            ),
            ("dns_domain", differs(&self.dns_domain, &old.dns_domain)),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect()
    }

    /// Whether a change from `old` to `self` changes what a replica's VM is made of (GCE cannot change these on a
    /// running instance, so the replica is replaced).
    pub fn reshapes_vm(&self, old: &ClusterSpec) -> bool {
        self.id != old.id
            || self.machine_type != old.machine_type
            || self.image != old.image
            || self.boot_disk_size_gb != old.boot_disk_size_gb
            || self.data_disk_size_gb != old.data_disk_size_gb
            || self.network != old.network
            || self.subnetwork != old.subnetwork
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin::value::Value;

    /// A spec with every setting null (unknown to the comparison) but those a case sets.
    fn spec() -> ClusterSpec {
        let Type::Object { attrs, .. } = ClusterSpec::value_type() else {
            panic!("the spec is an object")
        };
        let v = Value::Object(attrs.keys().map(|k| (k.clone(), Value::Null)).collect());
        let mut s: ClusterSpec = tfplugin_framework::model::from_value(&v).unwrap();
        s.multizone = Val::Known(false);
        s.dns_domain = Val::Known("cluster.local".into());
        s.machine_type = Val::Known("e2-standard-2".into());
        s.labels = Val::Known(BTreeMap::new());
        s
    }

    /// (a change to the spec, the settings it must name)
    type Case = (fn(&mut ClusterSpec), Vec<&'static str>);

    #[test]
    fn settings_read_at_boot_are_named_and_the_rest_are_not() {
        let old = spec();
        let cases: Vec<Case> = vec![
            (|_| {}, vec![]),
            (|s| s.multizone = Val::Known(true), vec!["multizone"]),
            (
                |s| {
                    s.multizone = Val::Known(true);
                    s.dns_domain = Val::Known("corp.example".into());
                },
                vec!["multizone", "dns_domain"],
            ),
            // In place on the VM (labels) or a replacement (machine type): not a startup change.
            (
                |s| {
                    s.labels = Val::Known([("team".into(), "red".into())].into());
                    s.machine_type = Val::Known("e2-standard-4".into());
                },
                vec![],
            ),
            // Unknown at plan: apply decides; nothing to say yet.
            (|s| s.multizone = Val::Unknown, vec![]),
        ];
        for (change, want) in cases {
            let mut new = old.clone();
            change(&mut new);
            assert_eq!(new.startup_changes(&old), want);
        }
    }
}
