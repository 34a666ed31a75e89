//! Who opened a loopback connection. Every process on the host connects to a VM's address from 127.0.0.1 (Linux
//! picks the loopback route's source address, and etcd cannot bind its outgoing peer connections), so the address
//! says nothing about which VM a connection comes from. The kernel still knows which process owns the other end:
//! `/proc/net/tcp` maps the connection to a socket inode, and `/proc/<pid>/fd` shows which process holds it.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

/// The process among `pids` that holds the TCP socket whose local end is `local` and remote end `remote` (the
/// connecting side of a connection a proxy accepted: `local` is the proxy's peer address, `remote` where it
/// listens). None when no such socket exists (the connection is gone) or none of `pids` holds it.
pub fn socket_owner(local: SocketAddrV4, remote: SocketAddrV4, pids: &[u32]) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = find_inode(&table, local, remote)?;
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

/// The inode of the socket `local` → `remote` in a `/proc/net/tcp` table (0 = a socket already closed).
fn find_inode(table: &str, local: SocketAddrV4, remote: SocketAddrV4) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (l, r, inode) = (cols.get(1)?, cols.get(2)?, cols.get(9)?);
        if parse_addr(l)? != local || parse_addr(r)? != remote {
            return None;
        }
        inode.parse().ok().filter(|i| *i != 0)
    })
}

/// `0100007F:1F90` → 127.0.0.1:8080. The kernel prints the address as the 32-bit value in host byte order, the port
/// as a number.
fn parse_addr(s: &str) -> Option<SocketAddrV4> {
    let (ip, port) = s.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddrV4::new(Ipv4Addr::from(ip.to_ne_bytes()), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_process_that_holds_a_connection() {
        let listener = std::net::TcpListener::bind("127.58.0.2:0").unwrap();
        let at = match listener.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        let client = std::net::TcpStream::connect(at).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        let peer = match peer {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        let me = std::process::id();
        assert_eq!(socket_owner(peer, at, &[1, me]), Some(me));
        assert_eq!(socket_owner(peer, at, &[1]), None, "not among the pids");
        drop(client);
        let elsewhere = SocketAddrV4::new(Ipv4Addr::new(127, 58, 0, 3), at.port());
        assert_eq!(
            socket_owner(peer, elsewhere, &[me]),
            None,
            "another connection"
        );
    }

    #[test]
    fn parses_the_kernels_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:9C40 020A7F7F:094C 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 30 10 -1\n";
        let local = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 40000);
        let remote = SocketAddrV4::new(Ipv4Addr::new(127, 127, 10, 2), 2380);
        if cfg!(target_endian = "little") {
            assert_eq!(find_inode(table, local, remote), Some(4242));
        }
        assert_eq!(find_inode(table, remote, local), None);
        assert_eq!(find_inode("header only\n", local, remote), None);
    }
}
