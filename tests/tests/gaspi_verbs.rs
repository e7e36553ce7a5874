//! The verbs transport on the fake device: what is specific to verbs (signaling, send-queue
//! capacity, memory registration, error completions, passive messages over SEND/RECV). The
//! GASPI rule tests run over the fake device too (the `verbs_*` cases of `gaspi_rules_*`).

use std::time::{Duration, Instant};

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

/// Runs `body` on `n` ranks over the fake verbs device with extra environment.
fn fake_verbs_with(name: &str, n: u16, env: &[(&str, &str)], body: impl FnOnce(Context)) {
    let extra: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let net = tarantella_tests::Net::FakeVerbs;
    if let Some(out) = gaspi::testing::spmd_job(
        name,
        n,
        net.transport(),
        std::time::Duration::from_secs(60),
        |job| {
            job.env.extend(net.env());
            job.env.extend(extra);
        },
    ) {
        out.assert_success();
        return;
    }
    let ctx = Context::init().expect("gaspi init");
    assert!(ctx.uses_verbs_to(Rank((ctx.rank().0 + 1) % n)));
    body(ctx);
    std::process::exit(0);
}

/// A send queue of 8 (the device's limit) under a GASPI queue of 1024, on a slow network
/// (completions held back for 200 polls): the 8th request in flight is `QUEUE_FULL` and takes
/// no entry; `wait` drains the send queue and posting works again.
#[test]
fn queue_full_from_send_queue_depth() {
    fake_verbs_with(
        "queue_full_from_send_queue_depth",
        2,
        &[
            ("GASPI_IB_FAKE_MAX_WR", "8"),
            ("GASPI_IB_FAKE_CQ_LAG", "200"),
        ],
        |ctx| {
            ctx.segment_create(S, 1 << 16, Group::ALL, T, Alloc::Initialized)
                .unwrap();
            let peer = Rank(1 - ctx.rank().0);
            let write = |i: u64| {
                ctx.write(
                    Local::new(S, i * 64),
                    Remote::new(peer, S, 4096 + i * 64),
                    64,
                    Q,
                )
            };
            for round in 0..2 {
                for i in 0..7 {
                    write(i).unwrap();
                }
                let full = write(7);
                assert!(
                    matches!(full, Err(Error::QueueFull { .. })),
                    "round {round}: {full:?}"
                );
                assert_eq!(ctx.queue_size(Q).unwrap(), 7);
                ctx.wait(Q, T).unwrap();
                assert_eq!(ctx.queue_size(Q).unwrap(), 0);
            }
            finish(ctx);
        },
    );
}

/// 1000 small writes between waits through a send queue of 32: only selective signaling
/// (a completion every few requests retires the ones before it) lets them through, and the
/// data is all there after `wait`.
#[test]
fn selective_signaling_retires_unsignaled_requests() {
    fake_verbs_with(
        "selective_signaling_retires_unsignaled_requests",
        3,
        &[("GASPI_IB_FAKE_MAX_WR", "32")],
        |ctx| {
            ctx.segment_create(S, 1 << 16, Group::ALL, T, Alloc::Initialized)
                .unwrap();
            let seg = ctx.segment(S).unwrap();
            let me = ctx.rank();
            let right = Rank((me.0 + 1) % ctx.num_ranks());
            for round in 1..=3u64 {
                let words: Vec<u64> = (0..1000).map(|i| round << 32 | i).collect();
                seg.write(0, &words).unwrap();
                for i in 0..1000u64 {
                    ctx.write(
                        Local::new(S, i * 8),
                        Remote::new(right, S, 8192 + i * 8),
                        8,
                        Q,
                    )
                    .unwrap();
                }
                ctx.wait(Q, T).unwrap();
                ctx.notify(S, right, NotificationId(0), round as u32, Q)
                    .unwrap();
                ctx.wait(Q, T).unwrap();
                ctx.notify_waitsome(S, NotificationId(0), 1, T).unwrap();
                assert_eq!(
                    ctx.notify_reset(S, NotificationId(0)).unwrap(),
                    round as u32
                );
                let mut got = vec![0u64; 1000];
                seg.read(8192, &mut got).unwrap();
                assert_eq!(got, words, "round {round}");
                ctx.barrier(Group::ALL, T).unwrap();
            }
            finish(ctx);
        },
    );
}

/// User memory (`segment_bind`) cannot be mapped by the fake device's peers: they read an
/// empty directory entry and reach that segment over TCP instead, correctly.
#[test]
fn bound_memory_falls_back_to_tcp() {
    fake_verbs_with("bound_memory_falls_back_to_tcp", 2, &[], |ctx| {
        let mut mine = vec![0u64; 512];
        let seg = SegmentId(3);
        // SAFETY: `mine` outlives the segment (deleted before it is dropped) and is only
        // read through the segment API below, after a barrier.
        unsafe {
            ctx.segment_use(seg, mine.as_mut_ptr() as *mut u8, 4096, Group::ALL, T)
                .unwrap();
        }
        ctx.segment_create(S, 4096, Group::ALL, T, Alloc::Initialized)
            .unwrap();
        let peer = Rank(1 - ctx.rank().0);
        ctx.segment(S).unwrap().write(0, &[42u64; 8]).unwrap();
        ctx.write_notify(
            Local::new(S, 0),
            Remote::new(peer, seg, 64),
            64,
            NotificationId(0),
            9,
            Q,
        )
        .unwrap();
        ctx.wait(Q, T).unwrap();
        ctx.notify_waitsome(seg, NotificationId(0), 1, T).unwrap();
        let mut got = [0u64; 8];
        ctx.segment(seg).unwrap().read(64, &mut got).unwrap();
        assert_eq!(got, [42; 8]);
        ctx.barrier(Group::ALL, T).unwrap();
        assert!(!ctx.uses_verbs_to(peer), "the peer was not moved to TCP");
        ctx.segment_delete(seg).unwrap();
        finish(ctx);
        drop(mine);
    });
}

/// A write over verbs, then a notification on the same queue to a segment of the same peer
/// that only TCP reaches (user memory: the peer's route moves to TCP at the notification):
/// the notification must not overtake the write. The device runs the write only when its
/// completion queue is polled (`GASPI_IB_FAKE_DEFER_BYTES`), and the writer polls none
/// before the reader has looked, so the reader finds the data only if the TCP notification
/// waited for the write to complete.
#[test]
fn a_notification_over_tcp_does_not_overtake_a_write_over_verbs() {
    fake_verbs_with(
        "a_notification_over_tcp_does_not_overtake_a_write_over_verbs",
        2,
        &[("GASPI_IB_FAKE_DEFER_BYTES", "4096")],
        |ctx| {
            let mut bound = vec![0u64; 512];
            let user = SegmentId(3);
            // SAFETY: `bound` outlives the segment (deleted before it is dropped) and is only
            // reached through the segment API.
            unsafe {
                ctx.segment_use(user, bound.as_mut_ptr() as *mut u8, 4096, Group::ALL, T)
                    .unwrap();
            }
            ctx.segment_create(S, 1 << 16, Group::ALL, T, Alloc::Initialized)
                .unwrap();
            let me = ctx.rank();
            let peer = Rank(1 - me.0);
            let words: Vec<u64> = (0..1024).map(|i| 0xabc0_0000 + i).collect();
            if me == Rank(0) {
                ctx.segment(S).unwrap().write(0, &words).unwrap();
                ctx.write(Local::new(S, 0), Remote::new(peer, S, 8192), 8192, Q)
                    .unwrap();
                ctx.notify(user, peer, NotificationId(0), 1, Q).unwrap();
                // The reader's answer, over TCP too; no `wait` before it.
                ctx.notify_waitsome(user, NotificationId(1), 1, T).unwrap();
                assert_eq!(ctx.notify_reset(user, NotificationId(1)).unwrap(), 7);
                ctx.wait(Q, T).unwrap();
            } else {
                ctx.notify_waitsome(user, NotificationId(0), 1, T).unwrap();
                assert_eq!(ctx.notify_reset(user, NotificationId(0)).unwrap(), 1);
                let mut got = vec![0u64; 1024];
                ctx.segment(S).unwrap().read(8192, &mut got).unwrap();
                let ok = got == words;
                ctx.notify(user, peer, NotificationId(1), 7, Q).unwrap();
                ctx.wait(Q, T).unwrap();
                assert!(ok, "the notification overtook the write: {:x?}", &got[..4]);
            }
            assert!(!ctx.uses_verbs_to(peer), "the peer was not moved to TCP");
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.segment_delete(user).unwrap();
            finish(ctx);
            drop(bound);
        },
    );
}

// ---- passive messages over SEND/RECV ----

/// Message `m` of rank `r`: its length (1 byte up to the maximum) and its bytes, which start
/// with the tag `(r, m)` when there is room for it.
fn passive_msg(r: u16, m: u32, max: u64) -> Vec<u8> {
    let len = match m % 7 {
        0 => max,
        1 => 1,
        _ => 8 + u64::from(m * 131 + u32::from(r) * 17) % 3000,
    } as usize;
    let mut v: Vec<u8> = (0..len)
        .map(|i| (i as u32 ^ m ^ u32::from(r) << 4) as u8)
        .collect();
    if len >= 8 {
        v[..8].copy_from_slice(&((u64::from(r) << 32) | u64::from(m)).to_le_bytes());
    }
    v
}

fn counter(ctx: &Context, c: Counter) -> u64 {
    ctx.statistic_counter_get(c)
}

/// Every rank but 0 sends `K` messages of 1 byte to the maximum to rank 0, which receives
/// them all: each exactly once, with its sender, in sending order per sender. With 4 receive
/// buffers per sender the senders keep running into "receiver not ready" and wait for rank 0
/// to repost. Counters prove that every message went over verbs SEND/RECV, none over TCP.
fn many_senders(ctx: Context) {
    const K: u32 = 150;
    let seg = create_passive_segment(&ctx);
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let max = ctx.passive_transfer_size_max();
    if me.0 != 0 {
        for m in 0..K {
            let msg = passive_msg(me.0, m, max);
            seg.write(0, &msg).unwrap();
            ctx.passive_send(S, 0, Rank(0), msg.len() as u64, T)
                .unwrap();
        }
        assert_eq!(counter(&ctx, Counter::PassiveSentVerbs), u64::from(K));
        assert_eq!(counter(&ctx, Counter::PassiveSentTcp), 0);
    } else {
        let mut next = vec![0u32; usize::from(n)];
        for _ in 0..u32::from(n - 1) * K {
            let (from, len) = ctx.passive_receive(S, 1 << 17, max, T).unwrap();
            assert!(from.0 != 0 && from.0 < n, "sender {from}");
            let m = next[from.index()];
            let want = passive_msg(from.0, m, max);
            assert_eq!(
                len,
                want.len() as u64,
                "length of message {m} of rank {from}"
            );
            let mut got = vec![0u8; want.len()];
            seg.read(1 << 17, &mut got).unwrap();
            assert!(
                got == want,
                "message {m} of rank {from}: wrong bytes or order"
            );
            next[from.index()] += 1;
        }
        assert!(next[1..].iter().all(|k| *k == K), "{next:?}");
        timed_out(ctx.passive_receive(S, 0, max, Timeout::TEST));
        let received = counter(&ctx, Counter::PassiveReceivedVerbs);
        assert_eq!(received, u64::from(n - 1) * u64::from(K));
        assert_eq!(counter(&ctx, Counter::PassiveSentTcp), 0);
    }
    finish(ctx);
}

fn create_passive_segment(ctx: &Context) -> Segment {
    ctx.segment_create(S, 1 << 18, Group::ALL, T, Alloc::Initialized)
        .unwrap();
    ctx.segment(S).unwrap()
}

#[track_caller]
fn timed_out<V: std::fmt::Debug>(res: Result<V>) {
    assert!(
        matches!(res, Err(Error::Timeout)),
        "expected a timeout: {res:?}"
    );
}

spmd_cases! {
    passive_many_senders, many_senders,
    verbs_2 = (2, FakeVerbs),
    verbs_3 = (3, FakeVerbs),
    verbs_5 = (5, FakeVerbs),
}

/// A message longer than the receive size stays first in line: `passive_receive` fails with
/// `InvalidSize` (also when a shorter message from the same sender waits behind it) and a
/// large enough receive gets it, then the next one.
#[test]
fn passive_too_large_is_not_lost() {
    fake_verbs_with("passive_too_large_is_not_lost", 2, &[], |ctx| {
        let seg = create_passive_segment(&ctx);
        let max = ctx.passive_transfer_size_max();
        if ctx.rank() == Rank(1) {
            for (m, len) in [(0u32, 1000usize), (2, 10)] {
                let msg = passive_msg(1, m, max);
                seg.write(0, &msg[..len]).unwrap();
                ctx.passive_send(S, 0, Rank(0), len as u64, T).unwrap();
            }
            assert_eq!(counter(&ctx, Counter::PassiveSentVerbs), 2);
        } else {
            for _ in 0..2 {
                let small = ctx.passive_receive(S, 4096, 100, T);
                assert!(
                    matches!(&small, Err(Error::InvalidSize(m)) if m.contains("1000")),
                    "{small:?}"
                );
            }
            assert_eq!(
                ctx.passive_receive(S, 4096, max, T).unwrap(),
                (Rank(1), 1000)
            );
            let mut got = vec![0u8; 1000];
            seg.read(4096, &mut got).unwrap();
            assert!(
                got == passive_msg(1, 0, max)[..1000],
                "the large message's bytes"
            );
            assert_eq!(ctx.passive_receive(S, 4096, 10, T).unwrap(), (Rank(1), 10));
            timed_out(ctx.passive_receive(S, 0, max, Timeout::TEST));
            assert_eq!(counter(&ctx, Counter::PassiveReceivedVerbs), 2);
        }
        finish(ctx);
    });
}

/// With 2 receive buffers (`GASPI_IB_PASSIVE_DEPTH=2`) and a receiver that does not receive,
/// the third `passive_send` finds no buffer posted and returns `Timeout` (its SEND stays
/// queued, retried as RNR). Calling it again with the same message resumes it once the
/// receiver has received one: delivered once, not twice. A different message after a
/// timeout is sent after the timed-out one, which is delivered too.
#[test]
fn passive_send_times_out_without_a_posted_receive() {
    let env = [("GASPI_IB_PASSIVE_DEPTH", "2")];
    fake_verbs_with(
        "passive_send_times_out_without_a_posted_receive",
        2,
        &env,
        |ctx| {
            let seg = create_passive_segment(&ctx);
            let max = ctx.passive_transfer_size_max();
            let send = |m: u32, timeout: Timeout| {
                let msg = passive_msg(1, m, max);
                seg.write(0, &msg).unwrap();
                ctx.passive_send(S, 0, Rank(0), msg.len() as u64, timeout)
            };
            if ctx.rank() == Rank(1) {
                for phase in 0..2u32 {
                    let m = phase * 4;
                    send(m, T).unwrap();
                    send(m + 1, T).unwrap();
                    let t0 = Instant::now();
                    timed_out(send(m + 2, Timeout::ms(100)));
                    assert!(t0.elapsed() >= Duration::from_millis(100));
                    timed_out(send(m + 2, Timeout::TEST));
                    // Let rank 0 receive, then resume (phase 0) or send the next one (phase 1).
                    ctx.notify(S, Rank(0), NotificationId(phase), 1, Q).unwrap();
                    ctx.wait(Q, T).unwrap();
                    if phase == 0 {
                        send(m + 2, T).unwrap();
                    }
                    send(m + 3, T).unwrap();
                }
                assert_eq!(counter(&ctx, Counter::PassiveSentVerbs), 8);
                assert_eq!(counter(&ctx, Counter::PassiveSentTcp), 0);
            } else {
                for m in 0..8u32 {
                    if m % 4 == 0 {
                        let id = NotificationId(m / 4);
                        ctx.notify_waitsome(S, id, 1, T).unwrap();
                        ctx.notify_reset(S, id).unwrap();
                    }
                    let want = passive_msg(1, m, max);
                    let got = ctx.passive_receive(S, 1 << 17, max, T).unwrap();
                    assert_eq!(got, (Rank(1), want.len() as u64), "message {m}");
                    let mut bytes = vec![0u8; want.len()];
                    seg.read(1 << 17, &mut bytes).unwrap();
                    assert!(bytes == want, "message {m}: wrong bytes");
                }
                timed_out(ctx.passive_receive(S, 0, max, Timeout::TEST));
            }
            finish(ctx);
        },
    );
}
