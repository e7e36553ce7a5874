//! The test harness's rendezvous ports (`gaspi::testing::free_port`) lie below the kernel's
//! ephemeral range, where no outgoing connection of a concurrent job can take one between
//! the choice and rank 0's bind, and successive choices differ.

#[test]
fn harness_ports_lie_below_the_ephemeral_range_and_differ() {
    let low = gaspi::testing::ephemeral_port_start();
    let ip = "127.0.0.1".parse().unwrap();
    let ports: Vec<u16> = (0..20).map(|_| gaspi::testing::free_port(ip)).collect();
    for &p in &ports {
        assert!((10_000..low).contains(&p), "{p} not below {low}");
    }
    let mut distinct = ports.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
}
