//! The queues the collectives post on: apart from the application's, and one per run in
//! flight, so that a collective's flush neither waits for another's writes nor takes its
//! failure report.

mod common;

use std::sync::Arc;

use allreduce::{Algorithm, Allreduce, Options, Reduction, QUEUES_MAX};
use common::{ran_with_a_dying_last_rank, spmd, LONG};
use gaspi::env::TransportChoice::{Shm, Tcp};
use gaspi::{Context, Group, Rank, ReduceOp, Timeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The collectives post on queues of their own: what the application posted on queue 0 is
/// still there after a run (before, the collective's flushes waited for it and its writes
/// joined it), and runs that follow each other, of one collective or of the next, reuse one
/// queue.
fn own_queue(ctx: Arc<Context>) {
    let seg = gaspi::SegmentId(5);
    ctx.segment_create(seg, 64, Group::ALL, LONG, gaspi::Alloc::Initialized)
        .unwrap();
    let peer = Rank((ctx.rank().0 + 1) % ctx.num_ranks());
    let q0 = gaspi::QueueId(0);
    ctx.notify(seg, peer, gaspi::NotificationId(0), 1, q0)
        .unwrap();
    let queues = ctx.queue_num();
    let me = u64::from(ctx.rank().0);
    let o = Options {
        algorithm: Algorithm::Ring,
        ..Options::default()
    };
    for _ in 0..2 {
        let mut ar =
            Allreduce::<u64>::new(&ctx, Group::ALL, 100_000, Reduction::Sum, o.clone()).unwrap();
        ar.start_from(&vec![me; 100_000]).unwrap();
        assert!(ar.wait(LONG).unwrap().iter().all(|&x| x == 3));
        assert_eq!(
            ctx.queue_size(q0).unwrap(),
            1,
            "the application's post is left alone"
        );
        assert_eq!(
            ctx.queue_num(),
            queues + 1,
            "one queue for runs that follow each other"
        );
    }
    ctx.wait(q0, LONG).unwrap();
    ctx.barrier(Group::ALL, LONG).unwrap();
    ctx.segment_delete(seg).unwrap();
}

#[test]
fn collectives_keep_to_a_queue_of_their_own_tcp_3() {
    spmd(
        "collectives_keep_to_a_queue_of_their_own_tcp_3",
        3,
        Tcp,
        own_queue,
    );
}

/// A context whose application holds every queue leaves the collectives on queue 0; once
/// the application deletes one of its queues, the next run takes a queue of its own again
/// (before, the pool kept queue 0 as its queue and handed it out first ever after).
fn back_on_a_queue_of_their_own(ctx: Arc<Context>) {
    let mut held = Vec::new();
    while let Ok(q) = ctx.queue_create() {
        held.push(q);
    }
    assert_eq!(
        ctx.queue_num(),
        ctx.queue_max(),
        "the application holds every queue"
    );
    let me = u64::from(ctx.rank().0);
    let o = Options {
        algorithm: Algorithm::Ring,
        ..Options::default()
    };
    let mut ar = Allreduce::<u64>::new(&ctx, Group::ALL, 1000, Reduction::Sum, o).unwrap();
    ar.start_from(&vec![me; 1000]).unwrap();
    assert!(ar.wait(LONG).unwrap().iter().all(|&x| x == 3), "on queue 0");
    let freed = held.pop().unwrap();
    ctx.queue_delete(freed).unwrap();
    ar.start_from(&vec![me + 1; 1000]).unwrap();
    assert!(
        ar.wait(LONG).unwrap().iter().all(|&x| x == 6),
        "on its own queue"
    );
    assert_eq!(
        ctx.queue_num(),
        ctx.queue_max(),
        "the run created a queue of its own in the place freed"
    );
    ctx.barrier(Group::ALL, LONG).unwrap();
}

#[test]
fn back_on_a_queue_of_their_own_once_one_is_free_tcp_3() {
    spmd(
        "back_on_a_queue_of_their_own_once_one_is_free_tcp_3",
        3,
        Tcp,
        back_on_a_queue_of_their_own,
    );
}

/// A group of the members `ranks`, committed by them; every rank calls this in the same
/// order, so that the group has one id everywhere (the other ranks get `None`).
fn group_of(ctx: &Context, ranks: &[u16]) -> Option<Group> {
    let g = ctx.group_create().unwrap();
    if !ranks.contains(&ctx.rank().0) {
        return None;
    }
    for &r in ranks {
        ctx.group_add(g, Rank(r)).unwrap();
    }
    ctx.group_commit(g, LONG).unwrap();
    Some(g)
}

/// Two collectives in flight at once on rank 0: B (ranks 0 and 2) with its 32 MiB write
/// stuck, rank 2 being stopped (SIGSTOP), and A (ranks 0 and 1). A completes while B's
/// write is still stuck: its flush waits only for its own writes. Before, both posted on
/// one queue and A's flush waited for B's write until rank 2 came back (here, never: A's
/// wait timed out). Then rank 2 is continued and B completes too.
fn a_stuck_collective_holds_up_no_other(ctx: Arc<Context>) {
    let me = ctx.rank().0;
    let o = Options {
        algorithm: Algorithm::RecursiveDoubling,
        ..Options::default()
    };
    // 32 MiB: far more than the loopback sockets between rank 0 and rank 2 hold, so the
    // write cannot complete while rank 2 does not read.
    const B_COUNT: usize = 4 << 20;
    let mut a = group_of(&ctx, &[0, 1])
        .map(|g| Allreduce::<u64>::new(&ctx, g, 1000, Reduction::Sum, o.clone()).unwrap());
    let mut b = group_of(&ctx, &[0, 2])
        .map(|g| Allreduce::<u64>::new(&ctx, g, B_COUNT, Reduction::Sum, o.clone()).unwrap());
    // Rank 0 learns rank 2's process id (the ranks run on this host).
    let pid = if me == 2 { std::process::id() } else { 0 };
    let mut pids = [0u32];
    ctx.allreduce(&[pid], &mut pids, ReduceOp::Max, Group::ALL, LONG)
        .unwrap();
    let rank2 = Pid::from_raw(pids[0] as i32);
    let queues = ctx.queue_num();
    match me {
        0 => {
            let (a, b) = (a.as_mut().unwrap(), b.as_mut().unwrap());
            kill(rank2, Signal::SIGSTOP).unwrap();
            b.start_from(&vec![1; B_COUNT]).unwrap();
            // Posts B's write to rank 2; its wait for rank 2's data cannot end yet.
            assert!(!b.test().unwrap());
            a.start_from(&[1; 1000]).unwrap();
            let done = a
                .wait(Timeout::ms(20_000))
                .map(|out| out.iter().all(|&x| x == 2));
            kill(rank2, Signal::SIGCONT).unwrap();
            assert!(
                matches!(done, Ok(true)),
                "A, beside B's stuck write: {done:?}"
            );
            assert_eq!(
                ctx.queue_num(),
                queues + 2,
                "a queue for each run in flight"
            );
            assert!(b.wait(LONG).unwrap().iter().all(|&x| x == 3));
        }
        1 => {
            let a = a.as_mut().unwrap();
            a.start_from(&[1; 1000]).unwrap();
            assert!(a.wait(LONG).unwrap().iter().all(|&x| x == 2));
        }
        _ => {
            let b = b.as_mut().unwrap();
            b.start_from(&vec![2; B_COUNT]).unwrap();
            assert!(b.wait(LONG).unwrap().iter().all(|&x| x == 3));
        }
    }
}

#[test]
fn a_stuck_collective_holds_up_no_other_tcp_3() {
    spmd(
        "a_stuck_collective_holds_up_no_other_tcp_3",
        3,
        Tcp,
        a_stuck_collective_holds_up_no_other,
    );
}

/// More runs in flight than the collectives may have queues: they share the
/// [`QUEUES_MAX`] queues and all complete; the application's queues are left alone.
fn more_runs_than_queues(ctx: Arc<Context>) {
    let me = u64::from(ctx.rank().0);
    let p = u64::from(ctx.num_ranks());
    let queues = ctx.queue_num();
    let o = Options {
        algorithm: Algorithm::Ring,
        ..Options::default()
    };
    let mut colls: Vec<Allreduce<u64>> = (0..QUEUES_MAX + 2)
        .map(|i| Allreduce::new(&ctx, Group::ALL, 1000 + i, Reduction::Sum, o.clone()).unwrap())
        .collect();
    for (i, c) in colls.iter_mut().enumerate() {
        c.start_from(&vec![me + i as u64; 1000 + i]).unwrap();
        // A run takes its queue the first time it is moved forward.
        let _ = c.test().unwrap();
    }
    assert_eq!(ctx.queue_num(), queues + QUEUES_MAX as u32);
    for (i, c) in colls.iter_mut().enumerate() {
        let want = (0..p).map(|r| r + i as u64).sum::<u64>();
        assert!(
            c.wait(LONG).unwrap().iter().all(|&x| x == want),
            "collective {i}"
        );
    }
    assert_eq!(ctx.queue_num(), queues + QUEUES_MAX as u32);
}

#[test]
fn more_runs_than_queues_share_them_shm_3() {
    spmd(
        "more_runs_than_queues_share_them_shm_3",
        3,
        Shm,
        more_runs_than_queues,
    );
}

/// A run that failed leaves its queue with requests that may still fail: the next run, of
/// a collective whose members are fine, must not take that report. Rank 2 dies after
/// setting up B (ranks 0 and 2); rank 0's run of B fails naming rank 2, then A (ranks 0
/// and 1) runs on rank 0 as if nothing had happened, twice.
#[test]
fn a_failed_run_leaves_no_report_for_the_next() {
    const NAME: &str = "a_failed_run_leaves_no_report_for_the_next";
    if ran_with_a_dying_last_rank(NAME, 3) {
        return;
    }
    let ctx = Arc::new(Context::init().expect("gaspi init"));
    let o = Options {
        algorithm: Algorithm::RecursiveDoubling,
        ..Options::default()
    };
    let mut a = group_of(&ctx, &[0, 1])
        .map(|g| Allreduce::<u64>::new(&ctx, g, 1 << 16, Reduction::Sum, o.clone()).unwrap());
    let mut b = group_of(&ctx, &[0, 2])
        .map(|g| Allreduce::<u64>::new(&ctx, g, 1 << 16, Reduction::Sum, o.clone()).unwrap());
    ctx.barrier(Group::ALL, LONG).unwrap();
    match ctx.rank().0 {
        0 => {
            let b = b.as_mut().unwrap();
            let e = b
                .start_from(&vec![1; 1 << 16])
                .and(b.wait(LONG))
                .unwrap_err();
            assert_eq!(e.peer_failed(), Some(Rank(2)), "{e:?}");
        }
        // Rank 2 dies without a word.
        2 => std::process::exit(0),
        _ => {}
    }
    let a = a.as_mut().unwrap();
    for round in 0..2u64 {
        a.start_from(&vec![round + 1; 1 << 16]).unwrap();
        let want = 2 * (round + 1);
        assert!(
            a.wait(LONG).unwrap().iter().all(|&x| x == want),
            "round {round}"
        );
    }
    std::process::exit(0);
}
