//! The backend's own types: what callers ask for (specs) and what they get back (info). No SDK type leaks out,
//! so callers and their tests never depend on the client library's model.

use std::collections::BTreeMap;

/// A regional address: which kind to reserve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressKind {
    /// A public static IP (the cluster's API address).
    External,
    /// An IP in a subnetwork (a replica's etcd peer address); `None` = the region's default subnetwork.
    Internal { subnetwork: Option<String> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressSpec {
    pub name: String,
    pub region: String,
    pub kind: AddressKind,
    /// Reserve this exact IP (or promote an ephemeral one) instead of letting GCE choose.
    pub ip: Option<String>,
    pub description: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressInfo {
    pub name: String,
    pub region: String,
    pub ip: String,
    /// RESERVING, RESERVED or IN_USE.
    pub status: String,
    /// selfLinks of the instances and forwarding rules holding the IP.
    pub users: Vec<String>,
    pub kind: AddressKind,
    pub self_link: String,
    /// What the address is for, as set when it was reserved (ownership: see `ops::orphans`).
    pub description: Option<String>,
    /// The address's labels and their fingerprint: `set_address_labels` is a compare-and-set on them.
    pub labels: BTreeMap<String, String>,
    pub label_fingerprint: Fingerprint,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirewallSpec {
    pub name: String,
    /// `global/networks/default`, a network name, or a URL.
    pub network: String,
    /// Allowed TCP ports or ranges: `"443"`, `"2379-2380"`.
    pub tcp_ports: Vec<String>,
    pub source_ranges: Vec<String>,
    pub source_tags: Vec<String>,
    pub target_tags: Vec<String>,
    pub description: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirewallInfo {
    pub name: String,
    pub network: String,
    pub tcp_ports: Vec<String>,
    pub source_ranges: Vec<String>,
    pub source_tags: Vec<String>,
    pub target_tags: Vec<String>,
    pub self_link: String,
}

/// What an instance's (only) access config should look like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExternalIp {
    /// No access config: no public IP.
    None,
    /// An ephemeral public IP chosen by GCE.
    Ephemeral,
    /// This reserved static IP (must be an EXTERNAL address of the instance's region).
    Static(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSpec {
    pub name: String,
    pub zone: String,
    /// A machine type name (`e2-standard-2`) or partial URL (`zones/z/machineTypes/t`).
    pub machine_type: String,
    /// Boot image: URL or `projects/p/global/images/family/f`.
    pub image: String,
    pub disk_size_gb: i64,
    /// `pd-ssd`, `pd-balanced`...; `None` = GCE's default.
    pub disk_type: Option<String>,
    /// `global/networks/default`, a network name, or a URL.
    pub network: String,
    /// Name or URL; `None` = auto-mode default.
    pub subnetwork: Option<String>,
    /// The internal IP to use (reserved beforehand: etcd names it before the VM exists).
    pub network_ip: Option<String>,
    pub external_ip: ExternalIp,
    pub tags: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// Metadata items in order (`user-data`, ...).
    pub metadata: Vec<(String, String)>,
    pub service_account: Option<ServiceAccount>,
    /// etcd's data disk, attached read-write and kept when the VM is deleted.
    pub data_disk: Option<DataDisk>,
}

/// A non-boot persistent disk of an instance: made with the instance (one insert, so no disk exists without
/// its VM), or an existing one attached (a VM rebuilt on its data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataDisk {
    Create {
        name: String,
        size_gb: i64,
        /// `pd-ssd`, `pd-balanced`, `pd-standard`.
        disk_type: String,
        device_name: String,
        /// The disk's own labels (a VM's labels are not a disk's).
        labels: std::collections::BTreeMap<String, String>,
    },
    Attach {
        name: String,
        device_name: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskInfo {
    pub name: String,
    pub size_gb: i64,
    pub disk_type: String,
    /// Names of the instances it is attached to.
    pub users: Vec<String>,
    pub labels: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceAccount {
    pub email: String,
    pub scopes: Vec<String>,
}

/// An opaque fingerprint for optimistic concurrency (labels, metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fingerprint(pub Vec<u8>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceInfo {
    pub name: String,
    pub zone: String,
    pub id: u64,
    pub self_link: String,
    /// PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED...
    pub status: String,
    /// Machine type name (last segment of the URL).
    pub machine_type: String,
    pub internal_ip: Option<String>,
    pub external_ip: Option<String>,
    /// Name of nic0's access config (`External NAT`), if it has one.
    pub access_config_name: Option<String>,
    /// nic0's name (`nic0`), needed by access-config calls.
    pub nic_name: String,
    pub network: String,
    pub subnetwork: Option<String>,
    pub tags: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub label_fingerprint: Fingerprint,
    pub metadata: Vec<(String, String)>,
    pub metadata_fingerprint: Fingerprint,
    /// Attached disks other than the boot disk: device name → disk name.
    pub attached_disks: BTreeMap<String, String>,
}

impl InstanceInfo {
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A legacy HTTP health check (target pools accept only these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheckSpec {
    pub name: String,
    pub port: u16,
    pub request_path: String,
    pub check_interval_sec: i32,
    pub timeout_sec: i32,
    pub healthy_threshold: i32,
    pub unhealthy_threshold: i32,
    pub description: Option<String>,
}

impl HealthCheckSpec {
    /// GCE's defaults (port 80, `/`, 5 s, 5 s, 2, 2) for `name`.
    pub fn new(name: impl Into<String>) -> Self {
        HealthCheckSpec {
            name: name.into(),
            port: 80,
            request_path: "/".into(),
            check_interval_sec: 5,
            timeout_sec: 5,
            healthy_threshold: 2,
            unhealthy_threshold: 2,
            description: None,
        }
    }
}

/// An instance by zone and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InstanceRef {
    pub zone: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetPoolSpec {
    pub name: String,
    pub region: String,
    /// Name of a legacy HTTP health check.
    pub health_check: Option<String>,
    pub instances: Vec<InstanceRef>,
    pub description: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetPoolInfo {
    pub name: String,
    pub region: String,
    pub self_link: String,
    pub instances: Vec<InstanceRef>,
    /// Health check names.
    pub health_checks: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceHealth {
    pub instance: InstanceRef,
    /// HEALTHY or UNHEALTHY.
    pub state: String,
    /// The forwarding rule's IP the state is for, if a rule targets the pool.
    pub ip_address: Option<String>,
    pub port: Option<i32>,
}

impl InstanceHealth {
    pub fn healthy(&self) -> bool {
        self.state == "HEALTHY"
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardingRuleSpec {
    pub name: String,
    pub region: String,
    /// The static IP (an EXTERNAL address of the region).
    pub ip_address: String,
    /// `443` or `443-443`.
    pub port_range: String,
    /// Target pool name (same region).
    pub target_pool: String,
    pub description: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardingRuleInfo {
    pub name: String,
    pub region: String,
    pub ip_address: String,
    /// As GCE stores it: `443-443`.
    pub port_range: String,
    /// Target pool name.
    pub target_pool: String,
    pub self_link: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneInfo {
    pub name: String,
    pub region: String,
    /// UP or DOWN.
    pub status: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    pub name: String,
    pub zones: Vec<String>,
    pub status: String,
}
