//! Who opened a loopback connection. Every process on the host connects to a VM's address from 127.0.0.1 (Linux
//! picks the loopback route's source address, and etcd cannot bind its outgoing peer connections), so the address
//! says nothing about which VM a connection comes from. The kernel still knows which process owns the other end: a
//! sock_diag netlink query for the exact connection gives its socket inode, and `/proc/<pid>/fd` shows which process
//! holds that inode.
//!
//! Why netlink and not `/proc/net/tcp`: that table is read in chunks while connections come and go, and a read that
//! races with changes skips entries; with thousands of sockets (TIME_WAIT included) the connection being identified
//! was missed often enough to drop etcd peer connections from VMs the firewall admits. An exact lookup cannot miss.

use std::net::SocketAddrV4;
use std::path::Path;

/// The process among `pids` that holds the TCP socket whose local end is `local` and remote end `remote` (the
/// connecting side of a connection a proxy accepted: `local` is the proxy's peer address, `remote` where it
/// listens). None when no such socket exists (the connection is gone) or none of `pids` holds it.
pub fn socket_owner(local: SocketAddrV4, remote: SocketAddrV4, pids: &[u32]) -> Option<u32> {
    let inode = socket_inode(local, remote)?;
    let wanted = format!("socket:[{inode}]");
    pids.iter().copied().find(|pid| {
        holds(
            &Path::new("/proc").join(pid.to_string()).join("fd"),
            &wanted,
        )
    })
}

fn holds(fd_dir: &Path, wanted: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(fd_dir) else {
        return false;
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .any(|target| target.as_os_str() == wanted)
}

/// `SOCK_DIAG_BY_FAMILY` from linux/sock_diag.h (not in the libc crate).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `INET_DIAG_NOCOOKIE`: look the socket up by its addresses, not by a cookie.
const NO_COOKIE: u32 = u32::MAX;

/// The inode of the TCP socket `local` → `remote`, asked of the kernel by exact lookup (linux/inet_diag.h:
/// `inet_diag_req_v2` without `NLM_F_DUMP`). None when there is no such socket, or it is closed (inode 0).
fn socket_inode(local: SocketAddrV4, remote: SocketAddrV4) -> Option<u32> {
    // nlmsghdr (16 bytes) + inet_diag_req_v2 (56 bytes).
    let mut req = Vec::with_capacity(72);
    req.extend_from_slice(&72u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    req.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    req.extend_from_slice(&[libc::AF_INET as u8, libc::IPPROTO_TCP as u8, 0, 0]);
    req.extend_from_slice(&u32::MAX.to_ne_bytes()); // every TCP state
    // inet_diag_sockid: ports and addresses in network byte order; `src` is the socket's local end.
    req.extend_from_slice(&local.port().to_be_bytes());
    req.extend_from_slice(&remote.port().to_be_bytes());
    for ip in [local.ip(), remote.ip()] {
        req.extend_from_slice(&ip.octets());
        req.extend_from_slice(&[0u8; 12]);
    }
    req.extend_from_slice(&0u32.to_ne_bytes()); // any interface
    req.extend_from_slice(&NO_COOKIE.to_ne_bytes());
    req.extend_from_slice(&NO_COOKIE.to_ne_bytes());

    let answer = netlink_request(&req)?;
    // nlmsghdr (16 bytes), then inet_diag_msg: family/state/timer/retrans (4), the sockid (48), expires, rqueue,
    // wqueue, uid (4 each), inode at 68.
    let kind = u16::from_ne_bytes(answer.get(4..6)?.try_into().ok()?);
    if kind != SOCK_DIAG_BY_FAMILY {
        return None; // NLMSG_ERROR: no such socket
    }
    let inode = u32::from_ne_bytes(answer.get(16 + 68..16 + 72)?.try_into().ok()?);
    (inode != 0).then_some(inode)
}

/// Sends one request on a fresh sock_diag netlink socket and returns the first answer.
fn netlink_request(req: &[u8]) -> Option<Vec<u8>> {
    // SAFETY: plain syscalls on a socket this function owns and closes; buffers are valid for their lengths.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        );
        if fd < 0 {
            return None;
        }
        let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let sent = libc::sendto(
            fd,
            req.as_ptr().cast(),
            req.len(),
            0,
            std::ptr::from_ref(&kernel).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        );
        let mut buf = vec![0u8; 8192];
        let got = if sent == req.len() as isize {
            libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0)
        } else {
            -1
        };
        libc::close(fd);
        let got = usize::try_from(got).ok()?;
        buf.truncate(got);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn v4(a: std::net::SocketAddr) -> SocketAddrV4 {
        match a {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn finds_the_process_that_holds_a_connection() {
        let listener = std::net::TcpListener::bind("127.58.0.2:0").unwrap();
        let at = v4(listener.local_addr().unwrap());
        let client = std::net::TcpStream::connect(at).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        let peer = v4(peer);
        assert_eq!(peer, v4(client.local_addr().unwrap()));
        let me = std::process::id();
        assert_eq!(socket_owner(peer, at, &[1, me]), Some(me));
        assert_eq!(socket_owner(peer, at, &[1]), None, "not among the pids");
        let elsewhere = SocketAddrV4::new(Ipv4Addr::new(127, 58, 0, 3), at.port());
        assert_eq!(
            socket_owner(peer, elsewhere, &[me]),
            None,
            "another connection"
        );
        // The server's end is a socket too, looked up the other way round.
        assert_eq!(socket_owner(at, peer, &[me]), Some(me));
    }

    #[test]
    fn finds_each_of_many_connections_while_others_come_and_go() {
        let listener = std::net::TcpListener::bind("127.58.0.4:0").unwrap();
        let at = v4(listener.local_addr().unwrap());
        let me = std::process::id();
        let mut kept = Vec::new();
        for i in 0..200 {
            let client = std::net::TcpStream::connect(at).unwrap();
            let (server, peer) = listener.accept().unwrap();
            assert_eq!(
                socket_owner(v4(peer), at, &[me]),
                Some(me),
                "connection {i}"
            );
            // Every other connection closes at once: the table changes under the lookups.
            if i % 2 == 0 {
                kept.push((client, server));
            }
        }
    }
}
