//! IPv4 CIDR ranges: a firewall rule's `sourceRanges` and a subnetwork's `ipCidrRange`.

use std::net::Ipv4Addr;

/// An IPv4 CIDR range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    net: u32,
    len: u8,
}

impl Cidr {
    pub fn new(addr: Ipv4Addr, len: u8) -> Cidr {
        let len = len.min(32);
        Cidr {
            net: u32::from(addr) & mask(len),
            len,
        }
    }

    /// `a.b.c.d/n` or a bare address (/32), as GCE accepts in `sourceRanges`. None for IPv6 or garbage: such a range
    /// admits no IPv4 source.
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, l.parse::<u8>().ok().filter(|l| *l <= 32)?),
            None => (s, 32),
        };
        Some(Cidr::new(addr.trim().parse().ok()?, len))
    }

    /// `a.b.c.d/n` exactly as a subnetwork's `ipCidrRange` must be written: a prefix length, and no host bits set
    /// (`10.0.0.5/24` names no network). None otherwise.
    pub fn parse_network(s: &str) -> Option<Cidr> {
        let (addr, len) = s.split_once('/')?;
        let addr: Ipv4Addr = addr.parse().ok()?;
        let len = len.parse::<u8>().ok().filter(|l| *l <= 32)?;
        let c = Cidr::new(addr, len);
        (c.first() == addr).then_some(c)
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.len) == self.net
    }

    /// Whether the two ranges share an address (one contains the other's network address, for CIDRs).
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.first()) || other.contains(self.first())
    }

    /// The network address (`10.0.0.0` of `10.0.0.0/24`).
    pub fn first(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.net)
    }

    /// The broadcast address (`10.0.0.255` of `10.0.0.0/24`).
    pub fn last(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.net | !mask(self.len))
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.net), self.len)
    }
}

fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        n => u32::MAX << (32 - u32::from(n.min(32))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn cidrs() {
        let c = Cidr::parse("10.128.0.0/9").unwrap();
        assert!(c.contains(ip("10.255.1.1")) && !c.contains(ip("10.127.0.1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        assert_eq!(
            Cidr::parse("203.0.113.7").unwrap().to_string(),
            "203.0.113.7/32"
        );
        // A range given with host bits is the range it names (GCE refuses those at insert anyway).
        assert_eq!(Cidr::parse("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        for bad in ["2001:db8::/32", "10.0.0.0/33", "nope", "10.0.0.0/x"] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn network_ranges_are_strict_and_know_their_ends() {
        let c = Cidr::parse_network("127.11.0.0/24").unwrap();
        assert_eq!(
            (c.first(), c.last()),
            (ip("127.11.0.0"), ip("127.11.0.255"))
        );
        assert_eq!(c.prefix_len(), 24);
        for bad in ["127.11.0.5/24", "127.11.0.0", "127.11.0.0/33", "x/24"] {
            assert_eq!(Cidr::parse_network(bad), None, "{bad}");
        }
        let wide = Cidr::parse_network("127.10.0.0/16").unwrap();
        assert!(wide.overlaps(&Cidr::parse_network("127.10.3.0/24").unwrap()));
        assert!(
            Cidr::parse_network("127.10.3.0/24")
                .unwrap()
                .overlaps(&wide)
        );
        assert!(!wide.overlaps(&c));
    }
}
