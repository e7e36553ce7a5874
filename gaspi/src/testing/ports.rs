//! Ports for a job's rendezvous.

use std::net::{IpAddr, Ipv4Addr, TcpListener};

/// The first port of this host's ephemeral range (`ip_local_port_range`), from which the
/// kernel takes the local ports of outgoing connections; Linux's default 32768 if unreadable.
pub fn ephemeral_port_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A TCP port free on `ip` now, for a rendezvous that rank 0 binds a little later.
///
/// It is taken below the kernel's ephemeral range (`ip_local_port_range`), as the launcher
/// takes its ports: a port the kernel handed out for `bind(0)` and that was released comes
/// from the same range as the local ports of outgoing connections, and another job's
/// connection took one between the release and rank 0's bind (rank 0 then failed with
/// "Address already in use"). Candidates start at a point that differs per process and
/// per call, so concurrent jobs of this process never get the same port. When `ip` is not
/// an address of this network namespace (a test host in another one), a port free on
/// loopback is taken: the other namespace's ports are all free.
pub fn free_port(ip: IpAddr) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(ephemeral_port_start()).max(11_000) - 10_000;
    let start = std::process::id()
        .wrapping_mul(7919)
        .wrapping_add(CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(101));
    let bind_ip = if TcpListener::bind((ip, 0)).is_ok() {
        ip
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    (0..span)
        .map(|i| 10_000 + (start.wrapping_add(i)) % span)
        .filter_map(|p| u16::try_from(p).ok())
        .find(|&p| TcpListener::bind((bind_ip, p)).is_ok())
        .expect("a free port below the ephemeral range")
}
