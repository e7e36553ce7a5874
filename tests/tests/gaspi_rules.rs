//! The twelve rules of `shared/design/gaspi-semantics.md`, each pinned down by multi-process
//! tests over TCP and shared memory with 1 to 5 ranks, plus the small allreduce, the state
//! vector and `proc_ping`. Every test ends with a barrier (peers may still access this rank's
//! segments) and `term`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gaspi::*;
use tarantella_tests::spmd_cases;

const T: Timeout = Timeout::ms(20_000);
const S: SegmentId = SegmentId(0);
const Q: QueueId = QueueId(0);
const MIB: u64 = 1 << 20;
const TEST: Timeout = Timeout::TEST;
const MS20: Timeout = Timeout::ms(20);

/// Like `spmd_cases!`, with an explicit [`Config`].
macro_rules! cases_with {
    ($name:ident, $config:expr, $body:expr, $($case:ident = ($n:expr, $t:ident)),+ $(,)?) => {
        mod $name {
            use super::*;
            $(
                #[test]
                fn $case() {
                    gaspi::testing::spmd_with(
                        concat!(stringify!($name), "::", stringify!($case)),
                        $n,
                        gaspi::env::TransportChoice::$t,
                        $config,
                        Duration::from_secs(60),
                        $body,
                    );
                }
            )+
        }
    };
}

/// Asserts that `res` matches `pat`, printing the call and what it returned otherwise.
macro_rules! must {
    ($res:expr, $pat:pat $(if $guard:expr)?) => {{
        let res = $res;
        assert!(matches!(res, $pat $(if $guard)?), "{}: {res:?}", stringify!($res));
    }};
}

#[track_caller]
fn timed_out<V: std::fmt::Debug>(res: Result<V>) {
    assert!(
        matches!(res, Err(Error::Timeout)),
        "expected a timeout: {res:?}"
    );
}

fn right(ctx: &Context) -> Rank {
    Rank((ctx.rank().0 + 1) % ctx.num_ranks())
}

fn left(ctx: &Context) -> Rank {
    Rank((ctx.rank().0 + ctx.num_ranks() - 1) % ctx.num_ranks())
}

fn nid(id: u32) -> NotificationId {
    NotificationId(id)
}

/// Byte `off` of local segment 0.
fn lo(off: u64) -> Local {
    Local::new(S, off)
}

/// Byte `off` of `rank`'s segment 0.
fn at(rank: Rank, off: u64) -> Remote {
    Remote::new(rank, S, off)
}

/// Creates segment `seg` of `size` bytes on every rank and returns the local handle.
fn create(ctx: &Context, seg: SegmentId, size: u64) -> Segment {
    let init = Alloc::Initialized;
    ctx.segment_create(seg, size, Group::ALL, T, init).unwrap();
    ctx.segment(seg).unwrap()
}

fn finish(ctx: Context) {
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.term(T).unwrap();
}

/// Waits for notification `id` of `seg`, resets it and returns its (non-zero) value.
fn take(ctx: &Context, seg: SegmentId, id: u32) -> u32 {
    assert_eq!(ctx.notify_waitsome(seg, nid(id), 1, T).unwrap(), nid(id));
    let v = ctx.notify_reset(seg, nid(id)).unwrap();
    assert_ne!(v, 0, "notification {id} was seen set but reset returned 0");
    v
}

/// `words` u64s that differ per tag (iteration), rank and position.
fn pattern(tag: u64, rank: Rank, words: usize) -> Vec<u64> {
    let base = (tag << 48) | (u64::from(rank.0) << 32);
    (0..words as u64).map(|i| base | i).collect()
}

fn check_words(seg: &Segment, off: u64, expect: &[u64], what: &str) {
    let mut got = vec![0u64; expect.len()];
    seg.read(off, &mut got).unwrap();
    if let Some(i) = got.iter().zip(expect).position(|(a, b)| a != b) {
        let (g, e) = (got[i], expect[i]);
        panic!(
            "{what}: word {i} of {} is {g:#x}, expected {e:#x}",
            expect.len()
        );
    }
}

fn check_bytes(seg: &Segment, len: usize, byte: u8, what: &str) {
    let mut got = vec![0u8; len];
    seg.read(0, &mut got).unwrap();
    if let Some(i) = got.iter().position(|b| *b != byte) {
        panic!("{what}: byte {i} is {:#x}, expected {byte:#x}", got[i]);
    }
}

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
}

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
}

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
}

// Rule 7: zero-size ops complete; zero-size write_notify notifies, read_notify notifies locally.
fn zero_sizes(ctx: Context) {
    let seg = create(&ctx, S, 4096);
    seg.fill(0, 4096, 0x11).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    let r = right(&ctx);
    ctx.write(lo(0), at(r, 8), 0, Q).unwrap();
    ctx.write(lo(4096), at(r, 4096), 0, Q).unwrap(); // an empty range at the very end
    ctx.read(lo(16), at(r, 0), 0, Q).unwrap();
    ctx.wait(Q, T).unwrap();
    ctx.write_notify(lo(0), at(r, 0), 0, nid(3), 7, Q).unwrap();
    assert_eq!(take(&ctx, S, 3), 7);
    ctx.read_notify(lo(0), at(r, 0), 0, nid(4), Q).unwrap();
    assert_eq!(take(&ctx, S, 4), 1);
    ctx.wait(Q, T).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    check_bytes(&seg, 4096, 0x11, "segment after zero-size ops");
    finish(ctx);
}

spmd_cases! {
    rule07_zero_sizes, zero_sizes,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm),
}

fn list(offsets: &[(u64, u64)], size: u64) -> Vec<ListElem> {
    let elem = |&(local, remote)| ListElem {
        local: lo(local),
        remote_segment: S,
        remote_offset: remote,
        size,
    };
    offsets.iter().map(elem).collect()
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
}

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
    }
    finish(ctx);
}

spmd_cases! {
    rule12_passive, passive,
    tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm),
}

fn combine<T: Reducible>(op: ReduceOp, acc: T, x: T) -> T {
    match op {
        ReduceOp::Sum => Reducible::add(acc, x),
        ReduceOp::Min if x < acc => x,
        ReduceOp::Max if x > acc => x,
        _ => acc,
    }
}

/// Allreduce of `len` elements of `T` with `op`; values are small integers, so every order
/// of combination gives the same bits.
fn reduce_one<T: Reducible + std::fmt::Debug>(ctx: &Context, conv: fn(i64) -> T, len: usize) {
    let val = |r: i64, j: i64| conv((r * 7 + j * 3) % 41 - 20);
    let (me, n) = (i64::from(ctx.rank().0), i64::from(ctx.num_ranks()));
    let input: Vec<T> = (0..len as i64).map(|j| val(me, j)).collect();
    for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max] {
        let mut out = vec![conv(0); len];
        ctx.allreduce(&input, &mut out, op, Group::ALL, T).unwrap();
        for (j, got) in (0..).zip(&out) {
            let expect = (1..n).fold(val(0, j), |acc, r| combine(op, acc, val(r, j)));
            let ty = std::any::type_name::<T>();
            assert_eq!(*got, expect, "{op:?} of {len} {ty} at {j}");
        }
    }
}

/// User reduction: element = (value u32, rank u32); keeps the larger value, the lower rank on ties.
fn maxloc(a: &[u8], b: &[u8], out: &mut [u8]) -> Result<()> {
    let word = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().unwrap());
    for e in (0..a.len()).step_by(8) {
        let (va, ra, vb, rb) = (word(a, e), word(a, e + 4), word(b, e), word(b, e + 4));
        let pick = if vb > va || (vb == va && rb < ra) {
            b
        } else {
            a
        };
        out[e..e + 8].copy_from_slice(&pick[e..e + 8]);
    }
    Ok(())
}

fn collectives_and_info(ctx: Context) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    for len in [1, 255] {
        reduce_one::<i32>(&ctx, |v| v as i32, len);
        reduce_one::<u32>(&ctx, |v| (v + 20) as u32, len);
        reduce_one::<f32>(&ctx, |v| v as f32, len);
        reduce_one::<f64>(&ctx, |v| v as f64 * 0.5, len);
        reduce_one::<i64>(&ctx, |v| v * 1_000_000_007, len);
        reduce_one::<u64>(&ctx, |v| (v + 20) as u64 * (1 << 40), len);
    }
    for len in [10usize, 255] {
        let bytes = |r: u16| -> Vec<u8> {
            let elem = |j: u32| [(u32::from(r) * 13 + j * 5) % 7, u32::from(r)];
            let words: Vec<u32> = (0..len as u32).flat_map(elem).collect();
            words.iter().flat_map(|w| w.to_ne_bytes()).collect()
        };
        let mut out = vec![0u8; len * 8];
        let all = Group::ALL;
        ctx.allreduce_user(&bytes(me.0), &mut out, 8, &mut maxloc, all, T)
            .unwrap();
        let mut expect = bytes(0);
        for r in 1..n {
            let mut next = vec![0u8; len * 8];
            maxloc(&expect, &bytes(r), &mut next).unwrap();
            expect = next;
        }
        assert!(
            out == expect,
            "allreduce_user maxloc of {len} elements differs"
        );
    }
    assert_eq!(ctx.state_vec(), vec![PeerState::Healthy; usize::from(n)]);
    for r in 0..n {
        ctx.proc_ping(Rank(r), T).unwrap();
    }
    finish(ctx);
}

spmd_cases! {
    collectives, collectives_and_info,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm),
}
