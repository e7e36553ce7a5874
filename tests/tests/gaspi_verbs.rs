//! The verbs transport on the fake device: what is specific to verbs (signaling, send-queue
//! capacity, memory registration, error completions). The GASPI rule tests run over the fake
//! device too (the `verbs_*` cases of `gaspi_rules_*`).

use gaspi::*;
use tarantella_tests::spmd_cases;

const T: Timeout = Timeout::ms(20_000);
const S: SegmentId = SegmentId(0);
const Q: QueueId = QueueId(0);

fn finish(ctx: Context) {
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.term(T).unwrap();
}

/// A ring of write_notify, read back with read_notify, and atomics, over verbs.
fn ring(ctx: Context) {
    assert_eq!(ctx.network_type(), NetworkType::Ib);
    let me = ctx.rank();
    let n = ctx.num_ranks();
    let right = Rank((me.0 + 1) % n);
    ctx.segment_create(S, 1 << 16, Group::ALL, T, Alloc::Initialized)
        .unwrap();
    let seg = ctx.segment(S).unwrap();
    let words: Vec<u64> = (0..1024).map(|i| (u64::from(me.0) << 32) | i).collect();
    seg.write(0, &words).unwrap();
    ctx.write_notify(
        Local::new(S, 0),
        Remote::new(right, S, 8192),
        8192,
        NotificationId(1),
        7,
        Q,
    )
    .unwrap();
    ctx.wait(Q, T).unwrap();
    ctx.notify_waitsome(S, NotificationId(1), 1, T).unwrap();
    assert_eq!(ctx.notify_reset(S, NotificationId(1)).unwrap(), 7);
    let left = Rank((me.0 + n - 1) % n);
    let mut got = vec![0u64; 1024];
    seg.read(8192, &mut got).unwrap();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, w)| *w == (u64::from(left.0) << 32) | i as u64));
    // Once every rank has written its words: read the right neighbour's first KiB into
    // 16384, with a local notification.
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.read_notify(
        Local::new(S, 16384),
        Remote::new(right, S, 0),
        1024,
        NotificationId(2),
        Q,
    )
    .unwrap();
    ctx.wait(Q, T).unwrap();
    assert_eq!(ctx.notify_reset(S, NotificationId(2)).unwrap(), 1);
    let mut back = vec![0u64; 128];
    seg.read(16384, &mut back).unwrap();
    assert_eq!(back[5], (u64::from(right.0) << 32) | 5);
    ctx.barrier(Group::ALL, T).unwrap();
    let old = ctx.atomic_fetch_add(S, 32768, Rank(0), 1, T).unwrap();
    assert!(old < u64::from(n));
    ctx.barrier(Group::ALL, T).unwrap();
    if me == Rank(0) {
        assert_eq!(seg.get::<u64>(32768).unwrap(), u64::from(n));
    }
    finish(ctx);
}

spmd_cases! {
    verbs_ring, ring,
    verbs_2 = (2, FakeVerbs),
    verbs_4 = (4, FakeVerbs),
}
