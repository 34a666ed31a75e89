//! Simulated master VMs: each boots from its instance metadata as a real GCE master would (docs/master-config.md),
//! keeps its disk under its own folder, and plays kubelet for the two things the sim runs for real: the etcd static pod
//! (the real binary, restarted on exit) and an API-server stand-in whose /healthz tracks that etcd.

mod addon_manager;
mod api;
pub(crate) mod config;
mod etcd;
pub(crate) mod guest_file;
mod init;
mod keys;
mod loopback_nat;
mod tls;
mod tokens;

#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use crate::etcd_bins::EtcdBins;
use crate::net::background::Background;
use crate::net::{Guard, Identify, PortMap, SharedIngress};
use config::{HostMap, split_url};
use rustls::pki_types::ServerName;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Errors from booting or inspecting a VM; messages name the file, flag or socket involved.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// The startup config breaks the contract in docs/master-config.md.
    #[error("invalid master startup config: {0}")]
    Config(String),
    #[error("TLS: {0}")]
    Tls(String),
    /// The startup config parses, but a real master would not come up on it (`crate::contract`).
    #[error("{0}")]
    Contract(#[from] crate::contract::Refusal),
    /// A port of the VM could not be opened (another process holds it).
    #[error("{0}")]
    Net(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> VmError {
    let context = context.into();
    move |source| VmError::Io { context, source }
}

/// Knobs a sim sets once for all its VMs.
#[derive(Clone)]
pub struct VmOptions {
    /// Guest→host port mapping (443 → 6443 by default); must match the one given to NATs and load balancers.
    pub port_map: PortMap,
    /// First delay before restarting an exited etcd; doubles per exit up to `restart_backoff_max`. The kubelet uses
    /// 10 s → 5 min; the sim defaults to 1 s → 30 s so fault drills do not take minutes.
    pub restart_backoff_initial: Duration,
    pub restart_backoff_max: Duration,
    /// How often the stand-in polls etcd's /health for [`VmHandle::status`] (/healthz itself always checks live).
    pub health_interval: Duration,
    /// The VPC firewall in front of etcd's peer port, and who opened a connection to it (the sim's fabric knows
    /// which etcd process belongs to which VM). Default: admit everyone.
    pub peer_firewall: SharedIngress,
    pub identify: Identify,
    /// How long after boot the master's addon manager first applies its addons (`addon_manager`): kube-up's
    /// starts with the kubelet and applies on start, then every minute.
    pub addon_delay: Duration,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            port_map: PortMap::default(),
            restart_backoff_initial: Duration::from_secs(1),
            restart_backoff_max: Duration::from_secs(30),
            health_interval: Duration::from_secs(1),
            peer_firewall: crate::net::admit_all(),
            identify: crate::net::from_host(),
            addon_delay: Duration::ZERO,
        }
    }
}

impl std::fmt::Debug for VmOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmOptions")
            .field("port_map", &self.port_map)
            .field("restart_backoff_initial", &self.restart_backoff_initial)
            .field("restart_backoff_max", &self.restart_backoff_max)
            .field("health_interval", &self.health_interval)
            .finish_non_exhaustive()
    }
}

/// A snapshot of what runs inside a VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmStatus {
    pub etcd_running: bool,
    pub etcd_pid: Option<u32>,
    /// How many times etcd has exited (each exit is followed by a restart after the back-off).
    pub etcd_restarts: u32,
    pub etcd_last_exit: Option<String>,
    /// The last /health probe of the local etcd succeeded (so the API's /healthz is 200).
    pub etcd_healthy: bool,
    pub health_error: Option<String>,
}

/// What `ssh` into a VM needs, saved at boot so `ssh_env` works from another process (the CLI).
#[derive(Debug, Serialize, Deserialize)]
struct SshInfo {
    name: String,
    internal_ip: Ipv4Addr,
    etcdctl_dir: PathBuf,
    endpoints: String,
    cacert: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

const SSH_INFO: &str = "vm.json";

/// What a VM has besides its boot disk: attached data disks, and the service account its metadata server hands
/// out tokens for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attached {
    /// Device name → the disk's host directory.
    pub disks: BTreeMap<String, PathBuf>,
    /// `serviceAccounts[0].email`: whom a key fetch from Secret Manager reads as.
    pub service_account: Option<String>,
    /// `serviceAccounts[0].scopes` (URLs): what the metadata server's token is good for.
    pub scopes: Vec<String>,
}

/// Boots master VMs.
pub struct Vm;

impl Vm {
    /// [`Vm::boot_with`] with [`VmOptions::default`].
    pub fn boot(
        dir: &Path,
        name: &str,
        internal_ip: Ipv4Addr,
        metadata: &BTreeMap<String, String>,
        etcd_bin: &Path,
    ) -> Result<VmHandle, VmError> {
        Vm::boot_with(
            dir,
            name,
            internal_ip,
            metadata,
            etcd_bin,
            &VmOptions::default(),
        )
    }

    /// Boots (or reboots: the disk under `dir/rootfs` survives) a master from its metadata. Returns once etcd has been
    /// started and the API ports are bound; etcd health follows asynchronously, as on a real VM.
    ///
    /// Layout of `dir`: `rootfs/` (guest `/`, so `/var/lib/etcd` is `rootfs/var/lib/etcd`), `etcd.log` (etcd's output
    /// and restarts), `vm.json` (for [`ssh_env`]).
    pub fn boot_with(
        dir: &Path,
        name: &str,
        internal_ip: Ipv4Addr,
        metadata: &BTreeMap<String, String>,
        etcd_bin: &Path,
        opts: &VmOptions,
    ) -> Result<VmHandle, VmError> {
        Vm::boot_attached(
            dir,
            name,
            internal_ip,
            metadata,
            &EtcdBins::single(etcd_bin),
            opts,
            &Attached::default(),
        )
    }

    /// [`Vm::boot_with`] with attached disks and service account. cloud-init's `fs_setup` formats the disks and
    /// its `mounts` mount those attached as `/dev/disk/by-id/google-<device>`; etcd's paths then resolve through
    /// its pod's hostPath volumes and these mounts (docs/master-config.md §8). A master whose keys are in Secret
    /// Manager fetches them as the service account (§11).
    pub fn boot_attached(
        dir: &Path,
        name: &str,
        internal_ip: Ipv4Addr,
        metadata: &BTreeMap<String, String>,
        etcd_bins: &EtcdBins,
        opts: &VmOptions,
        attached: &Attached,
    ) -> Result<VmHandle, VmError> {
        let mut startup = config::parse(metadata)?;
        std::fs::create_dir_all(dir).map_err(io_err(format!("create VM dir {}", dir.display())))?;
        let mut map = HostMap {
            rootfs: dir.join("rootfs"),
            ip: internal_ip,
            mounted: Vec::new(),
        };
        lay_down(dir, &mut startup, &mut map, attached)?;
        let authorizer = crate::contract::authorizer(&startup.files)?;
        let etcd = EtcdProcess::prepare(&startup, etcd_bins, &map, opts)?;
        let api = &startup.apiserver;
        let c = "kube-apiserver";
        let secure_port: u16 =
            parse_flag(c, "secure-port", api.get("secure-port").unwrap_or("6443"))?;
        let bind_host = map.host(api.get("bind-address").unwrap_or("0.0.0.0"));
        let client_ca = api.get("client-ca-file").map(|p| map.path(p)).transpose()?;
        let server_tls = tls::server_config(
            &map.path(api.require(c, "tls-cert-file")?)?,
            &map.path(api.require(c, "tls-private-key-file")?)?,
            client_ca.as_deref(),
        )?;
        let tokens = match (
            api.get("service-account-key-file"),
            api.get("service-account-issuer"),
        ) {
            (Some(file), Some(issuer)) => {
                Some(tokens::TokenVerifier::load(&map.path(file)?, issuer)?)
            }
            _ => None,
        };
        let apiserver_etcd = ApiserverEtcd::of(api, &map)?;
        let etcd_access = apiserver_etcd.access()?;
        let bind_ip: Ipv4Addr = parse_flag(c, "bind-address", &bind_host)?;
        let secure_addr = SocketAddr::from((bind_ip, opts.port_map.host_port(secure_port)));
        let secure = api::listen(
            secure_addr,
            &format!("{name} kube-apiserver :{secure_port}"),
        )?;
        let plain = healthcheck_listener(name, &startup, &map, opts, secure_port)?;

        let info = SshInfo {
            name: name.to_string(),
            internal_ip,
            etcdctl_dir: etcd.bin.parent().map(Path::to_path_buf).unwrap_or_default(),
            endpoints: apiserver_etcd.endpoints,
            cacert: apiserver_etcd.cacert,
            cert: apiserver_etcd.cert,
            key: apiserver_etcd.key,
        };
        let info_json = serde_json::to_vec_pretty(&info).expect("SshInfo serializes");
        std::fs::write(dir.join(SSH_INFO), info_json)
            .map_err(io_err(format!("write {}", dir.join(SSH_INFO).display())))?;

        let backoff = etcd::Backoff {
            initial: opts.restart_backoff_initial,
            max: opts.restart_backoff_max.max(opts.restart_backoff_initial),
        };
        let supervisor =
            etcd::Supervisor::start(etcd.init, etcd.argv, dir.join("etcd.log"), backoff)
                .map_err(io_err(format!("start etcd supervisor for {name}")))?;
        let health = Arc::new(api::Health::default());
        let api = api::start(
            api::ApiSpec {
                name: name.to_string(),
                secure,
                tls: server_tls,
                version: api::version_of_image(&startup.apiserver_image),
                plain,
                etcd: apiserver_etcd.probe,
                health_interval: opts.health_interval,
                authorizer,
                tokens,
                addon_delay: opts.addon_delay,
                etcd_access,
            },
            health.clone(),
        )?;
        Ok(VmHandle {
            name: name.to_string(),
            internal_ip,
            dir: dir.to_path_buf(),
            etcd: supervisor,
            api,
            health,
            peer_guards: etcd.peer_guards,
        })
    }
}

/// What cloud-init and the kubelet do to the disk before any container starts: `write_files` (re-applied on every
/// boot, so setMetadata + restart takes effect; before `disk_setup`/`mounts`, so on the boot disk), the keys fetched
/// by `runcmd`'s first command, then the contract's judgement of it all, the disks' mounts, and the etcd pod's
/// `DirectoryOrCreate` hostPaths.
fn lay_down(
    dir: &Path,
    startup: &mut config::Startup,
    map: &mut HostMap,
    attached: &Attached,
) -> Result<(), VmError> {
    for f in &startup.files {
        write_guest_file(map, f)?;
    }
    if let Some(fetch) = &startup.key_fetch {
        let keys = keys::fetch(fetch, attached)?;
        for f in &keys {
            write_guest_file(map, f)?;
        }
        startup.files.extend(keys);
    }
    // Judged by the real programs' rules before anything starts: a master that would not come up on GCE
    // does not come up here either.
    crate::contract::check(&startup.files, &map.rootfs, &dir.join("contract"))?;
    map.mounted = mount_disks(startup, map, &attached.disks)?;
    // The kubelet makes the pod's `DirectoryOrCreate` hostPaths before any of its containers, init ones too.
    for dir in &startup.etcd_created_dirs {
        let host = map.mounted_path(dir)?;
        std::fs::create_dir_all(&host).map_err(io_err(format!(
            "create hostPath {dir} ({})",
            host.display()
        )))?;
    }
    Ok(())
}

/// The etcd static pod as the host runs it: its init containers, the binary its image's version picks (so replicas
/// rolled to another etcd minor really run it), its argv on host paths, and its peer ports, bound before etcd starts
/// so that a port another process holds fails the boot rather than leave etcd unreachable.
struct EtcdProcess {
    init: Vec<init::InitStep>,
    bin: PathBuf,
    argv: Vec<String>,
    peer_guards: Vec<Guard>,
}

impl EtcdProcess {
    fn prepare(
        startup: &config::Startup,
        etcd_bins: &EtcdBins,
        map: &HostMap,
        opts: &VmOptions,
    ) -> Result<EtcdProcess, VmError> {
        let init = startup
            .etcd_init
            .iter()
            .map(|c| init::step(c, etcd_bins, map))
            .collect::<Result<Vec<_>, _>>()?;
        let bin = etcd_bins
            .for_image(&startup.etcd_image)
            .map_err(VmError::Config)?
            .to_path_buf();
        if !bin.is_file() {
            return Err(VmError::Config(format!(
                "etcd binary {} (for image {}) not found",
                bin.display(),
                startup.etcd_image
            )));
        }
        let argv = config::etcd_host_argv(&startup.etcd_argv, &bin, map, &startup.etcd_volumes)?;
        let peer_guards = config::peer_ports(&startup.etcd_argv)
            .into_iter()
            .map(|port| {
                crate::net::guard(
                    map.ip,
                    port,
                    opts.port_map,
                    config::peer_backstage(port),
                    opts.peer_firewall.clone(),
                    opts.identify.clone(),
                )
                .map_err(|e| VmError::Net(format!("etcd's peer port {port}: {e}")))
            })
            .collect::<Result<Vec<Guard>, VmError>>()?;
        Ok(EtcdProcess {
            init,
            bin,
            argv,
            peer_guards,
        })
    }
}

/// How the API server reaches etcd (its first `--etcd-servers` entry and client files): the stand-in's health
/// probe, and what `ssh` hands `etcdctl`.
struct ApiserverEtcd {
    probe: api::EtcdProbe,
    endpoints: String,
    cacert: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl ApiserverEtcd {
    /// What the stand-in addon manager needs to reach this etcd as the API server does.
    fn access(&self) -> Result<addon_manager::EtcdAccess, VmError> {
        let read = |p: &PathBuf| {
            std::fs::read_to_string(p).map_err(io_err(format!("read {}", p.display())))
        };
        let tls = match self.probe.tls {
            Some(_) => Some((read(&self.cacert)?, read(&self.cert)?, read(&self.key)?)),
            None => None,
        };
        Ok(addon_manager::EtcdAccess {
            url: self.endpoints.clone(),
            server_name: match &self.probe.server_name {
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                ServerName::DnsName(name) => name.as_ref().to_string(),
                other => format!("{other:?}"),
            },
            tls,
        })
    }

    fn of(api: &config::Flags, map: &HostMap) -> Result<ApiserverEtcd, VmError> {
        let c = "kube-apiserver";
        let etcd_url = api
            .require(c, "etcd-servers")?
            .split(',')
            .next()
            .unwrap_or_default();
        let (scheme, etcd_host, etcd_port) = split_url(etcd_url).ok_or_else(|| {
            VmError::Config(format!(
                "{c}: --etcd-servers {etcd_url:?} is not scheme://host:port"
            ))
        })?;
        let etcd_ip: Ipv4Addr = parse_flag(c, "etcd-servers", &map.host(etcd_host))?;
        let (cacert, cert, key) = (
            map.path(api.require(c, "etcd-cafile")?)?,
            map.path(api.require(c, "etcd-certfile")?)?,
            map.path(api.require(c, "etcd-keyfile")?)?,
        );
        let probe = api::EtcdProbe {
            addr: SocketAddr::from((etcd_ip, etcd_port)),
            server_name: ServerName::try_from(etcd_host.to_string()).map_err(|e| {
                VmError::Config(format!("{c}: --etcd-servers host {etcd_host:?}: {e}"))
            })?,
            tls: match scheme {
                "https" => Some(tls::client_config(&cacert, &cert, &key)?),
                _ => None,
            },
        };
        Ok(ApiserverEtcd {
            probe,
            endpoints: format!("{scheme}://{etcd_ip}:{etcd_port}"),
            cacert,
            cert,
            key,
        })
    }
}

/// The health-check sidecar's plain-HTTP listener, when the pod has one, and whether it reaches its API server
/// (it proxies to https://127.0.0.1, port 443, not configurable: an API server on another port answers it only
/// through a loopback redirect the guest sets up, `loopback_nat`). As the program does at start, a CA or key pair
/// it is given must load, or it exits.
fn healthcheck_listener(
    name: &str,
    startup: &config::Startup,
    map: &HostMap,
    opts: &VmOptions,
    secure_port: u16,
) -> Result<Option<(std::net::TcpListener, bool)>, VmError> {
    let Some(h) = &startup.healthcheck else {
        return Ok(None);
    };
    for flag in config::HEALTHCHECK_FLAGS {
        if let Some(p) = h.get(flag) {
            let host = map.path(p)?;
            std::fs::read(&host).map_err(io_err(format!(
                "healthcheck: --{flag}={p}: the container would exit reading it ({})",
                host.display()
            )))?;
        }
    }
    let port = config::HEALTHCHECK_PORT;
    let addr = SocketAddr::from((map.ip, opts.port_map.host_port(port)));
    let l = api::listen(addr, &format!("{name} healthcheck :{port}"))?;
    let reaches = secure_port == 443 || startup.loopback_redirects.contains(&(443, secure_port));
    Ok(Some((l, reaches)))
}

/// What mkfs leaves in a fresh ext4 file system; the sim's mark of a formatted disk.
const FS_MARK: &str = "lost+found";

/// cloud-init's `fs_setup` then `mounts`, on the attached disks. A disk is formatted when an `fs_setup` entry
/// names its device and it has no file system yet (or `overwrite: true`, which wipes it). A `mounts` entry
/// whose device is attached and formatted is mounted; otherwise the mount fails, and with `nofail` (cloud-init's
/// default) the mount point stays a plain directory on the boot disk; without it a real VM would not boot.
fn mount_disks(
    startup: &config::Startup,
    map: &HostMap,
    disks: &BTreeMap<String, PathBuf>,
) -> Result<Vec<(String, PathBuf)>, VmError> {
    for fs in &startup.fs_setup {
        let Some(dir) = config::gce_device_name(&fs.device).and_then(|d| disks.get(d)) else {
            continue;
        };
        if !matches!(fs.filesystem.as_str(), "ext4" | "ext3" | "xfs" | "") {
            return Err(VmError::Config(format!(
                "user-data fs_setup {}: filesystem {:?} is not supported",
                fs.device, fs.filesystem
            )));
        }
        let formatted = dir.join(FS_MARK).is_dir();
        if formatted && !fs.overwrite {
            continue;
        }
        if formatted {
            let _ = std::fs::remove_dir_all(dir);
        }
        std::fs::create_dir_all(dir.join(FS_MARK)).map_err(io_err(format!(
            "format {} at {}",
            fs.device,
            dir.display()
        )))?;
    }
    let mut mounted = Vec::new();
    for m in &startup.mounts {
        std::fs::create_dir_all(map.path(&m.mountpoint)?)
            .map_err(io_err(format!("create mount point {}", m.mountpoint)))?;
        let disk = config::gce_device_name(&m.device)
            .and_then(|d| disks.get(d))
            .filter(|dir| dir.join(FS_MARK).is_dir());
        match disk {
            Some(dir) => mounted.push((m.mountpoint.clone(), dir.clone())),
            None if m.options.split(',').any(|o| o == "nofail") => {}
            None => {
                return Err(VmError::Config(format!(
                    "user-data mounts: {} on {} cannot be mounted (not attached, or no file system) and its \
                     options {:?} lack nofail: a real VM would stop booting",
                    m.device, m.mountpoint, m.options
                )));
            }
        }
    }
    Ok(mounted)
}

fn parse_flag<T: std::str::FromStr>(component: &str, flag: &str, value: &str) -> Result<T, VmError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e| VmError::Config(format!("{component}: --{flag} value {value:?}: {e}")))
}

fn write_guest_file(map: &HostMap, f: &guest_file::GuestFile) -> Result<(), VmError> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let path = map.path(&f.path)?;
    let ctx = || format!("write_files {} -> {}", f.path, path.display());
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(ctx()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(f.append)
        .truncate(!f.append)
        .open(&path)
        .map_err(io_err(ctx()))?;
    file.write_all(&f.bytes).map_err(io_err(ctx()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(f.mode)).map_err(io_err(ctx()))
}

/// A running VM. Dropping it powers the VM off (like [`VmHandle::kill`]); its disk stays.
pub struct VmHandle {
    name: String,
    internal_ip: Ipv4Addr,
    dir: PathBuf,
    etcd: etcd::Supervisor,
    api: Background,
    health: Arc<api::Health>,
    /// The firewall in front of etcd's peer port(s); dropped (port closed) when the VM powers off.
    peer_guards: Vec<Guard>,
}

impl VmHandle {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn internal_ip(&self) -> Ipv4Addr {
        self.internal_ip
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn status(&self) -> VmStatus {
        let etcd = self.etcd.snapshot();
        VmStatus {
            etcd_running: etcd.pid.is_some(),
            etcd_pid: etcd.pid,
            etcd_restarts: etcd.restarts,
            etcd_last_exit: etcd.last_exit,
            etcd_healthy: etcd.pid.is_some() && self.health.etcd_healthy.load(Ordering::SeqCst),
            health_error: self
                .health
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Fault injection: SIGKILLs the running etcd (not the VM); the kubelet-like supervisor restarts it after the
    /// back-off. Returns false when no etcd was running.
    pub fn crash_etcd(&self) -> bool {
        match self.etcd.snapshot().pid {
            // SAFETY: plain kill(2) of our child; the supervisor clears the pid as soon as it reaps it, so a reused pid
            // could only be hit in that microsecond window.
            Some(pid) => unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) == 0 },
            None => false,
        }
    }

    /// Powers the VM off: SIGKILLs etcd's process group (etcd's WAL makes this safe for its data) and closes the API
    /// ports. Returns after everything is gone. Idempotent.
    pub fn kill(&mut self) {
        self.api.stop();
        self.peer_guards.clear();
        self.etcd.stop();
        self.health.etcd_healthy.store(false, Ordering::SeqCst);
    }
}

impl Drop for VmHandle {
    fn drop(&mut self) {
        self.kill();
    }
}

impl std::fmt::Debug for VmHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmHandle")
            .field("name", &self.name)
            .field("internal_ip", &self.internal_ip)
            .field("dir", &self.dir)
            .finish()
    }
}

/// Environment for a shell "inside" the VM in `dir`, as `ha-sim ssh <vm> -- <cmd>` gives it: etcdctl talks v3 to this
/// VM's etcd over mutual TLS with the API server's etcd client certificate, and `etcdctl` is on PATH.
pub fn ssh_env(dir: &Path) -> Result<Vec<(String, String)>, VmError> {
    let path = dir.join(SSH_INFO);
    let raw = std::fs::read(&path).map_err(io_err(format!(
        "read {} (has this VM ever booted?)",
        path.display()
    )))?;
    let info: SshInfo = serde_json::from_slice(&raw)
        .map_err(|e| VmError::Config(format!("{} is not a VM record: {e}", path.display())))?;
    let mut search = info.etcdctl_dir.to_string_lossy().into_owned();
    if let Ok(inherited) = std::env::var("PATH") {
        search = format!("{search}:{inherited}");
    }
    let s = |p: &Path| p.to_string_lossy().into_owned();
    Ok(vec![
        ("ETCDCTL_API".into(), "3".into()),
        ("ETCDCTL_ENDPOINTS".into(), info.endpoints),
        ("ETCDCTL_CACERT".into(), s(&info.cacert)),
        ("ETCDCTL_CERT".into(), s(&info.cert)),
        ("ETCDCTL_KEY".into(), s(&info.key)),
        ("PATH".into(), search),
        ("HOSTNAME".into(), info.name),
    ])
}
