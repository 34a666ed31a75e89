//! TCP splicing: the data path shared by 1:1 NAT ([`forward`]) and load balancers, with the VPC firewall's verdict
//! on each connection.

use super::background::{Background, bind};
use super::firewall::{SharedIngress, Source};
use super::{NetError, PortMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Where one new connection goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Splice it to this address.
    To(SocketAddr),
    /// A firewall drops it: the client hears nothing and gives up on its own timeout, as on GCE.
    Drop,
    /// Nothing to deliver to (no backend, not yet propagated): close it at once.
    Close,
}

/// Decides the route of a new connection from its guest port and the client's socket address.
pub(crate) type Chooser = Arc<dyn Fn(u16, SocketAddr) -> Route + Send + Sync>;

/// How long a proxy waits for a backend to accept before giving up on that client connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a dropped connection is held open without an answer. GCE drops the SYN, so the client's connect times
/// out; a userspace proxy cannot refuse one SYN and accept the next (the kernel completes every handshake before
/// the proxy sees the connection), so it swallows what the client sends instead, longer than any client waits.
const DROP_HOLD: Duration = Duration::from_secs(120);

/// One bound listener: the guest ports it stands for and the host port it is bound on. Usually one guest port;
/// several when the port map sends them to one host port (with the default offset, guest 443 and guest 6443 are
/// both host 6443), which one listener serves for all of them.
pub(crate) struct Bound {
    listener: std::net::TcpListener,
    guests: Vec<u16>,
}

/// Binds `listen_ip` once on the host port of every guest port; failing early (e.g. address in use) beats a silent
/// NAT.
pub(crate) fn bind_all(
    listen_ip: Ipv4Addr,
    ports: &[u16],
    map: PortMap,
) -> Result<Vec<Bound>, NetError> {
    if ports.is_empty() {
        return Err(NetError::Invalid(format!(
            "no ports to listen on at {listen_ip}"
        )));
    }
    let mut by_host: std::collections::BTreeMap<u16, Vec<u16>> = Default::default();
    for &guest in ports {
        let guests = by_host.entry(map.host_port(guest)).or_default();
        if !guests.contains(&guest) {
            guests.push(guest);
        }
    }
    by_host
        .into_iter()
        .map(|(host, guests)| {
            let addr = SocketAddr::V4(SocketAddrV4::new(listen_ip, host));
            let listener = bind(addr).map_err(NetError::io(format!(
                "listen on {addr} (guest ports {guests:?})"
            )))?;
            Ok(Bound { listener, guests })
        })
        .collect()
}

/// The route of a connection to a listener that stands for `guests`: the first guest port the chooser does not
/// drop (they share one host port, so the client cannot have meant one more than another), else dropped.
fn route_for(choose: &Chooser, guests: &[u16], peer: SocketAddr) -> Route {
    guests
        .iter()
        .map(|&guest| choose(guest, peer))
        .find(|r| *r != Route::Drop)
        .unwrap_or(Route::Drop)
}

/// Accepts on every listener and routes each connection as `choose` says. Runs until cancelled.
pub(crate) async fn serve(listeners: Vec<Bound>, choose: Chooser) {
    let mut loops = tokio::task::JoinSet::new();
    for Bound { listener, guests } in listeners {
        let choose = choose.clone();
        loops.spawn(async move {
            let listener = match TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!("proxy listener for guest ports {guests:?} unusable: {e}");
                    return;
                }
            };
            loop {
                let Ok((client, peer)) = listener.accept().await else {
                    // Accept errors (e.g. EMFILE) are transient; back off briefly instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let choose = choose.clone();
                let guests = guests.clone();
                // Decided off the accept loop: a chooser may read /proc to learn who connected.
                tokio::spawn(async move {
                    match route_for(&choose, &guests, peer) {
                        Route::To(target) => splice(client, target).await,
                        Route::Drop => hold_silently(client).await,
                        // Dropping `client` closes it: that is what "no route" looks like to the caller.
                        Route::Close => {}
                    }
                });
            }
        });
    }
    while loops.join_next().await.is_some() {}
}

/// A connection the firewall drops: read and discard until the client gives up (or [`DROP_HOLD`]), never answer.
async fn hold_silently(mut client: TcpStream) {
    let mut sink = [0u8; 4096];
    let swallow = async {
        while let Ok(n) = client.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DROP_HOLD, swallow).await;
}

async fn splice(mut client: TcpStream, target: SocketAddr) {
    let upstream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)).await;
    let Ok(Ok(mut upstream)) = upstream else {
        tracing::debug!("proxy: backend {target} did not accept");
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    // Errors here are ordinary resets by either side; the connection is over either way.
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// A 1:1 NAT from an external IP to a VM's internal IP (an access config with a static or ephemeral address).
/// Dropping it (or [`Forward::stop`]) closes the listeners and every open connection through it.
pub struct Forward {
    listen_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
    ports: Vec<u16>,
    background: Background,
}

/// Starts NAT from `listen_ip` to `target_ip` for the given guest ports (each mapped through `map`). Every connection
/// comes from the sim's host ([`Source::Client`]); the ones `firewall` does not admit to the VM are dropped.
///
/// Real 1:1 NAT carries every port; a userspace proxy needs a listener per port, so the caller names the ports a master
/// serves (e.g. 443 and the 3990 health port).
pub fn forward(
    listen_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
    ports: &[u16],
    map: PortMap,
    firewall: SharedIngress,
) -> Result<Forward, NetError> {
    let listeners = bind_all(listen_ip, ports, map)?;
    let choose: Chooser = Arc::new(move |guest, _| {
        if firewall.admits(Source::Client, target_ip, guest) {
            Route::To(SocketAddr::V4(SocketAddrV4::new(
                target_ip,
                map.host_port(guest),
            )))
        } else {
            Route::Drop
        }
    });
    let background = Background::spawn(&format!("nat-{listen_ip}"), move || {
        serve(listeners, choose)
    })
    .map_err(NetError::io(format!(
        "start NAT {listen_ip} -> {target_ip}"
    )))?;
    Ok(Forward {
        listen_ip,
        target_ip,
        ports: ports.to_vec(),
        background,
    })
}

impl Forward {
    pub fn listen_ip(&self) -> Ipv4Addr {
        self.listen_ip
    }
    pub fn target_ip(&self) -> Ipv4Addr {
        self.target_ip
    }
    /// The guest ports being forwarded.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }
    /// Removes the NAT; on return the listening ports are free again.
    pub fn stop(mut self) {
        self.background.stop();
    }
}

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward")
            .field("listen_ip", &self.listen_ip)
            .field("target_ip", &self.target_ip)
            .field("ports", &self.ports)
            .finish()
    }
}
