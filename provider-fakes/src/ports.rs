//! Ports for servers that learn their port before they bind it: another
//! process (Postgres, Node, a browser's driver, a container's published
//! port) that every peer must know the URL of before any of them starts.
//!
//! The usual trick, binding port 0 and releasing it, hands out a port from
//! the kernel's ephemeral range, the same range every outgoing connection
//! takes its local port from. Between the choice and the server's own bind
//! (seconds, when a compose stack comes up in between) a connection of the
//! tests themselves or of Docker's proxies may take that port, and the
//! server's bind then fails with EADDRINUSE. Ports below that range are only
//! ever taken by an explicit bind, so one that is free now stays free.

use std::{
    collections::HashSet,
    io::ErrorKind,
    net::{IpAddr, Ipv4Addr, TcpListener},
    ops::Range,
    sync::{Mutex, PoisonError},
};

/// Where the candidates start: above the ports well-known services use.
const LOWEST: u16 = 10_000;

/// Ports this process has handed out (none of them is bound until its
/// server starts, so the bind check alone would not tell them apart).
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port nothing is bound to on any of `addresses` (loopback when empty),
/// below the kernel's ephemeral range, not handed out before by this
/// process.
pub fn unused_port(addresses: &[IpAddr]) -> u16 {
    let loopback = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
    let addresses = if addresses.is_empty() {
        &loopback[..]
    } else {
        addresses
    };
    let below = ephemeral_range_start();
    if below <= LOWEST + 100 {
        // A kernel whose ephemeral range starts this low leaves nothing
        // safer than its own choice.
        return TcpListener::bind((addresses[0], 0))
            .and_then(|l| l.local_addr())
            .expect("bind port 0")
            .port();
    }
    let port = {
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
        unused_port_in(addresses, LOWEST..below, handed_out.get_or_insert_default())
    };
    port.unwrap_or_else(|| panic!("no unused port in {LOWEST}..{below} on {addresses:?}"))
}

fn unused_port_in(
    addresses: &[IpAddr],
    candidates: Range<u16>,
    handed_out: &mut HashSet<u16>,
) -> Option<u16> {
    // Taken means in use; any other failure (an address this host does not
    // have) would fail every port alike, and says so at once.
    let free = |port: u16| {
        addresses
            .iter()
            .all(|address| match TcpListener::bind((*address, port)) {
                Ok(_) => true,
                Err(e) if e.kind() == ErrorKind::AddrInUse => false,
                Err(e) => panic!("cannot bind {address}:{port}: {e}"),
            })
    };
    // Random candidates first (parallel tests rarely meet), then every one.
    let random: Vec<u16> = (0..64)
        .map(|_| rand::random_range(candidates.clone()))
        .collect();
    let port = random
        .into_iter()
        .chain(candidates)
        .find(|port| !handed_out.contains(port) && free(*port))?;
    handed_out.insert(port);
    Some(port)
}

/// Marks `ports` as handed out: ports another process chose the same way
/// and binds later (a compose stack's published ports).
pub fn set_aside(ports: &[u16]) {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    handed_out.get_or_insert_default().extend(ports);
}

/// The first port of the range the kernel takes outgoing connections' local
/// ports from (32768 on Linux unless configured).
fn ephemeral_range_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_below_the_ephemeral_range_and_never_handed_out_twice() {
        let below = ephemeral_range_start();
        let ports: HashSet<u16> = (0..200).map(|_| unused_port(&[])).collect();
        assert_eq!(ports.len(), 200);
        if below > LOWEST + 100 {
            assert!(ports.iter().all(|p| (LOWEST..below).contains(p)));
        }
    }

    #[test]
    fn a_port_someone_listens_on_is_not_handed_out() {
        // A range of 16 whose ports are all held but one, on loopback.
        let mut range_start = 20_000;
        let held = loop {
            let held: Vec<TcpListener> = (range_start..range_start + 16)
                .filter(|p| p % 16 != 7)
                .filter_map(|p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).ok())
                .collect();
            let spare_is_free = TcpListener::bind((Ipv4Addr::LOCALHOST, range_start + 7)).is_ok();
            if held.len() == 15 && spare_is_free {
                break held;
            }
            range_start += 16;
        };
        let loopback = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
        let range = range_start..range_start + 16;
        let mut handed_out = HashSet::new();
        let port = unused_port_in(&loopback, range.clone(), &mut handed_out).unwrap();
        assert_eq!(port % 16, 7);
        // … and once handed out, nothing is left.
        assert_eq!(unused_port_in(&loopback, range, &mut handed_out), None);
        drop(held);
    }
}
