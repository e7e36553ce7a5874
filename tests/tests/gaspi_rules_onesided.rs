//! Rules 6, 10 and 11: bounds, self-communication and atomics.
//! Multi-process tests over TCP, shared memory and the fake verbs device, 1 to 5 ranks; every
//! test ends with a barrier (peers may still access this rank's segments) and `term`.

#[macro_use]
mod common;

use common::*;
use tarantella_tests::spmd_cases;

/// Every one-sided transfer call with these arguments (notification 0, value 1).
fn transfers(ctx: &Context, l: Local, r: Remote, size: u64) -> [Result<()>; 4] {
    [
        ctx.write(l, r, size, Q),
        ctx.read(l, r, size, Q),
        ctx.write_notify(l, r, size, nid(0), 1, Q),
        ctx.read_notify(l, r, size, nid(0), Q),
    ]
}

// Rule 6: out-of-range accesses are rejected before anything is sent.
fn bounds(ctx: Context) {
    const SZ: u64 = 4096;
    let seg = create(&ctx, S, SZ);
    seg.fill(0, SZ, 0xa5).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    for t in [right(&ctx), ctx.rank()] {
        for (off, size) in [(SZ - 7, 8), (SZ, 1), (u64::MAX - 3, 8)] {
            for res in transfers(&ctx, lo(0), at(t, off), size) {
                must!(res, Err(Error::RemoteOutOfBounds { rank, offset, .. }) if rank == t && offset == off);
            }
        }
        for (off, size) in [(SZ - 4, 8), (SZ + 8, 0), (u64::MAX, 2)] {
            for res in transfers(&ctx, lo(off), at(t, 0), size) {
                must!(res, Err(Error::LocalOutOfBounds { offset, .. }) if offset == off);
            }
        }
        for off in [1, 4, 12, 4092] {
            let unaligned =
                |res| must!(res, Err(Error::UnalignedOffset { offset }) if offset == off);
            unaligned(ctx.atomic_fetch_add(S, off, t, 1, T));
            unaligned(ctx.atomic_compare_swap(S, off, t, 0, 1, T));
        }
        for off in [SZ, SZ + 8, u64::MAX - 7] {
            must!(
                ctx.atomic_fetch_add(S, off, t, 1, T),
                Err(Error::RemoteOutOfBounds { .. })
            );
            let res = ctx.atomic_compare_swap(S, off, t, 0, 1, T);
            must!(res, Err(Error::RemoteOutOfBounds { .. }));
        }
    }
    assert_eq!(
        ctx.queue_size(Q).unwrap(),
        0,
        "rejected posts took queue entries"
    );
    ctx.barrier(Group::ALL, T).unwrap();
    check_bytes(&seg, SZ as usize, 0xa5, "segment after rejected accesses");
    let all = ctx.notification_num();
    timed_out(ctx.notify_waitsome(S, nid(0), all, TEST));
    finish(ctx);
}

spmd_cases! {
    rule06_bounds, bounds,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_5 = (5, Tcp), shm_2 = (2, Shm), shm_3 = (3, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

// Rule 10: every operation works with this rank as the target.
fn self_communication(ctx: Context) {
    let seg = create(&ctx, S, 64 * 1024);
    let me = ctx.rank();
    let data = pattern(7, me, 512);
    seg.write(0, &data).unwrap();
    ctx.write(lo(0), at(me, 4096), 4096, Q).unwrap();
    ctx.wait(Q, T).unwrap();
    check_words(&seg, 4096, &data, "write to self");
    ctx.write_notify(lo(0), at(me, 8192), 4096, nid(3), 9, Q)
        .unwrap();
    assert_eq!(take(&ctx, S, 3), 9);
    check_words(&seg, 8192, &data, "write_notify to self");
    ctx.read(lo(12288), at(me, 0), 4096, Q).unwrap();
    ctx.wait(Q, T).unwrap();
    check_words(&seg, 12288, &data, "read from self");
    ctx.read_notify(lo(16384), at(me, 0), 4096, nid(4), Q)
        .unwrap();
    assert_eq!(take(&ctx, S, 4), 1);
    check_words(&seg, 16384, &data, "read_notify from self");
    ctx.notify(S, me, nid(5), 11, Q).unwrap();
    assert_eq!(take(&ctx, S, 5), 11);
    let elems = list(&[(0, 20480), (2048, 22528)], 2048);
    ctx.write_list_notify(me, &elems, S, nid(6), 2, Q).unwrap();
    assert_eq!(take(&ctx, S, 6), 2);
    check_words(&seg, 20480, &data, "write_list_notify to self");
    ctx.wait(Q, T).unwrap();
    let word = 32768;
    for i in 0..10 {
        assert_eq!(ctx.atomic_fetch_add(S, word, me, 1, T).unwrap(), i);
    }
    let cas = |old, new| ctx.atomic_compare_swap(S, word, me, old, new, T).unwrap();
    assert_eq!(cas(3, 99), 10);
    assert_eq!(cas(10, 99), 10);
    assert_eq!(seg.get::<u64>(word).unwrap(), 99);
    ctx.passive_send(S, 0, me, 100, T).unwrap();
    let (from, len) = ctx.passive_receive(S, 40960, 200, T).unwrap();
    assert_eq!((from, len), (me, 100));
    let (mut got, mut want) = ([0u8; 100], [0u8; 100]);
    seg.read(40960, &mut got).unwrap();
    seg.read(0, &mut want).unwrap();
    assert_eq!(got, want, "passive message to self");
    ctx.proc_ping(me, T).unwrap();
    finish(ctx);
}

spmd_cases! {
    rule10_self_communication, self_communication,
    single = (1, Auto), tcp_2 = (2, Tcp), shm_3 = (3, Shm), tcp_5 = (5, Tcp),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs), verbs_5 = (5, FakeVerbs),
}

// Rule 11: atomics on a word are atomic with respect to each other.
fn atomics(ctx: Context) {
    const K: u64 = 100;
    const OLD: u64 = 4096; // our K old values
    const GATHER: u64 = 8192; // on rank 0: everybody's old values
    let seg = create(&ctx, S, GATHER + 5 * K * 8);
    let (me, n, r0) = (ctx.rank(), ctx.num_ranks(), Rank(0));
    let (n64, tag) = (u64::from(n), u64::from(me.0) + 1);
    let add = |rank, off, v| ctx.atomic_fetch_add(S, off, rank, v, T).unwrap();
    let cas = |rank, off, old, new| ctx.atomic_compare_swap(S, off, rank, old, new, T).unwrap();
    // All ranks add 1 to rank 0's word 0: the old values are all distinct.
    let olds: Vec<u64> = (0..K).map(|_| add(r0, 0, 1)).collect();
    seg.write(OLD, &olds).unwrap();
    let (dst, id) = (
        at(r0, GATHER + u64::from(me.0) * K * 8),
        100 + u32::from(me.0),
    );
    ctx.write_notify(lo(OLD), dst, K * 8, nid(id), 1, Q)
        .unwrap();
    if me.0 == 0 {
        for r in 0..n {
            take(&ctx, S, 100 + u32::from(r));
        }
        let mut all = vec![0u64; (n64 * K) as usize];
        seg.read(GATHER, &mut all).unwrap();
        let set: BTreeSet<u64> = all.iter().copied().collect();
        let expect: BTreeSet<u64> = (0..n64 * K).collect();
        assert!(
            set == expect,
            "fetch_add old values are not 0..n*K, each once"
        );
    }
    // Compare-and-swap semantics on the right neighbour's word 8 (only we touch it).
    let r = right(&ctx);
    assert_eq!(cas(r, 8, 5, 7), 0);
    assert_eq!(cas(r, 8, 0, 42), 0);
    assert_eq!(cas(r, 8, 42, 43), 42);
    assert_eq!(add(r, 8, 0), 43);
    // Everybody tries to swap rank 0's word 16 from 0: exactly one wins.
    let won = cas(r0, 16, 0, tag) == 0;
    // A spin lock (word 24 of rank 0) protecting a plain counter (word 32 of rank 0).
    const M: u64 = 20;
    for _ in 0..M {
        while cas(r0, 24, 0, tag) != 0 {
            std::thread::yield_now();
        }
        ctx.read(lo(40), at(r0, 32), 8, Q).unwrap();
        ctx.wait(Q, T).unwrap();
        let c: u64 = seg.get(40).unwrap();
        seg.write(48, &[c + 1]).unwrap();
        ctx.write(lo(48), at(r0, 32), 8, Q).unwrap();
        ctx.wait(Q, T).unwrap();
        assert_eq!(cas(r0, 24, tag, 0), tag, "lock was not held by us");
    }
    ctx.barrier(Group::ALL, T).unwrap();
    assert_eq!(seg.get::<u64>(8).unwrap(), 43);
    assert_eq!(add(r0, 0, 0), n64 * K);
    let (mine, mut sums) = ([u64::from(won), if won { tag } else { 0 }], [0u64; 2]);
    ctx.allreduce(&mine, &mut sums, ReduceOp::Sum, Group::ALL, T)
        .unwrap();
    assert_eq!(
        sums[0], 1,
        "compare_swap from 0 succeeded on {} ranks",
        sums[0]
    );
    assert_eq!(add(r0, 16, 0), sums[1]);
    ctx.read(lo(56), at(r0, 32), 8, Q).unwrap();
    ctx.wait(Q, T).unwrap();
    let counter: u64 = seg.get(56).unwrap();
    assert_eq!(counter, n64 * M, "lock-protected counter lost increments");
    finish(ctx);
}

spmd_cases! {
    rule11_atomics, atomics,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm),
    tcp_5 = (5, Tcp),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

// GASPI resumes a call that timed out when it is called again with the same arguments: an
// atomic retried after `Timeout::TEST` (which over TCP returns before any answer can come
// back) is applied once, not once per try, and a compare-and-swap that won while timing out
// reports its win to the retry. (The fake verbs device applies an atomic as it is posted, so
// there `TEST` never times out: that case checks only the answers.)
fn atomics_retried_after_a_timeout(ctx: Context) {
    const K: u64 = 50;
    const M: u64 = 10;
    let seg = create(&ctx, S, 64);
    let (me, n, r0) = (ctx.rank(), u64::from(ctx.num_ranks()), Rank(0));
    let tag = u64::from(me.0) + 1;
    ctx.barrier(Group::ALL, T).unwrap();
    let retried = |call: &dyn Fn() -> Result<u64>| loop {
        match call() {
            Err(Error::Timeout) => std::thread::yield_now(),
            answer => break answer.unwrap(),
        }
    };
    for _ in 0..K {
        retried(&|| ctx.atomic_fetch_add(S, 0, r0, 1, Timeout::TEST));
    }
    // A spin lock on rank 0's word 8 around a counter (word 16), taken with TEST retries.
    for _ in 0..M {
        loop {
            match retried(&|| ctx.atomic_compare_swap(S, 8, r0, 0, tag, Timeout::TEST)) {
                0 => break,
                held => assert_ne!(held, tag, "a compare-and-swap was applied twice"),
            }
            std::thread::yield_now();
        }
        ctx.atomic_fetch_add(S, 16, r0, 1, T).unwrap();
        let held = retried(&|| ctx.atomic_compare_swap(S, 8, r0, tag, 0, Timeout::TEST));
        assert_eq!(held, tag, "the lock was not ours");
    }
    ctx.barrier(Group::ALL, T).unwrap();
    if me == r0 {
        let word = seg.get::<u64>(0).unwrap();
        assert_eq!(
            word,
            n * K,
            "fetch_add applied {word} times for {} calls",
            n * K
        );
        assert_eq!(seg.get::<u64>(16).unwrap(), n * M);
        assert_eq!(seg.get::<u64>(8).unwrap(), 0);
    }
    finish(ctx);
}

spmd_cases! {
    rule11_atomics_retried_after_a_timeout, atomics_retried_after_a_timeout,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_3 = (3, Shm), verbs_2 = (2, FakeVerbs),
}
