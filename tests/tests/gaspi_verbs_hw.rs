//! Verbs without the fake device.
//!
//! - Always: `GASPI_TRANSPORT=verbs` with a device that does not exist falls back to TCP,
//!   says why on stderr, and works.
//! - With `TARANTELLA_TEST_VERBS=1` on a host with an active InfiniBand/RoCE port: the
//!   ring of `gaspi_verbs.rs` (plus passive messages, SEND/RECV) over the real device (the
//!   ranks of one host talk through the HCA). Without that variable the hardware test
//!   reports that it was skipped.

use std::time::Duration;

use gaspi::env::TransportChoice;
use gaspi::testing::spmd_job;
use gaspi::*;

const T: Timeout = Timeout::ms(20_000);
const S: SegmentId = SegmentId(0);
const Q: QueueId = QueueId(0);

/// Writes a ring of `write_notify`, checks it, does one atomic per rank on rank 0, and
/// passes passive messages around the ring.
fn ring(ctx: &Context) {
    let me = ctx.rank();
    let n = ctx.num_ranks();
    let right = Rank((me.0 + 1) % n);
    let left = Rank((me.0 + n - 1) % n);
    ctx.segment_create(S, 1 << 20, Group::ALL, T, Alloc::Initialized)
        .unwrap();
    let seg = ctx.segment(S).unwrap();
    let words: Vec<u64> = (0..8192).map(|i| (u64::from(me.0) << 32) | i).collect();
    seg.write(0, &words).unwrap();
    let (local, remote) = (Local::new(S, 0), Remote::new(right, S, 1 << 19));
    ctx.write_notify(local, remote, 65536, NotificationId(1), 3, Q)
        .unwrap();
    ctx.wait(Q, T).unwrap();
    ctx.notify_waitsome(S, NotificationId(1), 1, T).unwrap();
    assert_eq!(ctx.notify_reset(S, NotificationId(1)).unwrap(), 3);
    let mut got = vec![0u64; 8192];
    seg.read(1 << 19, &mut got).unwrap();
    let expect: Vec<u64> = (0..8192).map(|i| (u64::from(left.0) << 32) | i).collect();
    assert_eq!(got, expect);
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.atomic_fetch_add(S, 1 << 18, Rank(0), 1, T).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    if me == Rank(0) {
        assert_eq!(seg.get::<u64>(1 << 18).unwrap(), u64::from(n));
    }
    // Passive messages to the right neighbour: SEND/RECV over verbs, TCP without.
    for m in 0..3u64 {
        seg.write(0, &[(u64::from(me.0) << 8) | m; 16]).unwrap();
        ctx.passive_send(S, 0, right, 128, T).unwrap();
    }
    for m in 0..3u64 {
        assert_eq!(ctx.passive_receive(S, 4096, 128, T).unwrap(), (left, 128));
        let mut msg = [0u64; 16];
        seg.read(4096, &mut msg).unwrap();
        assert_eq!(msg, [(u64::from(left.0) << 8) | m; 16]);
    }
    let counter = if ctx.uses_verbs_to(right) {
        Counter::PassiveSentVerbs
    } else {
        Counter::PassiveSentTcp
    };
    assert_eq!(ctx.statistic_counter_get(counter), 3);
    ctx.barrier(Group::ALL, T).unwrap();
}

#[test]
fn verbs_without_a_device_falls_back_to_tcp() {
    let name = "verbs_without_a_device_falls_back_to_tcp";
    let Some(out) = spmd_job(
        name,
        2,
        TransportChoice::Verbs,
        Duration::from_secs(60),
        |j| {
            j.env
                .push(("GASPI_IB_DEVICE".into(), "no-such-device".into()));
            j.env.push(("GASPI_LOG".into(), "warn".into()));
        },
    ) else {
        // The library logs only through a subscriber the program installs (as a binary does).
        gaspi::log::init_from_env();
        let ctx = Context::init().unwrap();
        let peer = Rank(1 - ctx.rank().0);
        assert!(!ctx.uses_verbs_to(peer));
        assert_eq!(ctx.network_type(), NetworkType::Ethernet);
        ring(&ctx);
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
    for r in &out.ranks {
        assert!(
            r.stderr.contains("no InfiniBand verbs") && r.stderr.contains("using TCP"),
            "rank {} did not log why it uses TCP:\n{}",
            r.rank,
            out.report()
        );
    }
}

#[test]
fn verbs_on_real_hardware() {
    let name = "verbs_on_real_hardware";
    if !gaspi::testing::is_rank_of(name)
        && std::env::var("TARANTELLA_TEST_VERBS").as_deref() != Ok("1")
    {
        eprintln!(
            "skipped: set TARANTELLA_TEST_VERBS=1 on a host with an active InfiniBand/RoCE port"
        );
        return;
    }
    let Some(out) = spmd_job(
        name,
        4,
        TransportChoice::Verbs,
        Duration::from_secs(120),
        |_| {},
    ) else {
        let ctx = Context::init().unwrap();
        for r in (0..ctx.num_ranks()).map(Rank).filter(|r| *r != ctx.rank()) {
            assert!(
                ctx.uses_verbs_to(r),
                "rank {r} is not reached over verbs: is there an active port? (see the log)"
            );
        }
        assert_eq!(ctx.network_type(), NetworkType::Ib);
        ring(&ctx);
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}
