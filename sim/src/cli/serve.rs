//! `ha-sim serve`: runs a sim in the foreground; a clean stop on SIGTERM, SIGINT or `ha-sim stop` kills every
//! VM process before exiting.

use super::client::DISCOVERY_FILE;
use crate::config::{LatencyProfile, SimConfig};
use crate::etcd_bins::EtcdBins;
use crate::fabric::{Fabric, NoFabric, live::LiveFabric};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where state.json and VM disks live; reused across runs so separate terraform runs see one cloud.
    #[arg(long, env = "HA_SIM_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port (see --port-file).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// `test` (operations take ~20 ms) or `demo` (seconds, like GCE).
    #[arg(long, default_value = "demo")]
    pub latency_profile: String,
    /// Write the bound port here once listening.
    #[arg(long)]
    pub port_file: Option<PathBuf>,
    /// Root of emitted links; default http://LISTEN-ADDRESS/.
    #[arg(long)]
    pub base_url: Option<String>,
    /// Accept only `Authorization: Bearer T` (default: any bearer token).
    #[arg(long)]
    pub require_token: Option<String>,
    /// The etcd binary VMs run (default: `etcd` on PATH). Repeatable: `MINOR=PATH` (e.g. `3.5=/opt/etcd35/etcd`)
    /// is the binary for VMs whose etcd image has that minor version; a plain `PATH` serves every other minor.
    /// With only `MINOR=PATH` forms, a VM whose image names another minor fails to boot, as its etcd would
    /// crash-loop on GCE.
    #[arg(long)]
    pub etcd_bin: Vec<String>,
    /// API only: no VM processes, NATs or load balancers.
    #[arg(long)]
    pub no_vms: bool,
    /// Override how long operations/wait blocks (seconds).
    #[arg(long)]
    pub wait_deadline_secs: Option<f64>,
    /// Override how long after a master boots its addon manager makes the addons' bindings (seconds).
    #[arg(long)]
    pub addon_delay_secs: Option<f64>,
    /// Host port = guest port + this, for guest ports below 1024 (the API's 443). Default: 0 as root (real
    /// ports, as on GCE), 6000 otherwise (443 is served on 6443; give clusters `api_port = 6443` then).
    #[arg(long)]
    pub privileged_port_offset: Option<u16>,
    /// Which loopback /16s to use (0: 127.10 internal and 127.20 external; n: 127.(30+2n) and 127.(31+2n)), so
    /// several sims can run side by side, e.g. parallel test scenarios.
    #[arg(long, default_value_t = 0, env = "HA_SIM_NETWORK_BLOCK")]
    pub network_block: u8,
    /// Stop (with every VM process) once the process that started the sim exits. The test harness sets it: a
    /// test killed from outside runs no cleanup, and a sim it left behind would keep its VMs' addresses bound.
    #[arg(long)]
    pub stop_with_parent: bool,
}

/// The first `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.is_file())
}

fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("renaming to {}: {e}", path.display()))
}

pub fn config(args: &ServeArgs) -> Result<SimConfig, String> {
    let mut latency = LatencyProfile::by_name(&args.latency_profile).ok_or_else(|| {
        format!(
            "unknown latency profile {:?} (test or demo)",
            args.latency_profile
        )
    })?;
    if let Some(s) = args.wait_deadline_secs {
        latency.wait_deadline =
            Duration::try_from_secs_f64(s).map_err(|e| format!("--wait-deadline-secs: {e}"))?;
    }
    if let Some(s) = args.addon_delay_secs {
        latency.addon_delay =
            Duration::try_from_secs_f64(s).map_err(|e| format!("--addon-delay-secs: {e}"))?;
    }
    let mut etcd_bins = EtcdBins::default();
    for arg in &args.etcd_bin {
        etcd_bins.add(arg)?;
    }
    if args.etcd_bin.is_empty() {
        etcd_bins.default = Some(on_path("etcd").unwrap_or_else(|| PathBuf::from("etcd")));
    }
    let mut cfg = SimConfig::for_tests(args.state_dir.clone());
    cfg.listen = args.listen;
    cfg.base_url = args.base_url.clone();
    cfg.require_token = args.require_token.clone();
    cfg.latency = latency;
    cfg.etcd_bins = etcd_bins;
    cfg.fabric = !args.no_vms;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    cfg.privileged_port_offset = args
        .privileged_port_offset
        .unwrap_or(if root { 0 } else { 6000 });
    crate::net::set_network_block(args.network_block)
        .map_err(|e| format!("--network-block: {e}"))?;
    Ok(cfg)
}

/// Resolves once this process's parent has exited (the kernel then re-parents it, so its parent id changes).
async fn parent_exited() {
    // SAFETY: getppid has no preconditions and cannot fail.
    let parent = unsafe { libc::getppid() };
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        // SAFETY: as above.
        if unsafe { libc::getppid() } != parent {
            return;
        }
    }
}

async fn signalled() -> Result<&'static str, String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("installing SIGTERM handler: {e}"))?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(|e| format!("installing SIGINT handler: {e}"))?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

pub async fn run(args: ServeArgs) -> Result<(), String> {
    let cfg = config(&args)?;
    for bin in cfg.etcd_bins.all().filter(|b| cfg.fabric && !b.is_file()) {
        tracing::warn!(
            "etcd binary {} not found: VMs that need it will fail to boot (see `ha-sim status`)",
            bin.display()
        );
    }
    let fabric: Arc<dyn Fabric> = if cfg.fabric {
        Arc::new(LiveFabric::start(&cfg)?)
    } else {
        Arc::new(NoFabric)
    };
    let state_dir = cfg.state_dir.clone();
    let running = crate::server::start(cfg, fabric).await?;
    let endpoint = format!("http://{}/", running.addr);
    let discovery = json!({"pid": std::process::id(), "url": running.url, "endpoint": endpoint, "port": running.addr.port()});
    write_atomically(&state_dir.join(DISCOVERY_FILE), &discovery.to_string())?;
    if let Some(pf) = &args.port_file {
        write_atomically(pf, &running.addr.port().to_string())?;
    }
    eprintln!(
        "ha-sim listening on {endpoint} (links under {}), state in {}",
        running.url,
        state_dir.display()
    );
    let orphaned = async {
        if args.stop_with_parent {
            parent_exited().await
        } else {
            std::future::pending().await
        }
    };
    let why = tokio::select! {
        s = signalled() => s?,
        _ = running.stopped() => "shutdown request",
        _ = orphaned => "its parent exited",
    };
    tracing::info!("stopping on {why}");
    running.stop().await;
    let _ = std::fs::remove_file(state_dir.join(DISCOVERY_FILE));
    eprintln!("ha-sim stopped ({why})");
    Ok(())
}
