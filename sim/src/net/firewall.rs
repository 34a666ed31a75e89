//! The question the data path asks before it delivers a connection to a VM: does the VPC firewall admit this source
//! to this VM on this port? NATs, load balancers, health checks and the VMs' peer ports ask it; the answer (GCE's
//! rules over the stored firewalls) is `fabric::firewall::Policy`. The net layer knows only the question, so it can be
//! tested with any answer.

use std::net::Ipv4Addr;
use std::sync::Arc;

/// Where a connection comes from, as the firewall sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The machine the sim runs on: Terraform, the tests, a user's curl. On loopback all of them connect from
    /// 127.0.0.1, so their address as the VMs see it is a setting of the sim (its client address), not the socket's.
    Client,
    /// A known address: a health-check prober, or a VM's internal IP.
    Ip(Ipv4Addr),
}

/// Answers whether a connection may reach a VM. Implementations must be quick: it is asked per connection.
pub trait Ingress: Send + Sync {
    /// Whether `from` may open a TCP connection to the VM whose internal IP is `to`, on `guest_port`.
    fn admits(&self, from: Source, to: Ipv4Addr, guest_port: u16) -> bool;
}

/// Shared by every proxy of a sim, so a changed rule applies to the next connection without restarting anything.
pub type SharedIngress = Arc<dyn Ingress>;

/// No firewall at all: what the net layer's own tests use, where the question is not under test.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdmitAll;

impl Ingress for AdmitAll {
    fn admits(&self, _: Source, _: Ipv4Addr, _: u16) -> bool {
        true
    }
}

/// [`AdmitAll`], shared.
pub fn admit_all() -> SharedIngress {
    Arc::new(AdmitAll)
}
