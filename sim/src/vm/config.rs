//! Reading a master's startup contract (docs/master-config.md) out of instance metadata, the way the guest would:
//! cloud-init's `write_files` from `user-data`, then the kubelet's view of the static pod manifests.

use super::VmError;
use base64::Engine;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Component, Path, PathBuf};

use super::guest_file::GuestFile;

/// Where the kubelet looks for static pods (the contract fixes `staticPodPath` to this).
pub(crate) const MANIFEST_DIR: &str = "/etc/kubernetes/manifests";

#[derive(Debug, Deserialize)]
struct CloudConfig {
    #[serde(default)]
    write_files: Vec<WriteFile>,
    /// cloud-init `mounts`: `[device, mountpoint, fstype, options, dump, pass]`, trailing fields optional.
    #[serde(default)]
    mounts: Vec<Vec<serde_norway::Value>>,
    #[serde(default)]
    fs_setup: Vec<FsSetup>,
    /// cloud-init `runcmd`: argv lists (a plain string is a shell line, which the sim never runs).
    #[serde(default)]
    runcmd: Vec<serde_norway::Value>,
}

/// A cloud-init `fs_setup` entry (only what the sim acts on).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FsSetup {
    #[serde(default)]
    pub device: String,
    #[serde(default)]
    pub filesystem: String,
    #[serde(default)]
    pub overwrite: bool,
}

/// A cloud-init `mounts` entry.
#[derive(Debug, Clone)]
pub(crate) struct Mount {
    pub device: String,
    pub mountpoint: String,
    pub options: String,
}

#[derive(Debug, Deserialize)]
struct WriteFile {
    path: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    encoding: Option<String>,
    #[serde(default)]
    permissions: Option<String>,
    /// cloud-init's `user:group`; cloud-init writes `root:root` when it is not given.
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    append: bool,
}

#[derive(Debug, Deserialize)]
struct Pod {
    kind: String,
    spec: PodSpec,
}

#[derive(Debug, Deserialize)]
struct PodSpec {
    #[serde(default, rename = "initContainers")]
    init_containers: Vec<Container>,
    containers: Vec<Container>,
    #[serde(default)]
    volumes: Vec<Volume>,
}

#[derive(Debug, Deserialize)]
struct Volume {
    name: String,
    #[serde(default, rename = "hostPath")]
    host_path: Option<HostPath>,
}

#[derive(Debug, Deserialize)]
struct HostPath {
    path: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Container {
    name: String,
    #[serde(default)]
    image: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default, rename = "volumeMounts")]
    volume_mounts: Vec<VolumeMount>,
    #[serde(default)]
    env: Vec<EnvVar>,
}

#[derive(Debug, Deserialize)]
struct EnvVar {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Debug, Deserialize)]
struct VolumeMount {
    name: String,
    #[serde(rename = "mountPath")]
    mount_path: String,
}

/// `--flag=value` arguments of a container; bare `--flag` means "true".
#[derive(Debug, Clone, Default)]
pub(crate) struct Flags(BTreeMap<String, String>);

impl Flags {
    fn parse(component: &str, argv: &[String]) -> Result<Flags, VmError> {
        let mut flags = BTreeMap::new();
        for arg in argv {
            let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
                return Err(VmError::Config(format!(
                    "{component}: argument {arg:?} is not a flag; the contract wants --flag=value"
                )));
            };
            let (k, v) = flag.split_once('=').unwrap_or((flag, "true"));
            flags.insert(k.to_string(), v.to_string());
        }
        Ok(Flags(flags))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    pub fn require(&self, component: &str, name: &str) -> Result<&str, VmError> {
        self.get(name)
            .ok_or_else(|| VmError::Config(format!("{component}: missing required flag --{name}")))
    }
}

/// kops' `kube-apiserver-healthcheck` (kubernetes/kops `cmd/kube-apiserver-healthcheck/main.go`): it defines only
/// these three flags, then klog's (`klog.InitFlags`), and Go's `flag` package exits on any other. It takes no
/// listen address or upstream: it listens on :3990 and proxies to https://127.0.0.1 (port 443).
pub(crate) const HEALTHCHECK_FLAGS: &[&str] = &["ca-cert", "client-cert", "client-key"];
/// klog v2's `InitFlags`, which every klog program accepts.
const KLOG_FLAGS: &[&str] = &[
    "add_dir_header",
    "alsologtostderr",
    "legacy_stderr_threshold_behavior",
    "log_backtrace_at",
    "log_dir",
    "log_file",
    "log_file_max_size",
    "logtostderr",
    "one_output",
    "skip_headers",
    "skip_log_headers",
    "stderrthreshold",
    "v",
    "vmodule",
];
/// The port kube-apiserver-healthcheck listens on, fixed in its source (`wellknownports.KubeAPIServerHealthCheck`).
pub(crate) const HEALTHCHECK_PORT: u16 = 3990;

/// An init container of the etcd pod, as the kubelet would run it.
#[derive(Debug, Clone)]
pub(crate) struct InitContainer {
    pub name: String,
    pub image: String,
    /// command ++ args.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// hostPath mounts: (path in the container, path on the VM).
    pub volumes: Vec<(String, String)>,
}

/// What the sim needs from a master's startup config.
#[derive(Debug, Clone)]
pub(crate) struct Startup {
    pub files: Vec<GuestFile>,
    /// etcd's argv exactly as the manifest says (command ++ args), before any host mapping.
    pub etcd_argv: Vec<String>,
    pub apiserver: Flags,
    /// The kube-apiserver container's image (`registry.k8s.io/kube-apiserver:v1.33.4`): its tag is the version the
    /// stand-in reports on `/version`.
    pub apiserver_image: String,
    /// The etcd container's image (`registry.k8s.io/etcd:3.5.1-0`): its tag picks the etcd binary the VM runs.
    pub etcd_image: String,
    /// The `healthcheck` sidecar in the kube-apiserver pod, if any.
    pub healthcheck: Option<Flags>,
    /// The etcd container's hostPath volume mounts: (path in the container, path on the VM).
    pub etcd_volumes: Vec<(String, String)>,
    /// The etcd pod's hostPath volumes of type `DirectoryOrCreate`: the kubelet makes them before any container.
    pub etcd_created_dirs: Vec<String>,
    /// The etcd pod's init containers, in order (a restoring master's: docs/master-config.md §9).
    pub etcd_init: Vec<InitContainer>,
    pub mounts: Vec<Mount>,
    pub fs_setup: Vec<FsSetup>,
    /// The first boot's key fetch from Secret Manager, if the keys are not in `user-data`.
    pub key_fetch: Option<super::keys::KeyFetch>,
    /// Loopback TCP ports the guest redirects once booted (`loopback_nat`), as `(from, to)`.
    pub loopback_redirects: Vec<(u16, u16)>,
}

/// Parses metadata `user-data` and the static pod manifests it writes.
pub(crate) fn parse(metadata: &BTreeMap<String, String>) -> Result<Startup, VmError> {
    let cloud = cloud_config(metadata)?;
    let files = cloud
        .write_files
        .iter()
        .map(decode)
        .collect::<Result<Vec<_>, _>>()?;

    let manifest = |file: &str| -> Result<Pod, VmError> {
        let path = format!("{MANIFEST_DIR}/{file}");
        let f = files
            .iter()
            .rfind(|f| f.path == path)
            .ok_or_else(|| VmError::Config(format!("write_files has no {path}")))?;
        serde_norway::from_slice(&f.bytes)
            .map_err(|e| VmError::Config(format!("{path} is not a pod manifest: {e}")))
    };
    every_manifest_is_a_pod(&files)?;

    let etcd_pod = manifest("etcd.yaml")?;
    let etcd = container(&etcd_pod, "etcd", "etcd.yaml")?;
    let etcd_argv: Vec<String> = etcd.command.iter().chain(&etcd.args).cloned().collect();
    let program = etcd_argv.first().map(|p| {
        Path::new(p)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    });
    if program.as_deref() != Some("etcd") {
        return Err(VmError::Config(format!(
            "etcd.yaml: container `etcd` must exec the etcd binary directly (command[0] = .../etcd), got {:?}",
            etcd_argv.first()
        )));
    }

    let etcd_volumes = host_mounts(&etcd_pod, etcd)?;
    let etcd_created_dirs = etcd_pod
        .spec
        .volumes
        .iter()
        .filter_map(|v| v.host_path.as_ref())
        .filter(|hp| hp.kind.as_deref() == Some("DirectoryOrCreate"))
        .map(|hp| hp.path.clone())
        .collect();
    let etcd_init = etcd_pod
        .spec
        .init_containers
        .iter()
        .map(|c| init_container(&etcd_pod, c))
        .collect::<Result<Vec<_>, VmError>>()?;
    let mounts = cloud
        .mounts
        .iter()
        .map(|m| mount(m))
        .collect::<Result<Vec<_>, _>>()?;

    let api_pod = manifest("kube-apiserver.yaml")?;
    let api = container(&api_pod, "kube-apiserver", "kube-apiserver.yaml")?;
    let apiserver = Flags::parse("kube-apiserver", &flag_args(api))?;
    let healthcheck = api_pod
        .spec
        .containers
        .iter()
        .find(|c| c.name == "healthcheck")
        .map(healthcheck_flags)
        .transpose()?;
    let apiserver_image = api.image.clone();
    let loopback_redirects = super::loopback_nat::redirects(&files, &argv_lists(&cloud.runcmd));
    Ok(Startup {
        files,
        etcd_argv,
        apiserver,
        apiserver_image,
        etcd_image: etcd.image.clone(),
        healthcheck,
        etcd_volumes,
        etcd_created_dirs,
        etcd_init,
        mounts,
        fs_setup: cloud.fs_setup,
        key_fetch: super::keys::of(&argv_lists(&cloud.runcmd))?,
        loopback_redirects,
    })
}

/// Metadata's `user-data`, as cloud-init reads it.
fn cloud_config(metadata: &BTreeMap<String, String>) -> Result<CloudConfig, VmError> {
    let user_data = metadata.get("user-data").ok_or_else(|| {
        VmError::Config("metadata has no `user-data` key (the master's cloud-config)".into())
    })?;
    // cloud-init ignores user-data that lacks this header, so a real VM would boot with nothing configured.
    if !user_data.trim_start().starts_with("#cloud-config") {
        return Err(VmError::Config(
            "user-data must start with `#cloud-config`".into(),
        ));
    }
    serde_norway::from_str(user_data)
        .map_err(|e| VmError::Config(format!("user-data is not valid cloud-config YAML: {e}")))
}

/// Every manifest the kubelet would pick up must at least parse, or a real kubelet would skip it silently.
fn every_manifest_is_a_pod(files: &[GuestFile]) -> Result<(), VmError> {
    for f in files
        .iter()
        .filter(|f| f.path.starts_with(MANIFEST_DIR) && f.path.ends_with(".yaml"))
    {
        let pod: Pod = serde_norway::from_slice(&f.bytes)
            .map_err(|e| VmError::Config(format!("{} is not a pod manifest: {e}", f.path)))?;
        if pod.kind != "Pod" {
            return Err(VmError::Config(format!(
                "{} has kind {:?}, want Pod",
                f.path, pod.kind
            )));
        }
    }
    Ok(())
}

fn init_container(pod: &Pod, c: &Container) -> Result<InitContainer, VmError> {
    Ok(InitContainer {
        name: c.name.clone(),
        image: c.image.clone(),
        argv: c.command.iter().chain(&c.args).cloned().collect(),
        env: c
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        volumes: host_mounts(pod, c)?,
    })
}

/// The health-check sidecar's flags, refused where the real container would exit at once.
fn healthcheck_flags(c: &Container) -> Result<Flags, VmError> {
    let flags = Flags::parse("healthcheck", &flag_args(c))?;
    // A real container would exit at once ("flag provided but not defined"), and nothing would answer
    // the load balancer's health check.
    if let Some(bad) = flags
        .0
        .keys()
        .find(|k| !HEALTHCHECK_FLAGS.contains(&k.as_str()) && !KLOG_FLAGS.contains(&k.as_str()))
    {
        return Err(VmError::Config(format!(
            "kube-apiserver.yaml: container `healthcheck` passes --{bad}, which kube-apiserver-healthcheck \
             does not define (it takes only --ca-cert, --client-cert, --client-key and klog's flags, and \
             always listens on :{HEALTHCHECK_PORT}); the container would exit: flag provided but not \
             defined: -{bad}"
        )));
    }
    if !c.command.is_empty() {
        return Err(VmError::Config(
            "kube-apiserver.yaml: container `healthcheck` sets `command`, but the image's program is its \
             ko entrypoint (/ko-app/kube-apiserver-healthcheck): pass flags as `args`"
                .into(),
        ));
    }
    Ok(flags)
}

/// `runcmd`'s argv entries, as strings (a shell-line entry is skipped: the sim runs none).
fn argv_lists(runcmd: &[serde_norway::Value]) -> Vec<Vec<String>> {
    runcmd
        .iter()
        .filter_map(|c| c.as_sequence())
        .map(|args| {
            args.iter()
                .map(|a| match a {
                    serde_norway::Value::String(s) => s.clone(),
                    other => serde_norway::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                })
                .collect()
        })
        .collect()
}

/// A container's hostPath mounts: (path in the container, path on the VM).
fn host_mounts(pod: &Pod, c: &Container) -> Result<Vec<(String, String)>, VmError> {
    let mut out = Vec::new();
    for vm in &c.volume_mounts {
        let vol = pod
            .spec
            .volumes
            .iter()
            .find(|v| v.name == vm.name)
            .ok_or_else(|| {
                VmError::Config(format!(
                    "etcd.yaml: container {:?} mounts {:?}, which names no volume of the pod",
                    c.name, vm.name
                ))
            })?;
        if let Some(hp) = &vol.host_path {
            guest_relative(&vm.mount_path)?;
            guest_relative(&hp.path)?;
            out.push((vm.mount_path.clone(), hp.path.clone()));
        }
    }
    Ok(out)
}

/// One `mounts` entry; cloud-init's defaults fill missing fields (options `defaults,nofail,...`).
fn mount(fields: &[serde_norway::Value]) -> Result<Mount, VmError> {
    let text: Vec<String> = fields
        .iter()
        .map(|v| match v {
            serde_norway::Value::String(s) => s.clone(),
            other => serde_norway::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_string(),
        })
        .collect();
    let (Some(device), Some(mountpoint)) = (text.first(), text.get(1)) else {
        return Err(VmError::Config(format!(
            "user-data mounts entry {text:?} needs at least [device, mountpoint]"
        )));
    };
    guest_relative(mountpoint)?;
    Ok(Mount {
        device: device.clone(),
        mountpoint: mountpoint.clone(),
        options: text
            .get(3)
            .cloned()
            .unwrap_or_else(|| "defaults,nofail".into()),
    })
}

/// The device name a GCE guest path names: `/dev/disk/by-id/google-<deviceName>` (also the
/// `scsi-0Google_PersistentDisk_<deviceName>` alias).
pub(crate) fn gce_device_name(device: &str) -> Option<&str> {
    device
        .strip_prefix("/dev/disk/by-id/google-")
        .or_else(|| device.strip_prefix("/dev/disk/by-id/scsi-0Google_PersistentDisk_"))
}

/// A path inside the etcd container → the path on the VM, through the container's hostPath volume mounts
/// (the deepest mount path that contains it). A path under no volume is taken as a VM path, as the sim has
/// always done when a manifest declares no volumes.
pub(crate) fn container_to_vm(path: &str, volumes: &[(String, String)]) -> String {
    let p = Path::new(path);
    volumes
        .iter()
        .filter_map(|(mount, host)| Some((mount, host, p.strip_prefix(mount).ok()?)))
        .max_by_key(|(mount, _, _)| mount.len())
        .map_or_else(
            || path.to_string(),
            // A file mounted on its own (`rest` empty) is the host file itself, with no trailing `/`.
            |(_, host, rest)| {
                if rest.as_os_str().is_empty() {
                    host.to_string()
                } else {
                    Path::new(host).join(rest).to_string_lossy().into_owned()
                }
            },
        )
}

fn container<'a>(pod: &'a Pod, name: &str, file: &str) -> Result<&'a Container, VmError> {
    pod.spec
        .containers
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| VmError::Config(format!("{file}: no container named `{name}`")))
}

/// A container's flags: command ++ args without the program name (with no command, the image's entrypoint is the
/// program and all of args are flags).
fn flag_args(c: &Container) -> Vec<String> {
    let skip = usize::from(!c.command.is_empty());
    c.command
        .iter()
        .skip(skip)
        .chain(&c.args)
        .cloned()
        .collect()
}

fn decode(f: &WriteFile) -> Result<GuestFile, VmError> {
    guest_relative(&f.path)?;
    let bytes = match f.encoding.as_deref().unwrap_or("text/plain") {
        "text/plain" => f.content.clone().into_bytes(),
        "b64" | "base64" => base64::engine::general_purpose::STANDARD
            .decode(f.content.split_whitespace().collect::<String>())
            .map_err(|e| VmError::Config(format!("write_files {}: bad base64: {e}", f.path)))?,
        other => {
            return Err(VmError::Config(format!(
                "write_files {}: encoding {other:?} is not in the contract (use b64 or none)",
                f.path
            )));
        }
    };
    let mode = match &f.permissions {
        Some(p) => u32::from_str_radix(p.trim_start_matches("0o"), 8).map_err(|_| {
            VmError::Config(format!(
                "write_files {}: permissions {p:?} is not octal",
                f.path
            ))
        })?,
        None => 0o644,
    };
    Ok(GuestFile {
        path: f.path.clone(),
        mode,
        owner: f.owner.clone().unwrap_or_else(|| "root:root".into()),
        append: f.append,
        bytes,
    })
}

/// The part of an absolute guest path below `/`, refusing anything that could escape the VM's root.
pub(crate) fn guest_relative(path: &str) -> Result<PathBuf, VmError> {
    let p = Path::new(path);
    if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(VmError::Config(format!(
            "guest path {path:?} must be absolute, without `..`"
        )));
    }
    Ok(p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect())
}

/// Maps guest paths and addresses to the host: `/x` → `<rootfs>/x`, and the guest's own loopback / wildcard → its
/// internal IP (the host's 127.0.0.1 is shared by every VM, so each VM's "localhost" is its own address).
#[derive(Debug, Clone)]
pub(crate) struct HostMap {
    pub rootfs: PathBuf,
    pub ip: Ipv4Addr,
    /// Mounted attached disks: (guest mount point, the disk's host directory).
    pub mounted: Vec<(String, PathBuf)>,
}

impl HostMap {
    /// A guest path on the boot disk (what cloud-init's `write_files` sees: it runs before `mounts`).
    pub fn path(&self, guest: &str) -> Result<PathBuf, VmError> {
        Ok(self.rootfs.join(guest_relative(guest)?))
    }

    /// A guest path once the disks are mounted: under the deepest mount point that contains it, the disk's
    /// directory; otherwise the boot disk.
    pub fn mounted_path(&self, guest: &str) -> Result<PathBuf, VmError> {
        let rel = guest_relative(guest)?;
        let best = self
            .mounted
            .iter()
            .filter_map(|(mp, dir)| {
                let mp = guest_relative(mp).ok()?;
                let rest = rel.strip_prefix(&mp).ok()?.to_path_buf();
                Some((mp.components().count(), dir.join(rest)))
            })
            .max_by_key(|(depth, _)| *depth);
        match best {
            Some((_, p)) => Ok(p),
            None => self.path(guest),
        }
    }

    /// The host that `host` means inside this VM.
    pub fn host(&self, host: &str) -> String {
        match host {
            "127.0.0.1" | "localhost" | "0.0.0.0" | "" => self.ip.to_string(),
            other => other.to_string(),
        }
    }

    /// Rewrites each URL of a comma-separated list through [`HostMap::host`], dropping duplicates that result.
    pub fn url_list(&self, list: &str) -> String {
        let mut out: Vec<String> = Vec::new();
        for url in list.split(',').filter(|u| !u.is_empty()) {
            let mapped = match split_url(url) {
                Some((scheme, host, port)) => format!("{scheme}://{}:{port}", self.host(host)),
                None => url.to_string(),
            };
            if !out.contains(&mapped) {
                out.push(mapped);
            }
        }
        out.join(",")
    }
}

/// `scheme://host:port[/...]` → (scheme, host, port).
pub(crate) fn split_url(url: &str) -> Option<(&str, &str, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    Some((scheme, host, port.parse().ok()?))
}

/// etcd flags whose values are listen/advertise URLs of this member (mapped through the VM's localhost rule).
const ETCD_OWN_URL_FLAGS: &[&str] = &[
    "listen-client-urls",
    "listen-peer-urls",
    "advertise-client-urls",
    "initial-advertise-peer-urls",
    "listen-metrics-urls",
];

/// etcd's peer listeners sit behind the VPC firewall: etcd itself listens on the guest port plus this offset
/// (2380 → 12380) and a guard on the guest port admits only what the firewall admits (`net::guard`). Peers reach
/// the guest port, as advertised. Nothing else binds the VMs' addresses, so the offset port is always free.
pub(crate) const PEER_BACKSTAGE_OFFSET: u16 = 10000;

/// Where etcd really listens for a peer URL's guest port.
pub(crate) fn peer_backstage(guest: u16) -> u16 {
    guest.saturating_add(PEER_BACKSTAGE_OFFSET)
}

/// The guest ports of etcd's `--listen-peer-urls` (each gets a firewall guard on the VM's IP).
pub(crate) fn peer_ports(argv: &[String]) -> Vec<u16> {
    let mut ports: Vec<u16> = argv
        .iter()
        .filter_map(|a| a.trim_start_matches('-').strip_prefix("listen-peer-urls="))
        .flat_map(|list| {
            list.split(',')
                .filter_map(|u| split_url(u).map(|(_, _, p)| p))
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The host argv for etcd: the local binary, paths through the container's volumes and the VM's mounts to the
/// host (rootfs or an attached disk's directory), own URLs on the VM's IP, peer listeners on their backstage port
/// ([`peer_backstage`]).
/// Also checks that etcd only listens on this VM's address: on a real VM binding another host's IP fails.
pub(crate) fn etcd_host_argv(
    argv: &[String],
    etcd_bin: &Path,
    map: &HostMap,
    volumes: &[(String, String)],
) -> Result<Vec<String>, VmError> {
    let mut out = vec![etcd_bin.to_string_lossy().into_owned()];
    for arg in &argv[1..] {
        let Some((flag, value)) = arg.split_once('=') else {
            out.push(arg.clone());
            continue;
        };
        let name = flag.trim_start_matches('-');
        let value = if ETCD_OWN_URL_FLAGS.contains(&name) {
            let mut mapped = map.url_list(value);
            if name == "listen-peer-urls" {
                mapped = mapped
                    .split(',')
                    .map(|u| match split_url(u) {
                        Some((scheme, host, port)) => {
                            format!("{scheme}://{host}:{}", peer_backstage(port))
                        }
                        None => u.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(",");
            }
            if name.starts_with("listen-") {
                for url in mapped.split(',') {
                    if split_url(url).map(|(_, h, _)| h) != Some(&map.ip.to_string()) {
                        return Err(VmError::Config(format!(
                            "etcd.yaml: --{name} has {url}, but this VM's only address is {}",
                            map.ip
                        )));
                    }
                }
            }
            mapped
        } else if value.starts_with('/') {
            map.mounted_path(&container_to_vm(value, volumes))?
                .to_string_lossy()
                .into_owned()
        } else {
            value.to_string()
        };
        out.push(format!("{flag}={value}"));
    }
    Ok(out)
}
