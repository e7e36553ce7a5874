//! A rank that ends with `exit` (a C program's return from `main`, Rust's
//! `std::process::exit`) without `term` unlinks its shared-memory files on the way out, as a
//! rank ended by SIGTERM does (`gaspi_signals.rs`): a job started by a launcher other than
//! `tarantella`, which cleans up after itself, leaves nothing in `/dev/shm` either.

use std::time::Duration;

use gaspi::testing::spmd_job;
use gaspi::*;
use tarantella_tests::{shm_files_of, Net};

const T: Timeout = Timeout(20_000);

/// `victim` creates two segments with everybody, waits until every other rank has seen its
/// files, then calls `exit(0)` without `term`. The others block in a barrier the victim
/// never enters: it fails with `PeerFailed` once the victim's process is gone (its
/// connections close after its exit handlers ran), and none of its files may be left then.
fn exit_without_term(name: &str, nranks: u16, net: Net, victim: u16) {
    let extra = net.env();
    let Some(out) = spmd_job(
        name,
        nranks,
        net.transport(),
        Duration::from_secs(60),
        |job| job.env.extend(extra),
    ) else {
        let ctx = Context::init().unwrap();
        let seg = SegmentId(0);
        for s in 0..2 {
            ctx.segment_create(SegmentId(s), 1 << 16, Group::ALL, T, Alloc::Initialized)
                .unwrap();
        }
        let me = ctx.rank().0;
        if me == victim {
            for _ in 1..nranks {
                let id = ctx
                    .notify_waitsome(seg, NotificationId(0), u32::from(nranks), T)
                    .unwrap();
                ctx.notify_reset(seg, id).unwrap();
            }
            // No `term`, no destructors: only the exit handlers run.
            std::process::exit(0);
        }
        let before = shm_files_of(ctx.job_id(), victim);
        assert!(before.len() >= 2, "rank {victim}'s files: {before:?}");
        let q = QueueId(0);
        ctx.notify(seg, Rank(victim), NotificationId(u32::from(me)), 1, q)
            .unwrap();
        ctx.wait(q, T).unwrap();
        let b = ctx.barrier(Group::ALL, Timeout::BLOCK);
        assert!(matches!(b, Err(Error::PeerFailed { .. })), "{b:?}");
        let left = shm_files_of(ctx.job_id(), victim);
        assert!(left.is_empty(), "rank {victim} exited leaving {left:?}");
        std::process::exit(0);
    };
    assert!(!out.timed_out, "{}", out.report());
    for r in &out.ranks {
        assert!(r.status.is_some_and(|s| s.success()), "{}", out.report());
    }
}

#[test]
fn exit_without_term_unlinks_the_ranks_files_shm_3() {
    exit_without_term(
        "exit_without_term_unlinks_the_ranks_files_shm_3",
        3,
        Net::Shm,
        1,
    );
}

#[test]
fn exit_without_term_unlinks_the_ranks_files_shm_2_rank_0() {
    exit_without_term(
        "exit_without_term_unlinks_the_ranks_files_shm_2_rank_0",
        2,
        Net::Shm,
        0,
    );
}

#[test]
fn exit_without_term_unlinks_the_ranks_files_fake_verbs_2() {
    exit_without_term(
        "exit_without_term_unlinks_the_ranks_files_fake_verbs_2",
        2,
        Net::FakeVerbs,
        1,
    );
}

/// A child forked from a rank (without exec) inherits the exit handler; its `exit` leaves
/// its parent's files alone.
#[test]
fn a_forked_childs_exit_leaves_the_parents_files() {
    const NAME: &str = "a_forked_childs_exit_leaves_the_parents_files";
    let Some(out) = spmd_job(
        NAME,
        2,
        Net::Shm.transport(),
        Duration::from_secs(60),
        |_| {},
    ) else {
        let ctx = Context::init().unwrap();
        for s in 0..2 {
            ctx.segment_create(SegmentId(s), 1 << 16, Group::ALL, T, Alloc::Initialized)
                .unwrap();
        }
        if ctx.rank().0 == 1 {
            let mine = shm_files_of(ctx.job_id(), 1);
            assert!(mine.len() >= 2, "{mine:?}");
            // SAFETY: the child only calls `exit`, whose handlers glibc makes safe to run in
            // a child of a threaded process (it resets its stdio locks at fork); ours only
            // compares pids.
            match unsafe { nix::unistd::fork() }.unwrap() {
                nix::unistd::ForkResult::Child => {
                    // SAFETY: ends the child through exit(3), running the exit handlers.
                    unsafe { nix::libc::exit(0) };
                }
                nix::unistd::ForkResult::Parent { child } => {
                    let st = nix::sys::wait::waitpid(child, None).unwrap();
                    assert!(
                        matches!(st, nix::sys::wait::WaitStatus::Exited(_, 0)),
                        "{st:?}"
                    );
                    let after = shm_files_of(ctx.job_id(), 1);
                    assert_eq!(after, mine, "the child's exit removed its parent's files");
                }
            }
        }
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}
