//! IP networks and the address classes the proxy refuses unless a policy names them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IP network: an address and a prefix length (a single address is a /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    /// The network of `addr`/`prefix`, its host bits cleared; None when the prefix is too long.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Net> {
        if prefix > max_prefix(addr) {
            return None;
        }
        let was_v6 = addr.is_ipv6();
        let addr = canonical(addr);
        // A mapped IPv6 network (`::ffff:10.0.0.0/104`) is held as its IPv4 one.
        let prefix = match addr {
            IpAddr::V4(_) if was_v6 => prefix.checked_sub(96)?,
            _ => prefix,
        };
        (prefix <= max_prefix(addr)).then(|| Net {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    pub fn host(addr: IpAddr) -> Net {
        let addr = canonical(addr);
        Net {
            addr,
            prefix: max_prefix(addr),
        }
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// True for 0.0.0.0/0 and ::/0, E2B's "all traffic".
    pub fn is_everything(&self) -> bool {
        self.prefix == 0
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                mask(ip, self.prefix) == self.addr
            }
            _ => false,
        }
    }

    /// True when every address of `self` lies in `other`.
    pub fn within(&self, other: &Net) -> bool {
        self.prefix >= other.prefix && other.contains(self.addr)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix == max_prefix(self.addr) {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

fn max_prefix(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix)
            };
            IpAddr::V4(Ipv4Addr::from(bits & m))
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - prefix)
            };
            IpAddr::V6(Ipv6Addr::from(bits & m))
        }
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it stands for, so every
/// check and match sees one form.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// A refused address class: the block it lies in and what it is called in a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Special {
    pub block: Net,
    pub what: &'static str,
}

const V4_SPECIAL: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "an unspecified (\"this network\")"),
    ([10, 0, 0, 0], 8, "a private"),
    ([100, 64, 0, 0], 10, "a carrier-grade NAT"),
    ([127, 0, 0, 0], 8, "a loopback"),
    ([169, 254, 0, 0], 16, "a link-local (cloud metadata)"),
    ([172, 16, 0, 0], 12, "a private"),
    ([192, 0, 0, 0], 24, "an IETF protocol"),
    ([192, 0, 2, 0], 24, "a documentation"),
    ([192, 168, 0, 0], 16, "a private"),
    ([198, 18, 0, 0], 15, "a benchmarking"),
    ([198, 51, 100, 0], 24, "a documentation"),
    ([203, 0, 113, 0], 24, "a documentation"),
    ([224, 0, 0, 0], 4, "a multicast"),
    ([255, 255, 255, 255], 32, "the broadcast"),
    ([240, 0, 0, 0], 4, "a reserved"),
];

const V6_SPECIAL: &[(u128, u8, &str)] = &[
    (0, 128, "the unspecified"),
    (1, 128, "the loopback"),
    (0x0100 << 112, 64, "a discard"),
    (0x2001_0db8 << 96, 32, "a documentation"),
    (0xfc00 << 112, 7, "a unique-local (private)"),
    (0xfe80 << 112, 10, "a link-local"),
    (0xfec0 << 112, 10, "a site-local"),
    (0xff00 << 112, 8, "a multicast"),
];

/// The refused class `ip` belongs to, or None for an ordinary public address. IPv4 addresses
/// carried inside IPv6 ones (mapped, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, the deprecated
/// compatible `::a.b.c.d`) are judged as the IPv4 address they reach.
pub fn special(ip: IpAddr) -> Option<Special> {
    match canonical(ip) {
        IpAddr::V4(a) => special_v4(a),
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            for &(net, prefix, what) in V6_SPECIAL {
                let block = Net::new(IpAddr::V6(Ipv6Addr::from(net)), prefix).expect("valid");
                if block.contains(IpAddr::V6(a)) {
                    return Some(Special { block, what });
                }
            }
            let embedded = if bits >> 32 == 0x0064_ff9b << 64 || bits >> 32 == 0 {
                Some(Ipv4Addr::from(bits as u32))
            } else if bits >> 112 == 0x2002 {
                Some(Ipv4Addr::from((bits >> 80) as u32))
            } else {
                None
            };
            let v4 = embedded?;
            special_v4(v4).map(|s| Special {
                // The whole carrying block: only a range named inside it allows it.
                block: Net::host(IpAddr::V6(a)),
                what: s.what,
            })
        }
    }
}

fn special_v4(a: Ipv4Addr) -> Option<Special> {
    V4_SPECIAL.iter().find_map(|&(net, prefix, what)| {
        let block = Net::new(IpAddr::V4(Ipv4Addr::from(net)), prefix).expect("valid");
        block
            .contains(IpAddr::V4(a))
            .then_some(Special { block, what })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn refused_classes() {
        for s in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "::127.0.0.1",
        ] {
            assert!(special(ip(s)).is_some(), "{s} should be refused");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "169.255.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "2002:0101:0101::",
        ] {
            assert!(special(ip(s)).is_none(), "{s} should be public");
        }
        assert_eq!(
            special(ip("169.254.169.254")).unwrap().block.to_string(),
            "169.254.0.0/16"
        );
        assert_eq!(special(ip("::ffff:127.0.0.1")).unwrap().what, "a loopback");
    }

    #[test]
    fn networks() {
        let n = Net::new(ip("10.1.2.3"), 8).unwrap();
        assert_eq!(n.to_string(), "10.0.0.0/8");
        assert!(n.contains(ip("10.200.0.1")));
        assert!(n.contains(ip("::ffff:10.0.0.9")));
        assert!(!n.contains(ip("11.0.0.1")));
        assert!(!n.contains(ip("::a00:1")));
        assert!(Net::new(ip("10.0.0.0"), 33).is_none());
        assert!(Net::new(ip("::"), 129).is_none());
        let all = Net::new(ip("0.0.0.0"), 0).unwrap();
        assert!(all.is_everything() && all.contains(ip("8.8.8.8")) && !all.contains(ip("::1")));
        let six = Net::new(ip("2001:db8::1"), 32).unwrap();
        assert_eq!(six.to_string(), "2001:db8::/32");
        assert!(six.contains(ip("2001:db8:ffff::")));
        assert!(Net::new(ip("10.1.0.0"), 16).unwrap().within(&n));
        assert!(!n.within(&Net::new(ip("10.1.0.0"), 16).unwrap()));
        let mapped = Net::new(ip("::ffff:10.0.0.0"), 104).unwrap();
        assert_eq!(mapped, n);
        assert_eq!(Net::host(ip("::1")).to_string(), "::1");
    }
}
