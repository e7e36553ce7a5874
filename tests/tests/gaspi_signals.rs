//! A rank ended by SIGTERM or SIGHUP (what `kill`, a batch system or the launcher's
//! parent-death signal sends) unlinks its shared-memory files first and still dies of that
//! signal; one that calls `exit` (a C program's return from `main`) without `term` unlinks
//! them too, so a job started by a launcher other than `tarantella` (which cleans up after
//! itself) leaves nothing in `/dev/shm`. The survivors' blocking calls then fail with an
//! error instead of hanging. A child forked from a rank, ended by a signal or by `exit`,
//! leaves its parent's files alone.

use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gaspi::testing::spmd_job;
use gaspi::*;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal};
use tarantella_tests::{shm_files_of, Net};

const T: Timeout = Timeout(20_000);

/// How the victim of [`departing_rank`] leaves, without `term`.
#[derive(Clone, Copy)]
enum Departure {
    /// A thread of its own sends the process this signal while it blocks in a wait.
    Signal(Signal),
    /// It calls `exit(0)`: no `term`, no destructors, only the exit handlers run.
    Exit,
}

/// `victim` creates two segments with everybody, waits until every other rank has seen its
/// files, then leaves as `how` says. The others block in a barrier the victim never enters:
/// it must fail with `PeerFailed` (the victim's connections close after its signal action or
/// exit handlers ran), after which none of the victim's files may be left. The victim must
/// have died of the signal, or exited with status 0.
fn departing_rank(name: &str, nranks: u16, net: Net, victim: u16, how: Departure) {
    let extra = net.env();
    let Some(out) = spmd_job(
        name,
        nranks,
        net.transport(),
        Duration::from_secs(60),
        |job| job.env.extend(extra),
    ) else {
        if let Departure::Signal(sig) = how {
            // The test is about the default disposition. One inherited as "ignore" (a
            // shell's `nohup` ignores SIGHUP for everything it starts) stays ignored by
            // design (see `ignored_signals_stay_ignored`), and the victim would never die.
            let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
            // SAFETY: the default disposition runs no code of ours.
            unsafe { nix::sys::signal::sigaction(sig, &default) }.unwrap();
        }
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
            let Departure::Signal(sig) = how else {
                std::process::exit(0);
            };
            std::thread::spawn(move || {
                nix::sys::signal::kill(nix::unistd::getpid(), sig).unwrap();
            });
            let never = ctx.notify_waitsome(seg, NotificationId(100), 1, Timeout::BLOCK);
            eprintln!("the victim's wait returned: {never:?}");
            std::process::exit(3);
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
        assert!(left.is_empty(), "rank {victim} left leaving {left:?}");
        std::process::exit(0);
    };
    assert!(!out.timed_out, "{}", out.report());
    let status = out.ranks[usize::from(victim)].status;
    match how {
        Departure::Signal(sig) => assert_eq!(
            status.and_then(|s| s.signal()),
            Some(sig as i32),
            "{}",
            out.report()
        ),
        Departure::Exit => assert!(status.is_some_and(|s| s.success()), "{}", out.report()),
    }
    for r in out.ranks.iter().filter(|r| r.rank != Rank(victim)) {
        assert!(r.status.is_some_and(|s| s.success()), "{}", out.report());
    }
}

/// [`departing_rank`] ended by `sig`.
fn signalled_rank(name: &str, nranks: u16, net: Net, victim: u16, sig: Signal) {
    departing_rank(name, nranks, net, victim, Departure::Signal(sig));
}

#[test]
fn exit_without_term_unlinks_the_ranks_files_shm_3() {
    departing_rank(
        "exit_without_term_unlinks_the_ranks_files_shm_3",
        3,
        Net::Shm,
        1,
        Departure::Exit,
    );
}

#[test]
fn exit_without_term_unlinks_the_ranks_files_shm_2_rank_0() {
    departing_rank(
        "exit_without_term_unlinks_the_ranks_files_shm_2_rank_0",
        2,
        Net::Shm,
        0,
        Departure::Exit,
    );
}

#[test]
fn exit_without_term_unlinks_the_ranks_files_fake_verbs_2() {
    departing_rank(
        "exit_without_term_unlinks_the_ranks_files_fake_verbs_2",
        2,
        Net::FakeVerbs,
        1,
        Departure::Exit,
    );
}

#[test]
fn sigterm_unlinks_the_ranks_files_shm_2() {
    signalled_rank(
        "sigterm_unlinks_the_ranks_files_shm_2",
        2,
        Net::Shm,
        1,
        Signal::SIGTERM,
    );
}

#[test]
fn sighup_unlinks_the_ranks_files_shm_3() {
    signalled_rank(
        "sighup_unlinks_the_ranks_files_shm_3",
        3,
        Net::Shm,
        2,
        Signal::SIGHUP,
    );
}

#[test]
fn sigterm_unlinks_the_ranks_files_shm_3_rank_0() {
    signalled_rank(
        "sigterm_unlinks_the_ranks_files_shm_3_rank_0",
        3,
        Net::Shm,
        0,
        Signal::SIGTERM,
    );
}

/// Over the fake verbs device, whose files (the key directory, receive rings, passive
/// buffers) go too.
#[test]
fn sigterm_unlinks_the_ranks_files_fake_verbs_2() {
    signalled_rank(
        "sigterm_unlinks_the_ranks_files_fake_verbs_2",
        2,
        Net::FakeVerbs,
        1,
        Signal::SIGTERM,
    );
}

/// Set by [`application_handler`].
static HANDLED: AtomicBool = AtomicBool::new(false);

/// A SIGTERM handler as a C application installs it before `gaspi_proc_init`.
extern "C" fn application_handler(_: std::ffi::c_int) {
    HANDLED.store(true, Ordering::SeqCst);
}

/// Rank 1 installs `before` for SIGTERM and SIGHUP before init, creates segments, then
/// raises both signals at itself; `check` runs after each, in rank 1, given its files.
fn with_disposition(name: &str, before: SigHandler, check: fn(Signal, &[String])) {
    let Some(out) = spmd_job(
        name,
        2,
        Net::Shm.transport(),
        Duration::from_secs(60),
        |_| {},
    ) else {
        let action = SigAction::new(before, SaFlags::empty(), SigSet::empty());
        // SAFETY: the handler only stores to an atomic; SIG_IGN needs nothing.
        unsafe {
            nix::sys::signal::sigaction(Signal::SIGTERM, &action).unwrap();
            nix::sys::signal::sigaction(Signal::SIGHUP, &action).unwrap();
        }
        let ctx = Context::init().unwrap();
        for s in 0..2 {
            ctx.segment_create(SegmentId(s), 1 << 16, Group::ALL, T, Alloc::Initialized)
                .unwrap();
        }
        if ctx.rank().0 == 1 {
            for sig in [Signal::SIGTERM, Signal::SIGHUP] {
                assert!(shm_files_of(ctx.job_id(), 1).len() >= 2);
                HANDLED.store(false, Ordering::SeqCst);
                // Thread-directed: the handler has run when `raise` returns.
                nix::sys::signal::raise(sig).unwrap();
                check(sig, &shm_files_of(ctx.job_id(), 1));
                if sig == Signal::SIGTERM && before != SigHandler::SigIgn {
                    // The files are gone: make new ones for the SIGHUP round.
                    for s in 0..2 {
                        ctx.segment_delete(SegmentId(s)).unwrap();
                        ctx.segment_alloc(SegmentId(s), 1 << 16, Alloc::Initialized)
                            .unwrap();
                    }
                }
            }
        }
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}

/// An application's own handler, installed before init, still runs (and decides: the
/// process lives on), after the rank's files were unlinked.
#[test]
fn an_application_handler_is_chained() {
    with_disposition(
        "an_application_handler_is_chained",
        SigHandler::Handler(application_handler),
        |sig, left| {
            assert!(HANDLED.load(Ordering::SeqCst), "{sig}: handler not run");
            assert!(left.is_empty(), "{sig}: {left:?}");
        },
    );
}

/// Signals the application ignores stay ignored: nothing is unlinked, nobody dies.
#[test]
fn ignored_signals_stay_ignored() {
    with_disposition(
        "ignored_signals_stay_ignored",
        SigHandler::SigIgn,
        |sig, left| assert!(left.len() >= 2, "{sig}: {left:?}"),
    );
}

/// How the forked child of [`forked_child_leaves_the_parents_files`] ends.
#[derive(Clone, Copy)]
enum ChildEnd {
    /// It sends itself SIGTERM (the inherited signal action runs).
    Sigterm,
    /// It calls `exit(0)` (the inherited exit handler runs).
    Exit,
}

/// A child forked from a rank (without exec) inherits the signal action and the exit
/// handler; ended by either, it leaves its parent's files alone.
fn forked_child_leaves_the_parents_files(name: &str, end: ChildEnd) {
    let Some(out) = spmd_job(
        name,
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
            // SAFETY: the child only raises a signal and calls `_exit`, or calls `exit`, whose
            // handlers glibc makes safe to run in a child of a threaded process (it resets its
            // stdio locks at fork); ours only compares pids and unlinks.
            match unsafe { nix::unistd::fork() }.unwrap() {
                nix::unistd::ForkResult::Child => match end {
                    ChildEnd::Sigterm => {
                        let _ = nix::sys::signal::raise(Signal::SIGTERM);
                        // SAFETY: ends the child without running the parent's destructors.
                        unsafe { nix::libc::_exit(1) };
                    }
                    // SAFETY: ends the child through exit(3), running the exit handlers.
                    ChildEnd::Exit => unsafe { nix::libc::exit(0) },
                },
                nix::unistd::ForkResult::Parent { child } => {
                    let st = nix::sys::wait::waitpid(child, None).unwrap();
                    let ended_as_meant = match end {
                        ChildEnd::Sigterm => matches!(
                            st,
                            nix::sys::wait::WaitStatus::Signaled(_, Signal::SIGTERM, _)
                        ),
                        ChildEnd::Exit => matches!(st, nix::sys::wait::WaitStatus::Exited(_, 0)),
                    };
                    assert!(ended_as_meant, "{st:?}");
                    let after = shm_files_of(ctx.job_id(), 1);
                    assert_eq!(after, mine, "the child removed its parent's files");
                }
            }
        }
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}

#[test]
fn a_forked_child_leaves_the_parents_files() {
    forked_child_leaves_the_parents_files(
        "a_forked_child_leaves_the_parents_files",
        ChildEnd::Sigterm,
    );
}

#[test]
fn a_forked_childs_exit_leaves_the_parents_files() {
    forked_child_leaves_the_parents_files(
        "a_forked_childs_exit_leaves_the_parents_files",
        ChildEnd::Exit,
    );
}
