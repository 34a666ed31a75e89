//! Allocation of distinct loopback addresses, serializable so a restarted sim gives every VM its old IP back.

use super::{Cidr, NetError, is_usable_loopback};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// A range of loopback addresses and which of them are taken.
///
/// Allocation is lowest-free-first, so a fresh sim hands out predictable addresses (127.10.0.2, 127.10.0.3, ...),
/// which keeps logs and docs readable. Host parts .0, .1 and .255 are skipped: GCE keeps .0/.1 of a subnet for the network
/// and gateway, and addresses ending in .255 look like broadcasts to anyone reading them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpPool {
    first: Ipv4Addr,
    last: Ipv4Addr,
    allocated: BTreeSet<Ipv4Addr>,
}

impl IpPool {
    /// A pool over `first..=last`; both ends must be usable loopback addresses (see [`super::is_usable_loopback`]).
    pub fn new(first: Ipv4Addr, last: Ipv4Addr) -> Result<IpPool, NetError> {
        if !is_usable_loopback(first)
            || !is_usable_loopback(last)
            || u32::from(first) > u32::from(last)
        {
            return Err(NetError::Invalid(format!(
                "address pool {first}-{last} must be an ascending range inside 127.0.0.0/8"
            )));
        }
        // A range spanning 127.0.0.1 or .53 would hand out addresses the host already uses.
        for reserved in [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 53)] {
            if (u32::from(first)..=u32::from(last)).contains(&u32::from(reserved)) {
                return Err(NetError::Invalid(format!(
                    "address pool {first}-{last} contains the host's {reserved}"
                )));
            }
        }
        Ok(IpPool {
            first,
            last,
            allocated: BTreeSet::new(),
        })
    }

    /// The pool for VM internal IPs of the `default` subnetwork: 127.10.0.0/16, or the network block's.
    pub fn internal() -> IpPool {
        IpPool::in_subnet(IpPool::internal_cidr()).expect("static range is valid")
    }

    /// The /16 the internal pool lies in: the range of every region's `default` subnetwork, which stands for GCE's
    /// 10.128.0.0/9 in the `default` network's `default-allow-internal` rule.
    pub fn internal_cidr() -> Cidr {
        let (internal, _) = block_octets();
        Cidr::new(Ipv4Addr::new(127, internal, 0, 0), 16)
    }

    /// The pool of a subnetwork's primary range: every address but the four GCE keeps in each range (the network
    /// address, the gateway, the second-to-last and the broadcast address).
    pub fn in_subnet(range: Cidr) -> Result<IpPool, NetError> {
        let (net, bcast) = (u32::from(range.first()), u32::from(range.last()));
        if bcast.saturating_sub(net) < 4 {
            return Err(NetError::Invalid(format!(
                "{range} is too small for a subnetwork"
            )));
        }
        IpPool::new(Ipv4Addr::from(net + 2), Ipv4Addr::from(bcast - 2))
    }

    /// The pool for external addresses (static and ephemeral): 127.20.0.0/16, or the network block's.
    pub fn external() -> IpPool {
        let (_, external) = block_octets();
        IpPool::new(
            Ipv4Addr::new(127, external, 0, 2),
            Ipv4Addr::new(127, external, 255, 254),
        )
        .expect("static range is valid")
    }

    /// Takes the lowest free address.
    pub fn allocate(&mut self) -> Result<Ipv4Addr, NetError> {
        let ip = (u32::from(self.first)..=u32::from(self.last))
            .map(Ipv4Addr::from)
            .filter(|ip| !matches!(ip.octets()[3], 0 | 1 | 255))
            .find(|ip| !self.allocated.contains(ip))
            .ok_or_else(|| NetError::Exhausted {
                range: format!("{}-{}", self.first, self.last),
            })?;
        self.allocated.insert(ip);
        Ok(ip)
    }

    /// Takes a specific address, as when an instance asks for `networkIP` or an address resource names its IP.
    pub fn allocate_specific(&mut self, ip: Ipv4Addr) -> Result<(), NetError> {
        if !self.contains(ip) {
            return Err(NetError::Invalid(format!(
                "{ip} is outside the address range {}-{}",
                self.first, self.last
            )));
        }
        if !self.allocated.insert(ip) {
            return Err(NetError::Invalid(format!("{ip} is already in use")));
        }
        Ok(())
    }

    /// Returns an address to the pool; false when it was not allocated.
    pub fn release(&mut self, ip: Ipv4Addr) -> bool {
        self.allocated.remove(&ip)
    }

    /// Whether `ip` lies in this pool's range (allocated or not).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (u32::from(self.first)..=u32::from(self.last)).contains(&u32::from(ip))
    }

    /// Whether `ip` is currently allocated.
    pub fn is_allocated(&self, ip: Ipv4Addr) -> bool {
        self.allocated.contains(&ip)
    }

    /// The allocated addresses, in ascending order.
    pub fn allocated(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.allocated.iter().copied()
    }
}

/// Which /16s of 127.0.0.0/8 this sim uses. Block 0 is 127.10 (internal) and 127.20 (external); block n ≥ 1 is
/// 127.(30+2n) and 127.(31+2n). Several sims on one machine (parallel test scenarios) each take their own block,
/// so their VMs never collide on an address. Set once at start-up, before any address is allocated.
static NETWORK_BLOCK: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The largest block: 127.(31+2·100) = 127.231 stays below the broadcast-like 127.255.
pub const MAX_NETWORK_BLOCK: u8 = 100;

pub fn set_network_block(n: u8) -> Result<(), NetError> {
    if n > MAX_NETWORK_BLOCK {
        return Err(NetError::Invalid(format!(
            "network block {n} is above {MAX_NETWORK_BLOCK}"
        )));
    }
    NETWORK_BLOCK.store(n, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// The network block this sim uses.
pub fn network_block() -> u8 {
    NETWORK_BLOCK.load(std::sync::atomic::Ordering::Relaxed)
}

/// The internal and external /16 of network block `n` (see [`set_network_block`]).
pub fn block_ranges(n: u8) -> (Cidr, Cidr) {
    let (internal, external) = octets_of(n);
    (
        Cidr::new(Ipv4Addr::new(127, internal, 0, 0), 16),
        Cidr::new(Ipv4Addr::new(127, external, 0, 0), 16),
    )
}

fn block_octets() -> (u8, u8) {
    octets_of(network_block())
}

fn octets_of(n: u8) -> (u8, u8) {
    match n {
        0 => (10, 20),
        n => (30 + 2 * n, 31 + 2 * n),
    }
}
