//! The few Kubernetes and cloud-init object shapes the startup configuration is made of, as serde structs so the
//! YAML serializer (not a template) decides quoting. Only the fields we set exist; Deserialize is derived too so
//! tests read the rendered documents back into the same types.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn is_false(b: &bool) -> bool {
    !*b
}

/// cloud-init user-data (the part after the `#cloud-config` header line).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CloudConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    pub write_files: Vec<WriteFile>,
    /// cloud-init's `fs_setup`: make a file system on a disk that has none (etcd's data disk).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fs_setup: Vec<FsSetup>,
    /// cloud-init's `mounts`: fstab lines (device, mount point, type, options, dump, pass).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runcmd: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FsSetup {
    pub label: String,
    pub filesystem: String,
    pub device: String,
    /// false: an existing file system (a rebuilt replica's data) is kept.
    pub overwrite: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WriteFile {
    pub path: String,
    pub content: String,
    pub owner: String,
    /// Octal string, as cloud-init wants; a YAML integer would be read as decimal.
    pub permissions: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ObjectMeta {
    pub name: String,
    pub namespace: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub host_network: bool,
    pub priority_class_name: String,
    /// Run to completion, in order, before `containers` start (only a restoring etcd has any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    pub containers: Vec<Container>,
    pub volumes: Vec<Volume>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    pub image: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments to the image's own entrypoint (when `command` is empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    pub run_as_user: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Resources {
    pub requests: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    pub http_get: HttpGet,
    pub initial_delay_seconds: u32,
    pub timeout_seconds: u32,
    pub failure_threshold: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HttpGet {
    pub host: String,
    pub port: u16,
    pub path: String,
    pub scheme: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    pub host_path: HostPath,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostPath {
    pub path: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A kubeconfig with one cluster, one user (client certificate files) and one context.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    pub api_version: String,
    pub kind: String,
    pub clusters: Vec<Named<KubeCluster>>,
    pub users: Vec<Named<KubeUser>>,
    pub contexts: Vec<Named<KubeContext>>,
    pub current_context: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Named<T> {
    pub name: String,
    #[serde(flatten)]
    pub item: T,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubeCluster {
    pub cluster: ClusterEntry,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct ClusterEntry {
    pub server: String,
    pub certificate_authority: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubeUser {
    pub user: UserEntry,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct UserEntry {
    pub client_certificate: String,
    pub client_key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubeContext {
    pub context: ContextEntry,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContextEntry {
    pub cluster: String,
    pub user: String,
}

/// `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`, the fields a master's kubelet needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    pub api_version: String,
    pub kind: String,
    pub static_pod_path: String,
    pub authentication: KubeletAuthentication,
    pub authorization: KubeletAuthorization,
    pub cluster_domain: String,
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Vec<String>,
    pub cgroup_driver: String,
    pub healthz_bind_address: String,
    pub healthz_port: u16,
    pub read_only_port: u16,
    pub register_with_taints: Vec<Taint>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubeletAuthentication {
    pub anonymous: Enabled,
    pub webhook: Enabled,
    pub x509: X509,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Enabled {
    pub enabled: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct X509 {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubeletAuthorization {
    pub mode: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Taint {
    pub key: String,
    pub effect: String,
}
