//! Rules 1, 2, 7 and 8 of `shared/design/gaspi-semantics.md`: notification values, data before notification, zero sizes, and `read_notify`.
//! Multi-process tests over TCP, shared memory and the fake verbs device, 1 to 5 ranks; every
//! test ends with a barrier (peers may still access this rank's segments) and `term`.

#[macro_use]
mod common;

use common::*;
use tarantella_tests::spmd_cases;

// Rule 1: notification values are non-zero; waitsome finds the lowest set id without resetting
// it; reset swaps to 0 atomically.
fn notifications(ctx: Context) {
    let _seg = create(&ctx, S, 4096);
    let (r, from) = (right(&ctx), u32::from(left(&ctx).0));
    let me = u32::from(ctx.rank().0);
    must!(
        ctx.notify(S, r, nid(3), 0, Q),
        Err(Error::ZeroNotificationValue)
    );
    must!(
        ctx.write_notify(lo(0), at(r, 0), 8, nid(3), 0, Q),
        Err(Error::ZeroNotificationValue)
    );
    ctx.notify(S, r, nid(7), 70 + me, Q).unwrap();
    ctx.notify(S, r, nid(3), 30 + me, Q).unwrap();
    assert_eq!(ctx.notify_waitsome(S, nid(7), 1, T).unwrap(), nid(7));
    assert_eq!(ctx.notify_waitsome(S, nid(3), 1, T).unwrap(), nid(3));
    for _ in 0..2 {
        assert_eq!(ctx.notify_waitsome(S, nid(0), 16, T).unwrap(), nid(3));
    }
    assert_eq!(ctx.notify_waitsome(S, nid(4), 12, T).unwrap(), nid(7));
    assert_eq!(ctx.notify_reset(S, nid(3)).unwrap(), 30 + from);
    assert_eq!(ctx.notify_reset(S, nid(3)).unwrap(), 0);
    assert_eq!(ctx.notify_waitsome(S, nid(0), 16, T).unwrap(), nid(7));
    assert_eq!(ctx.notify_reset(S, nid(7)).unwrap(), 70 + from);
    timed_out(ctx.notify_waitsome(S, nid(0), 16, TEST));
    ctx.wait(Q, T).unwrap();
    // Two threads race to reset the same slot: exactly one sees the value.
    let id = nid(20);
    for i in 1..=200u32 {
        ctx.notify(S, ctx.rank(), id, i, Q).unwrap();
        ctx.notify_waitsome(S, id, 1, T).unwrap();
        let gate = std::sync::Barrier::new(2);
        let reset = || {
            gate.wait();
            ctx.notify_reset(S, id).unwrap()
        };
        let seen = std::thread::scope(|s| {
            let (a, b) = (s.spawn(reset), s.spawn(reset));
            [a.join().unwrap(), b.join().unwrap()]
        });
        let winners = seen.iter().filter(|v| **v != 0).count();
        assert_eq!(winners, 1, "round {i}: resets returned {seen:?}");
        assert_eq!(seen.iter().sum::<u32>(), i, "round {i}: {seen:?}");
    }
    ctx.wait(Q, T).unwrap();
    finish(ctx);
}

spmd_cases! {
    rule01_notifications, notifications,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_2 = (2, Shm), shm_4 = (4, Shm),
    shm_5 = (5, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

// Rule 2: a target that sees the notification sees all data written before it on that queue.
fn data_before_notification(ctx: Context) {
    let seg = create(&ctx, S, 2 * MIB);
    let (me, r, l) = (ctx.rank(), right(&ctx), left(&ctx));
    let (words, quarter) = ((MIB / 8) as usize, MIB / 4);
    for iter in 0..6u64 {
        let q = QueueId((iter % 3) as u8);
        let value = iter as u32 + 1;
        seg.write(0, &pattern(iter + 1, me, words)).unwrap();
        match iter % 3 {
            0 => ctx
                .write_notify(lo(0), at(r, MIB), MIB, nid(0), value, q)
                .unwrap(),
            1 => {
                ctx.write(lo(0), at(r, MIB), MIB, q).unwrap();
                ctx.notify(S, r, nid(0), value, q).unwrap();
            }
            _ => {
                for c in 0..4 {
                    let off = c * quarter;
                    ctx.write(lo(off), at(r, MIB + off), quarter, q).unwrap();
                }
                ctx.notify(S, r, nid(0), value, q).unwrap();
            }
        }
        assert_eq!(take(&ctx, S, 0), value);
        let what = format!("iteration {iter}: data from rank {l} after its notification");
        check_words(&seg, MIB, &pattern(iter + 1, l, words), &what);
        ctx.notify(S, l, nid(1), 1, q).unwrap(); // our receive buffer is free again
        take(&ctx, S, 1);
        ctx.wait(q, T).unwrap();
    }
    finish(ctx);
}

spmd_cases! {
    rule02_data_before_notification, data_before_notification,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm), tcp_5 = (5, Tcp),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

// Rule 7 (as GPI-2 has it since 1.5, `GASPI_MIN_TSIZE_C` 0, and as the design note says):
// a zero-size write or read completes and moves nothing, to any rank including this one;
// a zero-size write_notify is the notification alone and a zero-size read_notify sets its
// local notification; list elements of size 0 are skipped. Each takes its queue entries.
fn zero_sizes(ctx: Context) {
    let seg = create(&ctx, S, 4096);
    seg.fill(0, 4096, 0x11).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    let (me, r) = (ctx.rank(), right(&ctx));
    assert_eq!(ctx.transfer_size_min(), 0);
    for rank in [r, me] {
        ctx.write(lo(0), at(rank, 8), 0, Q).unwrap();
        ctx.write(lo(4096), at(rank, 4096), 0, Q).unwrap();
        ctx.read(lo(16), at(rank, 0), 0, Q).unwrap();
    }
    assert_eq!(ctx.queue_size(Q).unwrap(), 6, "each took its entry");
    // Past the end is still refused, size 0 or not.
    assert!(matches!(
        ctx.write(lo(4097), at(r, 0), 0, Q),
        Err(Error::LocalOutOfBounds { .. })
    ));
    ctx.write_notify(lo(0), at(r, 0), 0, nid(3), 7, Q).unwrap();
    assert_eq!(take(&ctx, S, 3), 7, "the left neighbour's notification");
    ctx.read_notify(lo(0), at(r, 0), 0, nid(4), Q).unwrap();
    assert_eq!(take(&ctx, S, 4), 1, "the zero-size read's own notification");
    let empty = ListElem {
        local: lo(0),
        remote_segment: S,
        remote_offset: 0,
        size: 0,
    };
    let one = ListElem {
        local: lo(64),
        remote_segment: S,
        remote_offset: 128 + 8 * me.0 as u64,
        size: 8,
    };
    ctx.write_list(r, &[empty, empty], Q).unwrap();
    ctx.read_list(r, &[empty], Q).unwrap();
    ctx.read_list_notify(r, &[empty, empty], S, nid(6), Q)
        .unwrap();
    assert_eq!(take(&ctx, S, 6), 1);
    ctx.wait(Q, T).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    check_bytes(&seg, 4096, 0x11, "segment after zero-size ops");
    ctx.barrier(Group::ALL, T).unwrap();
    // A list mixing empty and non-empty elements moves the non-empty ones.
    seg.fill(64, 8, 0x22).unwrap();
    ctx.write_list_notify(r, &[empty, one, empty], S, nid(5), 1, Q)
        .unwrap();
    assert_eq!(take(&ctx, S, 5), 1);
    let mut got = [0u8; 8];
    seg.read(128 + 8 * u64::from(left(&ctx).0), &mut got)
        .unwrap();
    assert_eq!(
        got, [0x22; 8],
        "the non-empty element of the left neighbour's list"
    );
    ctx.wait(Q, T).unwrap();
    // Waiting for zero notifications finds none, so there is no id to return: refused at
    // once, even with BLOCK (the C call returns success and leaves `first_id` alone).
    must!(
        ctx.notify_waitsome(S, nid(5), 0, Timeout::BLOCK),
        Err(Error::InvalidNumber(_))
    );
    finish(ctx);
}

spmd_cases! {
    rule07_zero_sizes, zero_sizes,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

// Rule 8: read_notify sets the *local* notification to 1 once the data is there.
fn read_notify_local(ctx: Context) {
    let seg = create(&ctx, S, 2 * MIB);
    let (me, r) = (ctx.rank(), right(&ctx));
    let len = MIB / 4;
    let words = (len / 8) as usize;
    for iter in 0..4u64 {
        seg.write(0, &pattern(iter + 1, me, words)).unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        let (id, q) = (2 + (iter % 2) as u32, QueueId((iter % 2) as u8));
        ctx.read_notify(lo(MIB), at(r, 0), len, nid(id), q).unwrap();
        assert_eq!(take(&ctx, S, id), 1); // no wait: the notification alone says "arrived"
        let what = format!("iteration {iter}: read_notify data when its notification is set");
        check_words(&seg, MIB, &pattern(iter + 1, r, words), &what);
        ctx.wait(q, T).unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
    }
    let elems = list(&[(MIB, 0), (MIB + 3 * 4096, 3 * 4096)], 4096);
    ctx.read_list_notify(r, &elems, S, nid(5), Q).unwrap();
    assert_eq!(take(&ctx, S, 5), 1);
    let expect = pattern(4, r, words);
    check_words(&seg, MIB, &expect[..512], "read_list_notify element 0");
    check_words(
        &seg,
        MIB + 3 * 4096,
        &expect[1536..2048],
        "read_list_notify element 1",
    );
    ctx.wait(Q, T).unwrap();
    // Only rank 0 reads (from rank 1): nobody else's notifications get set.
    ctx.barrier(Group::ALL, T).unwrap();
    if me.0 == 0 {
        ctx.read_notify(lo(MIB), at(r, 0), 64, nid(6), Q).unwrap();
        assert_eq!(take(&ctx, S, 6), 1);
        ctx.wait(Q, T).unwrap();
    }
    ctx.barrier(Group::ALL, T).unwrap();
    timed_out(ctx.notify_waitsome(S, nid(0), 16, TEST));
    finish(ctx);
}

spmd_cases! {
    rule08_read_notify, read_notify_local,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_2 = (2, Shm), shm_5 = (5, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}
