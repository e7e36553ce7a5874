//! The small allreduce, the state vector and the info calls.
//! Multi-process tests over TCP, shared memory and the fake verbs device, 1 to 5 ranks; every
//! test ends with a barrier (peers may still access this rank's segments) and `term`.

#[macro_use]
mod common;

use common::*;
use tarantella_tests::spmd_cases;

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
    // One host, whatever the transport: every rank on host 0.
    assert_eq!(ctx.topology().num_hosts(), 1);
    assert_eq!(ctx.topology().host_of(me), Some(0));
    let all: Vec<Rank> = (0..n).map(Rank).collect();
    assert_eq!(ctx.group_hosts(Group::ALL).unwrap(), [all]);
    for r in 0..n {
        ctx.proc_ping(Rank(r), T).unwrap();
    }
    finish(ctx);
}

spmd_cases! {
    collectives, collectives_and_info,
    single = (1, Auto), tcp_2 = (2, Tcp), tcp_3 = (3, Tcp), shm_4 = (4, Shm), shm_5 = (5, Shm),
    verbs_2 = (2, FakeVerbs), verbs_3 = (3, FakeVerbs),
}

/// Several threads on one group: their collectives run one after the other (each call
/// waits for the other thread's, as GPI-2's group lock makes them). A different collective
/// than one that timed out is refused with `ActiveCollective` until that one is resumed.
fn threads_on_one_group(ctx: Context) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    create(&ctx, S, 4096);
    ctx.barrier(Group::ALL, T).unwrap();
    let sum = i64::from(n) * (i64::from(n) + 1) / 2;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..50 {
                    ctx.barrier(Group::ALL, T).unwrap();
                }
            });
        }
    });
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..50 {
                    let mut out = [0i64; 3];
                    let mine = [i64::from(me.0) + 1; 3];
                    ctx.allreduce(&mine, &mut out, ReduceOp::Sum, Group::ALL, T)
                        .unwrap();
                    assert_eq!(out, [sum; 3]);
                }
            });
        }
    });
    // Rank 0 enters an allreduce alone: it times out, and a barrier is refused until the
    // allreduce has been called again and finished.
    let mut out = [0i64; 1];
    if me.0 == 0 {
        let r = ctx.allreduce(&[1], &mut out, ReduceOp::Sum, Group::ALL, Timeout::TEST);
        assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
        let r = ctx.barrier(Group::ALL, Timeout::TEST);
        assert!(matches!(r, Err(Error::ActiveCollective)), "{r:?}");
        for peer in 1..n {
            ctx.notify(S, Rank(peer), nid(1), 1, Q).unwrap();
        }
        ctx.wait(Q, T).unwrap();
    } else {
        take(&ctx, S, 1);
    }
    ctx.allreduce(&[1], &mut out, ReduceOp::Sum, Group::ALL, T)
        .unwrap();
    assert_eq!(out, [i64::from(n)]);
    finish(ctx);
}

spmd_cases! {
    threads, threads_on_one_group,
    tcp_3 = (3, Tcp), shm_4 = (4, Shm), verbs_3 = (3, FakeVerbs),
}

/// `group_add` after `group_commit`, as GPI-2 allows: a group grows one rank at a time,
/// `{0}`, `{0, 1}`, ..., rank k joining at step k with the same group id. Before each new
/// commit the group refuses collectives with `GroupChanged`; after it, they work on every
/// member (a rank's commits are counted per peer, so newcomers and old members agree).
fn group_grows_after_commit(ctx: Context) {
    let (me, n) = (ctx.rank().0, ctx.num_ranks());
    let g = ctx.group_create().unwrap();
    for r in 0..=me {
        ctx.group_add(g, Rank(r)).unwrap();
    }
    for step in me..n {
        if step > me {
            ctx.group_add(g, Rank(step)).unwrap();
            let res = ctx.barrier(g, T);
            assert!(
                matches!(res, Err(Error::GroupChanged { group }) if group == g.0),
                "{res:?}"
            );
        }
        ctx.group_commit(g, T).unwrap();
        ctx.barrier(g, T).unwrap();
        let mut sum = [0u64];
        ctx.allreduce(&[u64::from(me) + 1], &mut sum, ReduceOp::Sum, g, T)
            .unwrap();
        let k = u64::from(step) + 1;
        assert_eq!(sum[0], k * (k + 1) / 2, "step {step}");
        assert_eq!(ctx.group_size(g).unwrap(), u32::from(step) + 1);
    }
    ctx.group_delete(g).unwrap();
    finish(ctx);
}

spmd_cases! {
    groups_grow, group_grows_after_commit,
    tcp_3 = (3, Tcp), shm_4 = (4, Shm), verbs_3 = (3, FakeVerbs),
}

/// GPI-2's configuration edges, honoured by the runtime: a 1,000,000-element allreduce of
/// doubles (in rounds of the round buffer), 255 groups, and notification ids up to twice the
/// default number.
fn config_edges(ctx: Context) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    const ELEMS: usize = 1_000_000;
    assert_eq!(ctx.allreduce_elem_max() as usize, ELEMS);
    let input: Vec<f64> = (0..ELEMS).map(|i| (i + usize::from(me.0)) as f64).collect();
    let mut out = vec![0f64; ELEMS];
    ctx.allreduce(&input, &mut out, ReduceOp::Sum, Group::ALL, T)
        .unwrap();
    let ranks = f64::from(n) * f64::from(n - 1) / 2.0;
    for (i, v) in out.iter().enumerate() {
        assert_eq!(*v, i as f64 * f64::from(n) + ranks, "element {i}");
    }
    let mut made = 1; // GROUP_ALL
    while ctx.group_create().is_ok() {
        made += 1;
    }
    assert_eq!((made, ctx.group_num()), (255, 255));
    let last = Group(254);
    for r in 0..n {
        ctx.group_add(last, Rank(r)).unwrap();
    }
    ctx.group_commit(last, T).unwrap();
    ctx.barrier(last, T).unwrap();
    assert_eq!(ctx.notification_num(), 2 * 65536);
    create(&ctx, S, 4096);
    let id = ctx.notification_num() - 1;
    ctx.write_notify(lo(0), at(right(&ctx), 8), 8, nid(id), 3, Q)
        .unwrap();
    assert_eq!(take(&ctx, S, id), 3);
    ctx.wait(Q, T).unwrap();
    finish(ctx);
}

fn config_edges_case(name: &str, n: u16, t: gaspi::env::TransportChoice) {
    let config = Config {
        allreduce_elem_max: 1_000_000,
        group_max: 255,
        notification_num: 2 * 65536,
        ..Config::default()
    };
    gaspi::testing::spmd_with(
        name,
        n,
        t,
        config,
        std::time::Duration::from_secs(60),
        config_edges,
    );
}

#[test]
fn config_edges_are_honoured_tcp_3() {
    config_edges_case(
        "config_edges_are_honoured_tcp_3",
        3,
        gaspi::env::TransportChoice::Tcp,
    );
}

#[test]
fn config_edges_are_honoured_shm_2() {
    config_edges_case(
        "config_edges_are_honoured_shm_2",
        2,
        gaspi::env::TransportChoice::Shm,
    );
}
