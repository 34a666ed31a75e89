//! Loopback networking for the simulated VPC: address pools, 1:1 NAT for static IPs, and network load balancers.
//!
//! Every address lives in 127.0.0.0/8, which Linux routes to `lo` in full, so each VM and each external address gets its
//! own IP without any privileges. A connection to a static IP is a real TCP connection that a proxy splices to a VM, so
//! moving the IP from one VM to a load balancer (and back) changes where new connections land, exactly as on GCE.

pub(crate) mod background;
mod cidr;
pub mod firewall;
mod guard;
pub mod http;
mod lb;
mod pool;
mod procfs;
mod proxy;

pub use cidr::Cidr;
pub use firewall::{AdmitAll, Ingress, SharedIngress, Source, admit_all};
pub use guard::{Guard, Identify, from_host, guard};
pub use lb::{Backend, HealthCheckSpec, LbConfig, LoadBalancer, PROBER_SOURCES};
pub use pool::{IpPool, MAX_NETWORK_BLOCK, block_ranges, network_block, set_network_block};
pub use procfs::socket_owner;
pub use proxy::{Forward, forward};

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

#[cfg(test)]
mod tests;

/// Errors from the networking layer; each carries what was being attempted.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("address pool {range} is exhausted")]
    Exhausted { range: String },
    #[error("invalid network setting: {0}")]
    Invalid(String),
}

impl NetError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> NetError {
        let context = context.into();
        move |source| NetError::Io { context, source }
    }
}

/// How guest ports (what GCE resources and VM configs say, e.g. 443) map to host ports on loopback.
///
/// Binding below 1024 needs root or CAP_NET_BIND_SERVICE, and the sim must also run unprivileged, so privileged guest
/// ports are shifted by a fixed offset: with the default 6000, the API port 443 is served on 6443. Ports from 1024 up
/// (etcd 2379/2380, the health-check sidecar 3990) are used as-is. One map is shared by VMs, NATs, load balancers and health
/// checks of a sim, so a forwarding rule on 443 and an API server on 443 meet on the same host port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortMap {
    /// Added to guest ports below 1024. 0 means "bind the real port" (needs root).
    pub privileged_offset: u16,
}

impl Default for PortMap {
    fn default() -> Self {
        PortMap {
            privileged_offset: 6000,
        }
    }
}

impl PortMap {
    /// The host port that stands in for `guest_port`.
    pub fn host_port(&self, guest_port: u16) -> u16 {
        if guest_port < 1024 {
            guest_port.saturating_add(self.privileged_offset)
        } else {
            guest_port
        }
    }
}

/// True for addresses the sim may hand out: loopback, but never the host's own 127.0.0.1 or systemd-resolved's 127.0.0.53,
/// which real services on this machine already listen on.
pub fn is_usable_loopback(ip: Ipv4Addr) -> bool {
    ip.is_loopback() && ip != Ipv4Addr::new(127, 0, 0, 1) && ip != Ipv4Addr::new(127, 0, 0, 53)
}
