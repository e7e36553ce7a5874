//! Life-cycle behaviour of the collectives across real rank processes: overlapping
//! collectives started in different orders, the driver thread, timeouts that resume,
//! subgroups, broadcasts from every root, and clear errors for bad setups.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::Duration;

use allreduce::{Algorithm, Allreduce, Broadcast, Driver, Error, Options, Reduction};
use common::{assert_same_everywhere, fingerprint, ran_with_a_dying_last_rank, spmd, LONG};
use gaspi::env::TransportChoice::{Shm, Tcp};
use gaspi::{Context, Group, Rank, Timeout};

/// Several collectives in flight at once, started and waited in a different order on
/// each rank, with fresh input every round.
fn overlapping(ctx: Arc<Context>) {
    let me = ctx.rank().0 as usize;
    let p = ctx.num_ranks() as usize;
    let sizes = [3usize, 5000, 70_000, 300_000];
    let algs = [
        Algorithm::RecursiveDoubling,
        Algorithm::Rabenseifner,
        Algorithm::Ring,
        Algorithm::Ring,
    ];
    let mut colls: Vec<Allreduce<i64>> = sizes
        .iter()
        .zip(algs)
        .map(|(&n, algorithm)| {
            let o = Options {
                algorithm,
                chunk_bytes: Some(16 << 10),
                ..Options::default()
            };
            Allreduce::new(&ctx, Group::ALL, n, Reduction::Sum, o).unwrap()
        })
        .collect();
    for round in 0..5usize {
        let mut order: Vec<usize> = (0..colls.len()).collect();
        order.rotate_left((me + round) % colls.len());
        if me % 2 == 1 {
            order.reverse();
        }
        for &c in &order {
            let buf = colls[c].input_mut().unwrap();
            for (j, x) in buf.iter_mut().enumerate() {
                *x = (me * 1_000_000 + j + round * 7) as i64;
            }
            colls[c].start().unwrap();
        }
        order.rotate_left(1);
        for &c in &order {
            let out = colls[c].wait(LONG).unwrap();
            for (j, x) in out.iter().enumerate() {
                let want: usize = (0..p).map(|r| r * 1_000_000 + j + round * 7).sum();
                assert_eq!(*x, want as i64, "collective {c} round {round} element {j}");
            }
        }
    }
}

#[test]
fn overlapping_collectives_in_any_order_tcp_3() {
    spmd(
        "overlapping_collectives_in_any_order_tcp_3",
        3,
        Tcp,
        overlapping,
    );
}

#[test]
fn overlapping_collectives_in_any_order_shm_4() {
    spmd(
        "overlapping_collectives_in_any_order_shm_4",
        4,
        Shm,
        overlapping,
    );
}

/// With a driver thread, `test` only looks and the run completes without the caller.
fn driver_thread(ctx: Arc<Context>) {
    let p = ctx.num_ranks() as f32;
    let o = Options {
        driver: Driver::Thread,
        chunk_bytes: Some(8 << 10),
        ..Options::default()
    };
    let mut ar = Allreduce::<f32>::new(&ctx, Group::ALL, 100_000, Reduction::Avg, o).unwrap();
    for round in 0..4 {
        ar.input_mut()
            .unwrap()
            .fill(round as f32 + ctx.rank().0 as f32);
        ar.start().unwrap();
        let out = ar.wait(LONG).unwrap();
        let want = round as f32 + (p - 1.0) / 2.0;
        assert!(
            out.iter().all(|x| (*x - want).abs() < 1e-5),
            "round {round}"
        );
        assert!(ar.test().unwrap());
    }
}

#[test]
fn driver_thread_runs_collectives_tcp_2() {
    spmd(
        "driver_thread_runs_collectives_tcp_2",
        2,
        Tcp,
        driver_thread,
    );
}

#[test]
fn driver_thread_runs_collectives_shm_3() {
    spmd(
        "driver_thread_runs_collectives_shm_3",
        3,
        Shm,
        driver_thread,
    );
}

/// The last rank joins late: the others' waits time out, then resume and complete.
fn late_rank(ctx: Arc<Context>) {
    let last = ctx.num_ranks() - 1;
    for algorithm in [Algorithm::Ring, Algorithm::RecursiveDoubling] {
        let o = Options {
            algorithm,
            ..Options::default()
        };
        let mut ar = Allreduce::<u64>::new(&ctx, Group::ALL, 4096, Reduction::Max, o).unwrap();
        ar.input_mut().unwrap().fill(u64::from(ctx.rank().0));
        if ctx.rank().0 != last {
            ar.start().unwrap();
            assert!(!ar.test().unwrap());
            assert!(matches!(ar.start(), Err(Error::InFlight)));
            assert!(
                matches!(ar.input_mut(), Err(Error::InFlight)),
                "buffer is busy while running"
            );
            assert!(
                matches!(ar.output(), Err(Error::InFlight)),
                "no result while running"
            );
            let e = ar.wait(Timeout::ms(300)).unwrap_err();
            assert!(e.is_timeout(), "{e}");
            // Tell the late rank we timed out; then it joins and everyone completes.
            ctx.barrier(Group::ALL, LONG).unwrap();
        } else {
            ctx.barrier(Group::ALL, LONG).unwrap();
            ar.start().unwrap();
        }
        let out = ar.wait(LONG).unwrap();
        assert!(out.iter().all(|x| *x == u64::from(last)));
    }
}

#[test]
fn a_rank_that_never_joins_gives_timeout_then_resumes_tcp_3() {
    spmd(
        "a_rank_that_never_joins_gives_timeout_then_resumes_tcp_3",
        3,
        Tcp,
        late_rank,
    );
}

#[test]
fn a_rank_that_never_joins_gives_timeout_then_resumes_shm_2() {
    spmd(
        "a_rank_that_never_joins_gives_timeout_then_resumes_shm_2",
        2,
        Shm,
        late_rank,
    );
}

/// Broadcast from every root, tree and chain sizes, plus the one-shot helpers.
fn broadcasts(ctx: Arc<Context>) {
    let p = ctx.num_ranks();
    for count in [0usize, 1, 1000, 100_003] {
        for root in 0..p {
            let o = Options {
                chunk_bytes: Some(32 << 10),
                ..Options::default()
            };
            let mut b = Broadcast::<f64>::new(&ctx, Group::ALL, count, Rank(root), o).unwrap();
            for run in 0..2 {
                let val = |j: usize| (j * 3 + run) as f64 + f64::from(root) / 8.0;
                let buf = b.buffer_mut().unwrap();
                for (j, x) in buf.iter_mut().enumerate() {
                    *x = if ctx.rank().0 == root { val(j) } else { -1.0 };
                }
                b.start().unwrap();
                let out = b.wait(LONG).unwrap();
                for (j, x) in out.iter().enumerate() {
                    assert_eq!(*x, val(j), "root {root} count {count} run {run} at {j}");
                }
            }
        }
    }
    let mut v: Vec<i32> = (0..77).map(|j| j * i32::from(ctx.rank().0 + 1)).collect();
    allreduce::broadcast(&ctx, Group::ALL, Rank(p - 1), &mut v, LONG).unwrap();
    assert!(v
        .iter()
        .enumerate()
        .all(|(j, x)| *x == j as i32 * i32::from(p)));
    allreduce::allreduce(&ctx, Group::ALL, &mut v, Reduction::Sum, LONG).unwrap();
    assert!(v
        .iter()
        .enumerate()
        .all(|(j, x)| *x == j as i32 * i32::from(p) * i32::from(p)));
}

#[test]
fn broadcast_from_every_root_tcp_3() {
    spmd("broadcast_from_every_root_tcp_3", 3, Tcp, broadcasts);
}

#[test]
fn broadcast_from_every_root_shm_5() {
    spmd("broadcast_from_every_root_shm_5", 5, Shm, broadcasts);
}

/// Collectives on a subgroup (the odd ranks) while the others stay out.
fn subgroup(ctx: Arc<Context>) {
    let me = ctx.rank().0;
    let g = ctx.group_create().unwrap();
    for r in (1..ctx.num_ranks()).step_by(2) {
        ctx.group_add(g, Rank(r)).unwrap();
    }
    if me % 2 == 1 {
        ctx.group_commit(g, LONG).unwrap();
        let members = ctx.group_size(g).unwrap() as u64;
        for algorithm in [Algorithm::Ring, Algorithm::Rabenseifner] {
            let o = Options {
                algorithm,
                ..Options::default()
            };
            let mut ar = Allreduce::<u64>::new(&ctx, g, 10_001, Reduction::Sum, o).unwrap();
            let out = ar
                .start_from(&vec![u64::from(me); 10_001])
                .and(ar.wait(LONG));
            let want: u64 = (1..ctx.num_ranks()).step_by(2).map(u64::from).sum();
            assert!(out.unwrap().iter().all(|x| *x == want));
            assert_same_everywhere(&ctx, g, fingerprint(ar.output().unwrap()), "subgroup");
            assert_eq!(members, (ctx.num_ranks() / 2) as u64);
        }
    } else {
        let e = Allreduce::<u64>::new(&ctx, g, 4, Reduction::Sum, Options::default());
        assert!(
            matches!(e, Err(Error::NotAMember { rank, group }) if rank == ctx.rank() && group == g),
            "non-member"
        );
    }
    ctx.barrier(Group::ALL, LONG).unwrap();
}

#[test]
fn collectives_on_a_subgroup_tcp_5() {
    spmd("collectives_on_a_subgroup_tcp_5", 5, Tcp, subgroup);
}

#[test]
fn collectives_on_a_subgroup_shm_4() {
    spmd("collectives_on_a_subgroup_shm_4", 4, Shm, subgroup);
}

/// Members that ask for different collectives get a clear error, all of them.
fn mismatch(ctx: Arc<Context>) {
    let count = 100 + usize::from(ctx.rank().0 == 1);
    let e = Allreduce::<f32>::new(&ctx, Group::ALL, count, Reduction::Sum, Options::default())
        .err()
        .expect("mismatched setup must fail");
    assert!(matches!(e, Error::SetupMismatch), "unexpected error: {e}");
    assert!(e.to_string().contains("different collectives"), "{e}");
    let mut ok =
        Allreduce::<f32>::new(&ctx, Group::ALL, 8, Reduction::Sum, Options::default()).unwrap();
    assert!(matches!(ok.output(), Err(Error::NoResult)));
    let e = ok.start_from(&[1.0; 3]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                given: 3,
                expected: 8
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("3 elements"), "{e}");
    let e = Broadcast::<f32>::new(&ctx, Group::ALL, 8, Rank(9), Options::default())
        .err()
        .expect("root outside the group");
    assert!(matches!(e, Error::RootNotInGroup { .. }), "{e}");
    // Over TCP the peers' buffers are not mapped here: single-copy says so, on every rank.
    let options = Options {
        algorithm: Algorithm::SingleCopy,
        ..Options::default()
    };
    let e = Allreduce::<f32>::new(&ctx, Group::ALL, 1 << 20, Reduction::Sum, options)
        .err()
        .expect("single-copy over TCP");
    assert!(
        matches!(
            e,
            Error::AlgorithmUnavailable {
                algorithm: Algorithm::SingleCopy,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("shared memory"), "{e}");
    // Different algorithms on different members (rank 1 forces the ring, or single-copy,
    // which it cannot run over TCP): every member fails at setup, none waits for the
    // others, and the group sets up the next collective as usual.
    for odd in [Algorithm::Ring, Algorithm::SingleCopy] {
        let options = Options {
            algorithm: if ctx.rank().0 == 1 {
                odd
            } else {
                Algorithm::RecursiveDoubling
            },
            ..Options::default()
        };
        let e = Allreduce::<f32>::new(&ctx, Group::ALL, 1 << 10, Reduction::Sum, options)
            .err()
            .expect("members with different algorithms");
        assert!(matches!(e, Error::SetupMismatch), "{odd:?}: {e}");
    }
    let mut ok =
        Allreduce::<f32>::new(&ctx, Group::ALL, 8, Reduction::Sum, Options::default()).unwrap();
    ok.start_from(&[1.0; 8]).unwrap();
    assert_eq!(ok.wait(Timeout::ms(30_000)).unwrap(), &[3.0; 8]);
}

#[test]
fn mismatched_setups_fail_on_every_rank_tcp_3() {
    spmd(
        "mismatched_setups_fail_on_every_rank_tcp_3",
        3,
        Tcp,
        mismatch,
    );
}

/// A peer that dies (killed by rank 0 with `proc_kill`) while rank 0 runs a collective
/// with it: the run fails with a cause that names the dead rank, and every later call
/// reports the same failure (the collective cannot be used again).
fn dead_peer(name: &str, driver: Driver) {
    let job = gaspi::testing::spmd_job(name, 2, Tcp, Duration::from_secs(120), |_| {});
    if let Some(out) = job {
        assert!(!out.timed_out, "{}", out.report());
        assert!(
            out.ranks[0].status.is_some_and(|s| s.success()),
            "{}",
            out.report()
        );
        assert_eq!(
            out.ranks[1].status.and_then(|s| s.signal()),
            Some(9),
            "{}",
            out.report()
        );
        return;
    }
    let ctx = Arc::new(Context::init().expect("gaspi init"));
    let o = Options {
        algorithm: Algorithm::Ring,
        driver,
        ..Options::default()
    };
    let mut ar = Allreduce::<u64>::new(&ctx, Group::ALL, 4096, Reduction::Sum, o).unwrap();
    ctx.barrier(Group::ALL, LONG).unwrap();
    if ctx.rank() == Rank(1) {
        // Waits for data that never comes: the kill ends it.
        let _ = ar.start_from(&[1; 4096]).and(ar.wait(LONG));
        std::process::exit(4);
    }
    ctx.proc_kill(Rank(1), LONG).unwrap();
    let names_1 = |e: &Error| matches!(e, Error::Failed(_)) && e.peer_failed() == Some(Rank(1));
    let e = ar.start_from(&[1; 4096]).and(ar.wait(LONG)).unwrap_err();
    assert!(names_1(&e), "{e:?}");
    let e = ar.wait(LONG).unwrap_err();
    assert!(names_1(&e), "wait again: {e:?}");
    let e = ar.test().unwrap_err();
    assert!(names_1(&e), "test: {e:?}");
    let e = ar.start().unwrap_err();
    assert!(names_1(&e), "start again: {e:?}");
    let e = ar.output().unwrap_err();
    assert!(names_1(&e), "output: {e:?}");
    // The aborted run's members may still write the data range: no view of it is handed
    // out any more.
    let e = ar.input_mut().unwrap_err();
    assert!(names_1(&e), "input_mut: {e:?}");
    std::process::exit(0);
}

#[test]
fn a_dead_peer_fails_the_run_for_good_tcp_2() {
    dead_peer("a_dead_peer_fails_the_run_for_good_tcp_2", Driver::Caller);
}

#[test]
fn a_dead_peer_fails_a_thread_driven_run_for_good_tcp_2() {
    dead_peer(
        "a_dead_peer_fails_a_thread_driven_run_for_good_tcp_2",
        Driver::Thread,
    );
}

/// A member that leaves in order (`term`) while rank 0 waits for its part: rank 0's run
/// fails naming it, instead of waiting until its timeout (or for ever).
#[test]
fn a_member_that_leaves_fails_the_run_instead_of_hanging_it() {
    const NAME: &str = "a_member_that_leaves_fails_the_run_instead_of_hanging_it";
    let job = gaspi::testing::spmd_job(NAME, 2, Tcp, Duration::from_secs(120), |_| {});
    if let Some(out) = job {
        out.assert_success();
        return;
    }
    let ctx = Arc::new(Context::init().expect("gaspi init"));
    let o = Options {
        algorithm: Algorithm::Ring,
        ..Options::default()
    };
    let mut ar = Allreduce::<u64>::new(&ctx, Group::ALL, 4096, Reduction::Sum, o).unwrap();
    ctx.barrier(Group::ALL, LONG).unwrap();
    if ctx.rank() == Rank(1) {
        // Leaves with the collective still set up (dropping it would delete its segment,
        // and rank 0's first write would fail on that instead).
        ctx.terminate(LONG).unwrap();
        std::process::exit(0);
    }
    let e = ar.start_from(&[1; 4096]).and(ar.wait(LONG)).unwrap_err();
    assert!(
        matches!(e, Error::Failed(_)) && e.peer_failed() == Some(Rank(1)),
        "{e:?}"
    );
    std::process::exit(0);
}

/// A rank outside the group dies: the group's collectives go on (before, its failure, seen
/// by any wait, failed them for good).
#[test]
fn a_failure_outside_the_group_leaves_its_collectives_alone() {
    const NAME: &str = "a_failure_outside_the_group_leaves_its_collectives_alone";
    if ran_with_a_dying_last_rank(NAME, 3) {
        return;
    }
    let ctx = Arc::new(Context::init().expect("gaspi init"));
    let seg = gaspi::SegmentId(9);
    ctx.segment_create(seg, 64, Group::ALL, LONG, gaspi::Alloc::Initialized)
        .unwrap();
    let g = ctx.group_create().unwrap();
    if ctx.rank() != Rank(2) {
        ctx.group_add(g, Rank(0)).unwrap();
        ctx.group_add(g, Rank(1)).unwrap();
        ctx.group_commit(g, LONG).unwrap();
    }
    let mut ar = (ctx.rank() != Rank(2))
        .then(|| Allreduce::<u64>::new(&ctx, g, 1000, Reduction::Sum, Options::default()).unwrap());
    ctx.barrier(Group::ALL, LONG).unwrap();
    let Some(ar) = ar.as_mut() else {
        // Rank 2 dies without a word.
        std::process::exit(0);
    };
    // A wait for a notification nobody sends ends once rank 2's failure is known here.
    let seen = ctx.notify_waitsome(seg, gaspi::NotificationId(0), 1, LONG);
    assert!(
        matches!(seen, Err(gaspi::Error::PeerFailed { rank: Rank(2) })),
        "{seen:?}"
    );
    let me = u64::from(ctx.rank().0);
    ar.start_from(&[me + 1; 1000]).unwrap();
    ar.wait(LONG).unwrap();
    assert!(ar.output().unwrap().iter().all(|&x| x == 3));
    std::process::exit(0);
}

/// Rank 1 registers user memory (`segment_use`), so its peers reach it over TCP while it
/// still reaches them through shared memory. The members agree on one view of the
/// transport: `Auto` sets up the same collective everywhere, and it runs. Before, rank 1
/// chose the shared-memory chunk size and single-copy, its peers the network's, and every
/// setup failed with `SetupMismatch`.
fn user_memory_on_one_rank(ctx: Arc<Context>) {
    let seg = gaspi::SegmentId(7);
    let mut mine = vec![0u64; 512];
    if ctx.rank() == Rank(1) {
        // SAFETY: `mine` outlives the segment, deleted below before it is dropped, and
        // nothing writes the segment.
        unsafe { ctx.segment_use(seg, mine.as_mut_ptr().cast(), 4096, Group::ALL, LONG) }.unwrap();
    } else {
        ctx.segment_create(seg, 4096, Group::ALL, LONG, gaspi::Alloc::Initialized)
            .unwrap();
    }
    ctx.barrier(Group::ALL, LONG).unwrap();
    if ctx.rank() == Rank(1) {
        assert!(ctx.uses_shm_to(Rank(0)) && ctx.uses_shm_to(Rank(2)));
    } else {
        assert!(!ctx.uses_shm_to(Rank(1)));
    }
    let me = u64::from(ctx.rank().0);
    for count in [100, 1 << 20] {
        let mut ar =
            Allreduce::<u64>::new(&ctx, Group::ALL, count, Reduction::Sum, Options::default())
                .unwrap();
        assert_ne!(ar.algorithm(), Algorithm::SingleCopy, "{count}");
        ar.start_from(&vec![me + 1; count]).unwrap();
        assert!(ar.wait(LONG).unwrap().iter().all(|&x| x == 6), "{count}");
    }
    let mut b =
        Broadcast::<u64>::new(&ctx, Group::ALL, 1 << 20, Rank(1), Options::default()).unwrap();
    b.start_from(&vec![me; 1 << 20]).unwrap();
    assert!(b.wait(LONG).unwrap().iter().all(|&x| x == 1));
    ctx.barrier(Group::ALL, LONG).unwrap();
    ctx.segment_delete(seg).unwrap();
    drop(mine);
}

#[test]
fn user_memory_on_one_rank_keeps_the_members_agreed_shm_3() {
    spmd(
        "user_memory_on_one_rank_keeps_the_members_agreed_shm_3",
        3,
        Shm,
        user_memory_on_one_rank,
    );
}

/// AVG of `f16` vectors whose sum leaves the type's range while their average does not:
/// every rank holds 40000 (the largest `f16` is 65504), with sizes that take each
/// algorithm `Auto` picks on 2 or 3 ranks. Before, the sum overflowed to infinity before
/// the division.
fn averages_within_range(ctx: Arc<Context>) {
    let big = allreduce::f16::from_f32(40000.0);
    for n in [3000, 1 << 20, 8 << 20] {
        let mut half =
            Allreduce::new(&ctx, Group::ALL, n, Reduction::Avg, Options::default()).unwrap();
        half.start_from(&vec![big; n]).unwrap();
        let out = half.wait(LONG).unwrap();
        assert!(out.iter().all(|&x| x == big), "{n}: {}", out[0]);
    }
}

#[test]
fn f16_averages_do_not_overflow_where_the_average_fits_shm_2() {
    spmd(
        "f16_averages_do_not_overflow_where_the_average_fits_shm_2",
        2,
        Shm,
        averages_within_range,
    );
}

#[test]
fn f16_averages_do_not_overflow_where_the_average_fits_tcp_3() {
    spmd(
        "f16_averages_do_not_overflow_where_the_average_fits_tcp_3",
        3,
        Tcp,
        averages_within_range,
    );
}
