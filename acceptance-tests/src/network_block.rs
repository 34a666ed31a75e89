//! Which loopback network block a scenario's ha-sim may use, held for as long as the sim runs.
//!
//! Blocks 31..=100 (127.92.0.0 to 127.231.255.255) are the scenarios': block 0 is `make demo`'s, and the unit tests
//! that bind loopback addresses of their own (ha-sim's net tests 127.50-57, the etcd backend's 127.55, the master
//! boot tests' 127.91) must never meet a scenario's VMs. The lock files live in the machine's temporary folder, not
//! the checkout: loopback addresses are machine-wide, so two checkouts running their suites at once (a worktree and
//! a CI clone) must not hand out the same block.
//!
//! Why `flock` and not "create the file, write my pid": a pid file outlives a killed test (nextest's timeout, a
//! cancelled run), so a taker had to read the pid, decide it was stale and delete the file, and two threads doing
//! that at once could both end up holding one block. A test's two clients start their sims at the same instant, so
//! that race could give a Terraform sim the block its OpenTofu twin was using, whose VMs' etcd then cannot bind (one
//! suspected cause of a CI run that hung; not established). The kernel drops an flock when its holder dies, however
//! it dies, so nothing is ever stale and nothing is deleted.
//!
//! Why also a probe: a lock says no live test holds the block, not that no process still listens on its addresses
//! (an ha-sim or etcd left running by a run killed from outside, or a sim started by hand with `--network-block`).
//! A block whose first VM addresses already have an etcd or API port taken is skipped.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The scenarios' blocks (see the module comment).
const BLOCKS: std::ops::RangeInclusive<u8> = 31..=100;

/// Host ports a VM of the sim binds on its own address: etcd's client and peer ports, the health sidecar, and 6443,
/// where a sim run without root serves the API's 443. As root (CI) the sim binds 443 itself, which the probe does
/// not try (it would fail for everyone else); etcd's ports are what a collision breaks first.
const VM_PORTS: [u16; 4] = [2379, 2380, 3990, 6443];

/// How many of a block's first VM addresses the probe tries: a sim hands them out lowest first from .2, and no
/// scenario runs more than a handful of VMs at once.
const PROBED_VMS: u8 = 8;

/// A network block held until dropped.
pub struct NetworkBlock {
    pub n: u8,
    /// Holds the flock; closing the file releases it.
    _lock: File,
}

impl NetworkBlock {
    /// The lowest block no live process holds and whose first VM addresses are free.
    pub fn take() -> NetworkBlock {
        let dir = lock_dir();
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("creating the sim block folder {}: {e}", dir.display()));
        for n in BLOCKS {
            let Some(lock) = lock(&dir, n) else { continue };
            if addresses_are_free(first_vm_address(n)) {
                return NetworkBlock { n, _lock: lock };
            }
        }
        panic!(
            "no free ha-sim network block: every lock under {} is held, or its addresses are in use \
             (look for stray ha-sim or etcd processes)",
            dir.display()
        );
    }
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("ha-sim-network-blocks")
}

/// Block `n`'s lock file under `dir`, locked by this call; None when another open file holds it.
fn lock(dir: &Path, n: u8) -> Option<File> {
    let path = dir.join(format!("{n}.lock"));
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    // SAFETY: flock on a file descriptor this function owns; no memory is shared with the call.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    locked.then_some(file)
}

/// The address a sim on block `n` gives its first VM (`ha_sim::net::IpPool`: lowest free from .2).
fn first_vm_address(n: u8) -> Ipv4Addr {
    let (internal, _) = ha_sim::net::block_ranges(n);
    Ipv4Addr::from(u32::from(internal.first()) + 2)
}

/// True when no process listens on a VM port of `first` or the addresses after it.
fn addresses_are_free(first: Ipv4Addr) -> bool {
    (0..u32::from(PROBED_VMS)).all(|i| {
        let ip = Ipv4Addr::from(u32::from(first) + i);
        VM_PORTS
            .iter()
            .all(|&port| TcpListener::bind(SocketAddrV4::new(ip, port)).is_ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Locks are exclusive between holders, even two in one process, and a dropped holder's block is free again.
    /// (A private folder, so blocks held by scenarios running alongside do not matter.)
    #[test]
    fn a_block_is_held_by_one_holder_until_it_drops_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path(), 40).expect("a fresh block is free");
        assert!(lock(dir.path(), 40).is_none(), "block 40 was locked twice");
        assert!(lock(dir.path(), 41).is_some(), "another block is free");
        drop(first);
        assert!(
            lock(dir.path(), 40).is_some(),
            "block 40 stayed held after its holder dropped it"
        );
    }

    /// The lock is the kernel's: a holder that is killed, with no chance to clean up, frees its block.
    #[test]
    fn a_killed_holder_frees_its_block() {
        let dir = tempfile::tempdir().unwrap();
        // A shell locks the file with util-linux's flock(1) on an inherited descriptor, then becomes `sleep`:
        // one process holds the lock, and we kill it.
        let mut holder = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 9>\"$0\" && flock 9 && exec sleep 60")
            .arg(dir.path().join("40.lock"))
            .spawn()
            .expect("running sh");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while let Some(ours) = lock(dir.path(), 40) {
            drop(ours);
            assert!(
                std::time::Instant::now() < deadline,
                "flock(1) never took block 40"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert!(
            lock(dir.path(), 40).is_some(),
            "block 40 stayed held after its holder was killed"
        );
    }

    /// A block whose VM address someone listens on is not free. 127.249/16 is no sim's block.
    #[test]
    fn an_address_in_use_makes_a_block_unfree() {
        let first = Ipv4Addr::new(127, 249, 0, 2);
        assert!(
            addresses_are_free(first),
            "nothing listens on 127.249.0.2-9 yet"
        );
        let squatter =
            TcpListener::bind(SocketAddrV4::new(Ipv4Addr::new(127, 249, 0, 5), 2380)).unwrap();
        assert!(
            !addresses_are_free(first),
            "a listener on 127.249.0.5:2380 went unseen"
        );
        drop(squatter);
        assert!(addresses_are_free(first));
    }

    /// The probe looks where the sim puts its first VM.
    #[test]
    fn the_first_vm_address_is_the_blocks_dot_two() {
        assert_eq!(first_vm_address(31), Ipv4Addr::new(127, 92, 0, 2));
        assert_eq!(first_vm_address(100), Ipv4Addr::new(127, 230, 0, 2));
    }
}
