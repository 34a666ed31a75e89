//! A VM's own port behind the VPC firewall. On GCE every packet to a VM passes the firewall, including traffic
//! from other VMs on their internal addresses; on loopback a VM's server would accept anyone. So for the ports where
//! VMs talk to each other (etcd's peer port), the server listens on a backstage port and a guard on the guest port
//! splices in only the connections the firewall admits, judging each by who opened it.

use super::background::Background;
use super::firewall::{SharedIngress, Source};
use super::proxy::{Chooser, Route, bind_all, serve};
use super::{NetError, PortMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

/// Says who opened a connection, from its client end and the address it reached.
pub type Identify = Arc<dyn Fn(SocketAddrV4, SocketAddrV4) -> Source + Send + Sync>;

/// Every connection is from the sim's host: right when nothing but the host connects, and when the firewall admits
/// everyone anyway.
pub fn from_host() -> Identify {
    Arc::new(|_, _| Source::Client)
}

/// A running guard. Dropping it closes the guest port and every connection through it.
pub struct Guard {
    _background: Background,
}

/// Guards `ip`'s `guest` port (through `map`): a connection `firewall` admits from whoever `identify` says opened
/// it is spliced to `ip:backstage`; any other is dropped unanswered.
pub fn guard(
    ip: Ipv4Addr,
    guest: u16,
    map: PortMap,
    backstage: u16,
    firewall: SharedIngress,
    identify: Identify,
) -> Result<Guard, NetError> {
    let listeners = bind_all(ip, &[guest], map)?;
    let front = SocketAddrV4::new(ip, map.host_port(guest));
    let choose: Chooser = Arc::new(move |guest, peer| {
        let from = match peer {
            SocketAddr::V4(p) => identify(p, front),
            SocketAddr::V6(_) => Source::Client,
        };
        if firewall.admits(from, ip, guest) {
            Route::To(SocketAddr::V4(SocketAddrV4::new(ip, backstage)))
        } else {
            Route::Drop
        }
    });
    let background = Background::spawn(&format!("guard-{ip}:{guest}"), move || {
        serve(listeners, choose)
    })
    .map_err(NetError::io(format!(
        "start the firewall guard of {ip}:{guest}"
    )))?;
    Ok(Guard {
        _background: background,
    })
}
