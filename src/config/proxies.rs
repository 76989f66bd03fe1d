//! `trusted_proxies`: the reverse proxies in front of the service, whose
//! `X-Forwarded-For` names the client. Behind a proxy every request's peer
//! address is the proxy's, so audit rows and access lines would all name
//! it; the header names the client instead, but any client can write one.
//! So the header is read only when the peer is one of these addresses, and
//! only as far back as the chain stays among them: each proxy appends the
//! address it was reached from, and the first address from the right that is
//! not a trusted proxy is the client (what nginx's `real_ip_recursive` and
//! Caddy's `client_ip_headers` do).

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, de::Error as _};

/// The header every common proxy (Caddy, nginx, Traefik, cloud balancers)
/// writes.
pub const FORWARDED_FOR: &str = "x-forwarded-for";

/// At most this many hops are read from the right of the header: a chain
/// of proxies is a handful, and the header is the client's to lengthen.
const MAX_HOPS: usize = 32;

/// The addresses and networks (`10.0.0.0/8`) trusted to report the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses the setting's entries: addresses and CIDR networks.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut nets = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = entry.as_ref().trim();
            let net = match entry.parse::<IpNet>() {
                Ok(net) => net.trunc(),
                Err(_) => match entry.parse::<IpAddr>() {
                    Ok(ip) => IpNet::from(ip.to_canonical()),
                    Err(_) => {
                        return Err(format!(
                            "{entry:?} is neither an IP address nor a network like 10.0.0.0/8"
                        ));
                    }
                },
            };
            if net.prefix_len() == 0 {
                return Err(format!(
                    "{entry:?} trusts every address: any client could then name its own \
                     address in X-Forwarded-For; list the proxies' addresses or networks"
                ));
            }
            nets.push(net);
        }
        Ok(Self(nets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address for a request from `peer` that carried the
    /// `X-Forwarded-For` values `forwarded_for` (each header line, in
    /// order). The peer itself unless it is a trusted proxy; then the
    /// rightmost hop that is not one, or, when every hop is, the leftmost.
    /// A hop that is not an address ends the walk at the proxy that wrote it.
    pub fn client_address<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl Iterator<Item = &'a str>,
    ) -> IpAddr {
        let peer = peer.to_canonical();
        if self.0.is_empty() || !self.contains(peer) {
            return peer;
        }
        let hops: Vec<&str> = forwarded_for.flat_map(|line| line.split(',')).collect();
        let mut client = peer;
        for hop in hops.iter().rev().take(MAX_HOPS) {
            let Some(ip) = parse_hop(hop) else {
                return client;
            };
            client = ip;
            if !self.contains(ip) {
                break;
            }
        }
        client
    }
}

/// One entry of `X-Forwarded-For`: an address, possibly with a port
/// (`192.0.2.1:4711`, `[2001:db8::1]:4711`) or in brackets, as some
/// balancers write it.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    let ip = hop
        .parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| {
            hop.strip_prefix('[')?
                .strip_suffix(']')?
                .parse::<IpAddr>()
                .ok()
        })?;
    Some(ip.to_canonical())
}

impl<'de> Deserialize<'de> for TrustedProxies {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::parse(&super::lenient::list(d)?).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(entries: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(entries).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_header_is_never_read() {
        let none = TrustedProxies::default();
        let client = none.client_address(ip("10.0.0.2"), ["192.0.2.7"].into_iter());
        assert_eq!(client, ip("10.0.0.2"));
    }

    #[test]
    fn a_peer_that_is_no_trusted_proxy_cannot_name_another_address() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let client = proxies.client_address(ip("198.51.100.9"), ["10.0.0.1"].into_iter());
        assert_eq!(client, ip("198.51.100.9"));
    }

    #[test]
    fn behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_client() {
        let proxies = trusted(&["10.0.0.0/8", "172.16.0.5"]);
        // The client wrote the first entry itself; the two proxies appended
        // the rest.
        let lines = ["203.0.113.66, 192.0.2.7", "10.1.2.3"];
        let client = proxies.client_address(ip("172.16.0.5"), lines.into_iter());
        assert_eq!(client, ip("192.0.2.7"));
    }

    #[test]
    fn when_every_hop_is_trusted_the_leftmost_is_the_client() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let client = proxies.client_address(ip("10.0.0.2"), ["10.9.9.9, 10.0.0.3"].into_iter());
        assert_eq!(client, ip("10.9.9.9"));
        let client = proxies.client_address(ip("10.0.0.2"), std::iter::empty());
        assert_eq!(
            client,
            ip("10.0.0.2"),
            "no header: the proxy is all we know"
        );
    }

    #[test]
    fn a_hop_that_is_not_an_address_stops_at_the_proxy_that_wrote_it() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let lines = ["192.0.2.7, unknown, 10.0.0.3"];
        let client = proxies.client_address(ip("10.0.0.2"), lines.into_iter());
        assert_eq!(client, ip("10.0.0.3"));
    }

    #[test]
    fn ports_brackets_and_mapped_addresses_are_read() {
        let proxies = trusted(&["10.0.0.0/8", "fd00::/8"]);
        for (hop, expected) in [
            ("192.0.2.7:4711", "192.0.2.7"),
            ("[2001:db8::1]:4711", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
            (" ::ffff:192.0.2.7 ", "192.0.2.7"),
        ] {
            let client = proxies.client_address(ip("::ffff:10.0.0.2"), [hop].into_iter());
            assert_eq!(client, ip(expected), "{hop}");
        }
        let client = proxies.client_address(ip("fd00::2"), ["2001:db8::9"].into_iter());
        assert_eq!(client, ip("2001:db8::9"));
    }

    #[test]
    fn a_long_chain_is_read_only_so_far() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let mut hops = vec!["192.0.2.7"];
        hops.extend(std::iter::repeat_n("10.0.0.1", 40));
        let line = hops.join(",");
        let client = proxies.client_address(ip("10.0.0.2"), [line.as_str()].into_iter());
        assert_eq!(client, ip("10.0.0.1"), "the walk ends after 32 hops");
    }

    #[test]
    fn entries_are_addresses_or_networks_but_never_everything() {
        let parsed = trusted(&["10.1.2.3/8", "192.0.2.1", "::1"]);
        assert_eq!(
            parsed.0,
            ["10.0.0.0/8", "192.0.2.1/32", "::1/128"].map(|n| n.parse::<IpNet>().unwrap())
        );
        let error = TrustedProxies::parse(&["10.0.0.0/8", "proxy.internal"]).unwrap_err();
        assert!(error.contains("\"proxy.internal\" is neither"), "{error}");
        for everything in ["0.0.0.0/0", "::/0"] {
            let error = TrustedProxies::parse(&[everything]).unwrap_err();
            assert!(error.contains("trusts every address"), "{error}");
        }
    }
}
