//! The address guard of outbound requests whose target someone else
//! names (a client's metadata document) or that must not reach inside the
//! network unless the operator says so (webhook endpoints): a resolver
//! that hands out public addresses only, and the test behind it.

use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether an address is on the public internet (no loopback, private,
/// link-local, shared, documentation, multicast or reserved range; for
/// IPv6, global unicast only).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || a == 0
                || a >= 240
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (18..20).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 192 && b == 88 && c == 99))
        }
        IpAddr::V6(v6) => {
            // The local-use NAT64 prefix (RFC 8215) is a network's own
            // translator, whichever prefix length places the IPv4 bits.
            if v6.segments()[..3] == [0x64, 0xff9b, 1] {
                return false;
            }
            if let Some(v4) = embedded_ipv4(v6) {
                return is_public(IpAddr::V4(v4));
            }
            // The rest must be global unicast (2000::/3): that leaves out
            // loopback, unspecified, IPv4-compatible addresses of 0.0.0.0/8,
            // unique-local, link- and site-local, multicast and the discard
            // prefix. Within it, the IETF's protocol assignments (2001::/23,
            // Teredo among them) and the documentation prefixes are not
            // hosts to call.
            let [first, second, ..] = v6.segments();
            let global_unicast = (first & 0xe000) == 0x2000;
            let protocol_assignments = first == 0x2001 && second < 0x0200;
            let documentation =
                (first == 0x2001 && second == 0x0db8) || (first == 0x3fff && second < 0x1000);
            global_unicast && !protocol_assignments && !documentation
        }
    }
}

/// The IPv4 address an IPv6 one carries to an IPv4 host, where the
/// network translates or tunnels it there: mapped (`::ffff:a.b.c.d`),
/// translated (`::ffff:0:a.b.c.d`, SIIT), compatible (`::a.b.c.d`,
/// deprecated), NAT64 (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`).
/// Such an address is as public as the IPv4 one it reaches.
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    use std::net::Ipv4Addr;
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let low = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        // `::` and `::1` are not IPv4 hosts.
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(low(s[6], s[7])),
        [0, 0, 0, 0, 0xffff, 0, ..] => Some(low(s[6], s[7])),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(low(s[6], s[7])),
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        _ => None,
    }
}

/// `builder` made to reach public addresses only. Its names are resolved
/// here, by [`PublicOnly`], and never by a proxy: through an
/// `HTTPS_PROXY` the proxy would resolve the target itself, past the
/// guard, so these requests go direct whatever the environment says.
pub fn guarded(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder
        .dns_resolver(std::sync::Arc::new(PublicOnly))
        .no_proxy()
}

/// Resolves names to public addresses only: a document host that points
/// inside the network is not fetched.
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let found = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found.filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err("the name resolves to no public address".into());
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_pass() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            // IPv4 hosts inside the network, reached through IPv6.
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a00:1",
            // SIIT's translated form, and local-use NAT64 with the IPv4
            // bits placed for a /48 or /64 prefix (RFC 6052).
            "::ffff:0:a9fe:a9fe",
            "::ffff:0:7f00:1",
            "64:ff9b:1:a9fe:a9:fe00::",
            "64:ff9b:1:0:a9:fea9:fe00:0",
            "64:ff9b:1::808:808",
            "2002:a9fe:a9fe::1",
            "2002:7f00:1::",
            // IPv4-compatible addresses of 0.0.0.0/8, site-local, the
            // discard prefix, Teredo, documentation, the 6to4 relays.
            "::2",
            "::ffff",
            "fec0::1",
            "100::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "3fff::1",
            "192.0.0.8",
            "192.88.99.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "2606:4700::1111",
            "1.1.1.1",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
            "::ffff:0:5db8:d822",
            // Public, beside the ranges above.
            "192.0.1.1",
            "2001:4860:4860::8888",
            "2a00:1450::1",
            "3ffe::1",
            "3fff:1000::1",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
