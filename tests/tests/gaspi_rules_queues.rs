//! Rules 3, 4 and 5: local completion, queue capacity (`QUEUE_FULL`) and timeouts.
//! Multi-process tests over TCP, shared memory and the fake verbs device, 1 to 5 ranks; every
//! test ends with a barrier (peers may still access this rank's segments) and `term`.

#[macro_use]
mod common;

use common::*;
use tarantella_tests::spmd_cases;

// Rule 3: after `wait`, write sources may be reused and read destinations are filled.
fn local_completion(ctx: Context) {
    let seg = create(&ctx, S, 3 * MIB);
    let (me, r, l) = (ctx.rank(), right(&ctx), left(&ctx));
    let words = (MIB / 8) as usize;
    seg.write(0, &pattern(1, me, words)).unwrap();
    ctx.write(lo(0), at(r, MIB), MIB, Q).unwrap();
    ctx.wait(Q, T).unwrap();
    seg.write(0, &pattern(2, me, words)).unwrap(); // reuse the source
    ctx.notify(S, r, nid(0), 1, Q).unwrap();
    take(&ctx, S, 0);
    let what = "write whose source was overwritten after wait";
    check_words(&seg, MIB, &pattern(1, l, words), what);
    ctx.barrier(Group::ALL, T).unwrap(); // every [0, MIB) now holds pattern 2
    let quarter = MIB / 4;
    for c in 0..4 {
        ctx.read(lo(2 * MIB + c * quarter), at(r, c * quarter), quarter, Q)
            .unwrap();
    }
    ctx.wait(Q, T).unwrap();
    check_words(&seg, 2 * MIB, &pattern(2, r, words), "read after wait");
    finish(ctx);
}

spmd_cases! {
    rule03_local_completion, local_completion,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_2 = (2, Shm), shm_5 = (5, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

// Rule 4: posting past queue_size_max fails with QueueFull and posts nothing; write_notify and
// read_notify count 2 entries; `wait` empties the queue.
fn queue_capacity(ctx: Context) {
    let _seg = create(&ctx, S, 4096);
    let r = right(&ctx);
    assert_eq!(ctx.queue_size_max(), 8);
    let w = |i: u64| ctx.write(lo(8 * i), at(r, 1024 + 8 * i), 8, Q);
    let wn = || ctx.write_notify(lo(0), at(r, 2048), 8, nid(1), 1, Q);
    let rn = || ctx.read_notify(lo(3072), at(r, 0), 8, nid(2), Q);
    let size = || ctx.queue_size(Q).unwrap();
    let full = |res: Result<()>, n: u32| {
        must!(res, Err(Error::QueueFull { queue: Q, entries, max: 8 }) if entries == n);
        assert_eq!(size(), n, "a rejected post took entries");
    };
    for i in 0..8 {
        w(i).unwrap();
        assert_eq!(size(), i as u32 + 1);
    }
    full(w(8), 8);
    full(ctx.notify(S, r, nid(0), 1, Q), 8);
    ctx.write(lo(0), at(r, 0), 8, QueueId(1)).unwrap(); // another queue has room
    assert_eq!(ctx.queue_size(QueueId(1)).unwrap(), 1);
    ctx.wait(Q, T).unwrap();
    assert_eq!(size(), 0);
    for i in 1..=4 {
        wn().unwrap();
        assert_eq!(size(), 2 * i);
    }
    full(wn(), 8);
    ctx.wait(Q, T).unwrap();
    for i in 0..7 {
        w(i).unwrap();
    }
    full(wn(), 7); // needs 2 entries, only 1 is left
    full(rn(), 7);
    w(7).unwrap();
    ctx.wait(Q, T).unwrap();
    rn().unwrap();
    assert_eq!(size(), 2);
    assert_eq!(take(&ctx, S, 2), 1);
    ctx.wait(Q, T).unwrap();
    ctx.wait(QueueId(1), T).unwrap();
    assert_eq!(size(), 0);
    finish(ctx);
}

cases_with! {
    rule04_queue_capacity, Config { queue_size_max: 8, ..Default::default() }, queue_capacity,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_2 = (2, Shm), shm_4 = (4, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

/// Calls `f` with a 20 ms timeout until it succeeds.
fn retry(mut f: impl FnMut(Timeout) -> Result<()>) {
    for calls in 1.. {
        match f(Timeout::ms(20)) {
            Ok(()) => return,
            Err(Error::Timeout) => {}
            Err(e) => panic!("call {calls} failed: {e:?}"),
        }
    }
}

// Rule 5: TEST checks once, N ms waits about N ms, and a timed-out barrier/allreduce resumes.
fn timeouts(ctx: Context) {
    let _seg = create(&ctx, S, 4096);
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let t0 = Instant::now();
    timed_out(ctx.notify_waitsome(S, nid(10), 4, TEST));
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "TEST waited {took:?}");
    let t0 = Instant::now();
    timed_out(ctx.notify_waitsome(S, nid(10), 4, Timeout::ms(50)));
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(50),
        "50 ms timeout after {took:?}"
    );
    timed_out(ctx.passive_receive(S, 0, 64, TEST));
    ctx.wait(Q, TEST).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    let input = [u64::from(me.0) + 1, 100];
    let mut out = [0u64; 2];
    let (all, sum) = (Group::ALL, ReduceOp::Sum);
    if me.0 == 0 {
        // The others enter the barrier only after we have timed out in it once.
        let t0 = Instant::now();
        timed_out(ctx.barrier(all, MS20));
        assert!(t0.elapsed() >= Duration::from_millis(20));
        for r in 1..n {
            ctx.notify(S, Rank(r), nid(0), 1, Q).unwrap();
        }
        retry(|t| ctx.barrier(all, t));
        timed_out(ctx.allreduce(&input, &mut out, sum, all, MS20));
        for r in 1..n {
            ctx.notify(S, Rank(r), nid(1), 1, Q).unwrap();
        }
        retry(|t| ctx.allreduce(&input, &mut out, sum, all, t));
    } else {
        take(&ctx, S, 0);
        ctx.barrier(all, T).unwrap();
        take(&ctx, S, 1);
        ctx.allreduce(&input, &mut out, sum, all, T).unwrap();
    }
    let n64 = u64::from(n);
    assert_eq!(out, [n64 * (n64 + 1) / 2, 100 * n64]);
    for _ in 0..3 {
        ctx.barrier(all, T).unwrap();
        let (mine, mut max) = ([u32::from(me.0)], [0u32]);
        let max_op = ReduceOp::Max;
        ctx.allreduce(&mine, &mut max, max_op, all, T).unwrap();
        assert_eq!(max[0], u32::from(n) - 1);
    }
    ctx.wait(Q, T).unwrap();
    finish(ctx);
}

spmd_cases! {
    rule05_timeouts, timeouts,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs), verbs_5 = (5, FakeVerbs),
}
