//! Stored resources, in their wire shape (camelCase, GCE's legacy spellings such as `natIP`).
//!
//! Fields the sim reasons about are typed; everything else a client sent is kept in `extra` and echoed back,
//! as GCE echoes most of a resource. `serde(flatten)` removes typed keys from `extra`, so no key is emitted
//! twice (the official SDK rejects duplicate keys).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

type Extra = Map<String, Value>;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Instance {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    pub machine_type: String,
    pub status: String,
    pub zone: String,
    pub self_link: String,
    #[serde(default)]
    pub network_interfaces: Vec<NetworkInterface>,
    #[serde(default)]
    pub disks: Vec<Value>,
    pub metadata: Metadata,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub label_fingerprint: String,
    #[serde(default)]
    pub tags: Tags,
    #[serde(default)]
    pub deletion_protection: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_start_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop_timestamp: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkInterface {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub network: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    #[serde(rename = "networkIP", default, skip_serializing_if = "Option::is_none")]
    pub network_ip: Option<String>,
    #[serde(default)]
    pub access_configs: Vec<AccessConfig>,
    #[serde(default)]
    pub fingerprint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_type: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct AccessConfig {
    #[serde(default)]
    pub kind: String,
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "natIP", default, skip_serializing_if = "Option::is_none")]
    pub nat_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_tier: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Metadata {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub fingerprint: String,
    #[serde(default)]
    pub items: Vec<MetadataItem>,
}

impl Metadata {
    /// Items as a map, for booting a VM from its metadata.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.items
            .iter()
            .map(|i| (i.key.clone(), i.value.clone().unwrap_or_default()))
            .collect()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct MetadataItem {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Tags {
    #[serde(default)]
    pub items: Vec<String>,
    #[serde(default)]
    pub fingerprint: String,
}

/// A regional address. `status` is stored as RESERVING/RESERVED; IN_USE and `users` are derived when it is
/// shown, from the access configs and forwarding rules that hold the IP, so they can never drift.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Address {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    pub address: String,
    pub address_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_tier: Option<String>,
    /// INTERNAL addresses: the subnetwork the IP is taken from, as a full URL (GCE returns it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    pub status: String,
    pub region: String,
    pub self_link: String,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A regional subnetwork of a network: the range its instances' and INTERNAL addresses' IPs come from. Every
/// region also has an implicit `default` one (the sim's internal /16), which is never stored: see
/// `api::subnetworks`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Subnetwork {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    pub network: String,
    pub ip_cidr_range: String,
    pub gateway_address: String,
    pub region: String,
    pub self_link: String,
    pub fingerprint: String,
    pub private_ip_google_access: bool,
    pub stack_type: String,
    pub purpose: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Firewall {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    pub network: String,
    pub priority: i64,
    pub direction: String,
    #[serde(default)]
    pub disabled: bool,
    pub self_link: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct HttpHealthCheck {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    pub port: i64,
    pub request_path: String,
    pub check_interval_sec: i64,
    pub timeout_sec: i64,
    pub healthy_threshold: i64,
    pub unhealthy_threshold: i64,
    pub self_link: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct TargetPool {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    pub region: String,
    pub self_link: String,
    #[serde(default)]
    pub health_checks: Vec<String>,
    #[serde(default)]
    pub instances: Vec<String>,
    pub session_affinity: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ForwardingRule {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    pub region: String,
    #[serde(rename = "IPAddress")]
    pub ip_address: String,
    #[serde(rename = "IPProtocol")]
    pub ip_protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<String>,
    #[serde(default)]
    pub target: String,
    pub load_balancing_scheme: String,
    pub network_tier: String,
    pub label_fingerprint: String,
    pub fingerprint: String,
    pub self_link: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ForwardingRule {
    /// The TCP ports this rule carries, from `portRange` (`"80-80"`) or `ports`; empty = all ports.
    pub fn port_list(&self) -> Vec<u16> {
        let mut out = Vec::new();
        if let Some(range) = &self.port_range {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                // Bounded so a rule for "1-65535" does not ask the net layer for 65k listeners.
                out.extend((a..=b).take(64));
            }
        }
        out.extend(self.ports.iter().filter_map(|p| p.parse::<u16>().ok()));
        out
    }
}

/// A zonal persistent disk. `users` is derived when it is shown, from the instances whose `disks[]` name it as
/// `source`, so it can never drift (out-of-band deletes included); the stored field stays empty.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Disk {
    pub kind: String,
    pub id: String,
    pub creation_timestamp: String,
    pub name: String,
    /// int64 as a JSON string, as GCE sends it; clients may send a number.
    #[serde(deserialize_with = "int_string")]
    pub size_gb: String,
    pub zone: String,
    pub status: String,
    pub self_link: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attach_timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_detach_timestamp: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub label_fingerprint: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// An int64 field that JSON carries as a string (`"20"`) but clients may also send as a number (`20`).
fn int_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Null => Ok(String::new()),
        other => Err(D::Error::custom(format!("expected an int64, got {other}"))),
    }
}
