//! TCP splicing: the data path shared by 1:1 NAT ([`forward`]) and load balancers.

use super::background::{Background, bind};
use super::{NetError, PortMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Picks the backend for a new connection; None drops the connection (no route, nothing healthy, not yet propagated).
pub(crate) type Chooser = Arc<dyn Fn() -> Option<Ipv4Addr> + Send + Sync>;

/// How long a proxy waits for a backend to accept before giving up on that client connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds `listen_ip` on the host port of every guest port; failing early (e.g. address in use) beats a silent NAT.
pub(crate) fn bind_all(
    listen_ip: Ipv4Addr,
    ports: &[u16],
    map: PortMap,
) -> Result<Vec<(std::net::TcpListener, u16)>, NetError> {
    if ports.is_empty() {
        return Err(NetError::Invalid(format!(
            "no ports to listen on at {listen_ip}"
        )));
    }
    ports
        .iter()
        .map(|&guest| {
            let host = map.host_port(guest);
            let addr = SocketAddr::V4(SocketAddrV4::new(listen_ip, host));
            let listener = bind(addr).map_err(NetError::io(format!(
                "listen on {addr} (guest port {guest})"
            )))?;
            Ok((listener, host))
        })
        .collect()
}

/// Accepts on every listener and splices each connection to `choose()` on the same host port. Runs until cancelled.
pub(crate) async fn serve(listeners: Vec<(std::net::TcpListener, u16)>, choose: Chooser) {
    let mut loops = tokio::task::JoinSet::new();
    for (std_listener, port) in listeners {
        let choose = choose.clone();
        loops.spawn(async move {
            let listener = match TcpListener::from_std(std_listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!("proxy listener on port {port} unusable: {e}");
                    return;
                }
            };
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    // Accept errors (e.g. EMFILE) are transient; back off briefly instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                // Dropping `client` here closes it: that is what "no route" looks like to the caller.
                let Some(target) = choose() else { continue };
                tokio::spawn(splice(
                    client,
                    SocketAddr::V4(SocketAddrV4::new(target, port)),
                ));
            }
        });
    }
    while loops.join_next().await.is_some() {}
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

/// Starts NAT from `listen_ip` to `target_ip` for the given guest ports (each mapped through `map`).
///
/// Real 1:1 NAT carries every port; a userspace proxy needs a listener per port, so the caller names the ports a master
/// serves (e.g. 443 and the 3990 health port).
pub fn forward(
    listen_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
    ports: &[u16],
    map: PortMap,
) -> Result<Forward, NetError> {
    let listeners = bind_all(listen_ip, ports, map)?;
    let choose: Chooser = Arc::new(move || Some(target_ip));
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
