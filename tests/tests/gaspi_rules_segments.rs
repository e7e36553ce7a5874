//! Rules 9 and 12: segments and groups, and passive messages.
//! Multi-process tests over TCP, shared memory and the fake verbs device, 1 to 5 ranks; every
//! test ends with a barrier (peers may still access this rank's segments) and `term`.

#[macro_use]
mod common;

use common::*;
use tarantella_tests::spmd_cases;

// Rule 9: segments are collective only when asked; groups of a subset work.
fn segments_and_groups(ctx: Context) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let (next, prev) = (right(&ctx), left(&ctx));
    let seg = create(&ctx, S, 4096);
    for r in 0..n {
        assert_eq!(ctx.segment_size(S, Rank(r)).unwrap(), 4096);
    }
    // Segment 1: allocated everywhere, registered with the next rank only.
    let (s1, init) = (SegmentId(1), Alloc::Initialized);
    let size1 = |r: Rank| 1024 + 8 * u64::from(r.0);
    ctx.segment_alloc(s1, size1(me), init).unwrap();
    ctx.segment_register(s1, next, T).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    assert_eq!(ctx.segment_list(), vec![S, s1]);
    assert_eq!(ctx.segment_num(), 2);
    assert_eq!(ctx.segment_size(s1, prev).unwrap(), size1(prev));
    seg.write(0, &[u64::from(me.0) * 1000 + 1]).unwrap();
    let to_prev = Remote::new(prev, s1, 8);
    ctx.write_notify(lo(0), to_prev, 8, nid(0), 1, Q).unwrap();
    take(&ctx, s1, 0);
    let got: u64 = ctx.segment(s1).unwrap().get(8).unwrap();
    assert_eq!(got, u64::from(next.0) * 1000 + 1);
    if n >= 3 {
        let res = ctx.write(lo(0), Remote::new(next, s1, 0), 8, Q);
        must!(res, Err(Error::InvalidSegment { segment, rank: Some(r) }) if segment == s1 && r == next);
        must!(
            ctx.segment_size(s1, next),
            Err(Error::InvalidSegment { .. })
        );
    }
    ctx.wait(Q, T).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    // `peer_segment`: a shared-memory peer's segment is read in place (our write above
    // landed at its offset 8); any other peer's is not mapped here.
    let view = ctx.peer_segment(prev, s1);
    if ctx.uses_shm_to(prev) {
        let got: u64 = view.unwrap().get(8).unwrap();
        assert_eq!(got, u64::from(me.0) * 1000 + 1);
    } else {
        must!(view, Err(Error::NotMapped { rank, .. }) if rank == prev);
    }
    let own: u64 = ctx.peer_segment(me, s1).unwrap().get(8).unwrap();
    assert_eq!(own, u64::from(next.0) * 1000 + 1);
    if n >= 3 {
        must!(
            ctx.peer_segment(next, s1),
            Err(Error::InvalidSegment { .. })
        );
    }
    must!(
        ctx.peer_segment(Rank(n), s1),
        Err(Error::InvalidRank { .. })
    );
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.segment_delete(s1).unwrap();
    assert_eq!(ctx.segment_list(), vec![S]);
    // A group of the ranks of our parity (each parity builds its own group).
    let parity = me.0 % 2;
    let members: Vec<Rank> = (0..n).filter(|r| r % 2 == parity).map(Rank).collect();
    let g = ctx.group_create().unwrap();
    assert_ne!(g, Group::ALL);
    for m in &members {
        ctx.group_add(g, *m).unwrap();
    }
    ctx.group_commit(g, T).unwrap();
    assert_eq!(ctx.group_size(g).unwrap(), members.len() as u32);
    assert_eq!(ctx.group_members(g).unwrap(), members);
    assert_eq!(ctx.group_num(), 2);
    ctx.barrier(g, T).unwrap();
    let (mine, mut sum) = ([u64::from(me.0), 1], [0u64; 2]);
    ctx.allreduce(&mine, &mut sum, ReduceOp::Sum, g, T).unwrap();
    let expect: u64 = members.iter().map(|r| u64::from(r.0)).sum();
    assert_eq!(sum, [expect, members.len() as u64]);
    // A segment created over the group is visible to its members only.
    let (s2, size2) = (SegmentId(2), 512 + 8 * u64::from(parity));
    ctx.segment_create(s2, size2, g, T, init).unwrap();
    for r in 0..n {
        let res = ctx.segment_size(s2, Rank(r));
        if r % 2 == parity {
            assert_eq!(res.unwrap(), size2);
        } else {
            must!(res, Err(Error::InvalidSegment { .. }));
        }
    }
    ctx.barrier(g, T).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.group_delete(g).unwrap();
    assert_eq!(ctx.group_num(), 1);
    finish(ctx);
}

spmd_cases! {
    rule09_segments_and_groups, segments_and_groups,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm), tcp_5 = (5, Tcp),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

// Rule 12: each passive message is received exactly once, with its sender.
fn passive(ctx: Context) {
    const M: u64 = 3;
    let seg = create(&ctx, S, 128 * 1024);
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let max = ctx.passive_transfer_size_max();
    assert_eq!(max, 65535);
    let size = |r, m| {
        if r == 1 && m == M - 1 {
            max
        } else {
            8 + (r * 97 + m * 31) % 2000
        }
    };
    let byte = |r: u64, m: u64, i: u64| (r * 31 + m * 7 + i) as u8;
    if me.0 != 0 {
        let r = u64::from(me.0);
        for m in 0..M {
            let body: Vec<u8> = (8..size(r, m)).map(|i| byte(r, m, i)).collect();
            seg.write(0, &[(r << 16) | m]).unwrap();
            seg.write(8, &body).unwrap();
            ctx.passive_send(S, 0, Rank(0), size(r, m), T).unwrap();
        }
        // The path is the peer's route: verbs SENDs to a verbs peer, TCP otherwise.
        let (verbs, tcp) = if ctx.uses_verbs_to(Rank(0)) {
            (M, 0)
        } else {
            (0, M)
        };
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentVerbs), verbs);
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentTcp), tcp);
    } else {
        let mut seen = BTreeSet::new();
        for _ in 0..u64::from(n - 1) * M {
            let (from, len) = ctx.passive_receive(S, 0, max, T).unwrap();
            let tag: u64 = seg.get(0).unwrap();
            let (r, m) = (tag >> 16, tag & 0xffff);
            assert_eq!(u64::from(from.0), r, "sender rank");
            assert!(
                seen.insert((r, m)),
                "message {m} of rank {r} received twice"
            );
            assert_eq!(len, size(r, m));
            let mut body = vec![0u8; (len - 8) as usize];
            seg.read(8, &mut body).unwrap();
            let bad = (8..len).position(|i| body[(i - 8) as usize] != byte(r, m, i));
            assert!(
                bad.is_none(),
                "message {m} of rank {r}: byte {bad:?} differs"
            );
        }
        timed_out(ctx.passive_receive(S, 0, max, TEST));
        let over_verbs = (1..n).filter(|r| ctx.uses_verbs_to(Rank(*r))).count() as u64;
        let received = ctx.statistic_counter_get(Counter::PassiveReceivedVerbs);
        assert_eq!(received, over_verbs * M, "messages received through verbs");
    }
    finish(ctx);
}

spmd_cases! {
    rule12_passive, passive,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs), verbs_5 = (5, FakeVerbs),
}

// Rule 12 with timeouts: a `passive_send` that returned `Timeout` is resumed by calling it
// again with the same message, and is never delivered twice; a sender that moves on to
// another message instead still gets both delivered, in order.
fn passive_resumed_after_timeout(ctx: Context) {
    const M: u64 = 40;
    let seg = create(&ctx, S, 64 * 1024);
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let max = ctx.passive_transfer_size_max();
    if me.0 != 0 {
        let r = u64::from(me.0);
        let mut timeouts = 0;
        for m in 0..M {
            seg.write(0, &[(r << 16) | m, m * m]).unwrap();
            // Only the first attempt may give up: the message is on its way regardless.
            let mut attempt = ctx.passive_send(S, 0, Rank(0), 16, TEST);
            while matches!(attempt, Err(Error::Timeout)) && m % 2 == 0 {
                timeouts += 1;
                attempt = ctx.passive_send(S, 0, Rank(0), 16, Timeout(1));
            }
            match attempt {
                Ok(()) => {}
                Err(Error::Timeout) => timeouts += 1,
                Err(e) => panic!("passive_send: {e:?}"),
            }
        }
        // The last message was acknowledged, so every earlier one has been queued there.
        ctx.passive_send(S, 0, Rank(0), 8, T).unwrap();
        eprintln!("rank {r}: {timeouts} timeouts");
    } else {
        let mut next = vec![0u64; usize::from(n)];
        let mut ends = 0;
        while ends < n - 1 {
            let (from, len) = ctx.passive_receive(S, 0, max, T).unwrap();
            let tag: u64 = seg.get(0).unwrap();
            let (r, m) = (tag >> 16, tag & 0xffff);
            assert_eq!(u64::from(from.0), r, "sender rank");
            if len == 8 {
                assert_eq!(next[r as usize], M, "rank {r} ended early");
                ends += 1;
                continue;
            }
            assert_eq!(len, 16);
            assert_eq!(m, next[r as usize], "rank {r}: out of order or twice");
            let square: u64 = seg.get(8).unwrap();
            assert_eq!(square, m * m);
            next[r as usize] += 1;
        }
        timed_out(ctx.passive_receive(S, 0, max, TEST));
    }
    finish(ctx);
}

spmd_cases! {
    rule12_passive_resumed_after_timeout, passive_resumed_after_timeout,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), verbs_3 = (3, FakeVerbs),
}

/// Creates `seg` of `size` bytes on all ranks and checks, with a ring write, that every rank
/// reaches the new segment (not a registration left from an earlier one under the id).
fn create_and_ring(ctx: &Context, seg: SegmentId, size: u64) {
    let (me, next, prev) = (ctx.rank(), right(ctx), left(ctx));
    ctx.segment_create(seg, size, Group::ALL, T, Alloc::Initialized)
        .unwrap();
    assert_eq!(ctx.segment_size(seg, next).unwrap(), size);
    let h = ctx.segment(seg).unwrap();
    h.write(0, &[1000 + u64::from(me.0)]).unwrap();
    let dst = Remote::new(next, seg, size - 8);
    ctx.write_notify(Local::new(seg, 0), dst, 8, nid(3), 1, Q)
        .unwrap();
    take(ctx, seg, 3);
    assert_eq!(h.get::<u64>(size - 8).unwrap(), 1000 + u64::from(prev.0));
    ctx.wait(Q, T).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
}

fn delete(ctx: &Context, seg: SegmentId) {
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.segment_delete(seg).unwrap();
}

// Rule 9: segment ids are reusable with any size, in any order, any number of times (the
// sequences GPI-2 programs use), and so are group ids.
fn segment_ids_reused(ctx: Context) {
    create_and_ring(&ctx, SegmentId(10), 4096);
    delete(&ctx, SegmentId(10));
    create_and_ring(&ctx, SegmentId(2), 4096);
    delete(&ctx, SegmentId(2));
    for round in 0..4 {
        create_and_ring(&ctx, SegmentId(0), 1024 << round);
        delete(&ctx, SegmentId(0));
    }
    let mut made = 0;
    while let Ok(s) = ctx.segment_avail_local() {
        ctx.segment_create(s, 64, Group::ALL, T, Alloc::Uninitialized)
            .unwrap();
        made += 1;
    }
    assert_eq!(made, ctx.segment_max());
    ctx.barrier(Group::ALL, T).unwrap();
    for s in ctx.segment_list() {
        ctx.segment_delete(s).unwrap();
    }
    ctx.barrier(Group::ALL, T).unwrap();
    for (s, size) in [(0, 2048), (2, 8192), (1, 4096)] {
        create_and_ring(&ctx, SegmentId(s), size);
    }
    for s in [0, 1, 2] {
        delete(&ctx, SegmentId(s));
    }
    // A group id deleted and created again (same id, same members) is a new group.
    for _ in 0..3 {
        let g = ctx.group_create().unwrap();
        for r in 0..ctx.num_ranks() {
            ctx.group_add(g, Rank(r)).unwrap();
        }
        ctx.group_commit(g, T).unwrap();
        let (one, mut sum) = ([1u64], [0u64]);
        ctx.allreduce(&one, &mut sum, ReduceOp::Sum, g, T).unwrap();
        assert_eq!(sum[0], u64::from(ctx.num_ranks()));
        ctx.barrier(g, T).unwrap();
        ctx.group_delete(g).unwrap();
    }
    finish(ctx);
}

spmd_cases! {
    rule09_segment_ids_reused, segment_ids_reused,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), tcp_4 = (4, Tcp), shm_2 = (2, Shm), shm_4 = (4, Shm),
    verbs_3 = (3, FakeVerbs),
}

// Rule 12 and process management: `terminate` on a context shared between threads ends the
// calls blocked in it on the other threads with `Terminated` (GPI-2 programs park a thread
// in a blocking passive_receive and call proc_term from the main thread).
fn term_ends_blocked_calls(ctx: Context) {
    let ctx = std::sync::Arc::new(ctx);
    create(&ctx, S, 4096);
    let receiver = {
        let ctx = ctx.clone();
        std::thread::spawn(move || ctx.passive_receive(S, 0, 64, Timeout::BLOCK))
    };
    let waiter = {
        let ctx = ctx.clone();
        std::thread::spawn(move || ctx.notify_waitsome(S, nid(7), 1, Timeout::BLOCK))
    };
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.terminate(T).unwrap();
    must!(receiver.join().unwrap(), Err(Error::Terminated));
    must!(waiter.join().unwrap(), Err(Error::Terminated));
    // Calls made afterwards fail too, and nothing waits for ever.
    must!(
        ctx.passive_receive(S, 0, 64, Timeout::BLOCK),
        Err(Error::Terminated)
    );
    must!(
        ctx.barrier(Group::ALL, Timeout::BLOCK),
        Err(Error::Terminated)
    );
}

spmd_cases! {
    term_ends_calls_blocked_on_other_threads, term_ends_blocked_calls,
    tcp_2 = (2, Tcp), shm_3 = (3, Shm), verbs_2 = (2, FakeVerbs),
}
