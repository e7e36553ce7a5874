//! Faults of peers: a peer killed mid-traffic, one that leaves in order while the others
//! still need it, and `proc_kill`.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use common::{setup, T};
use gaspi::env::TransportChoice;
use gaspi::testing::spmd_job;
use gaspi::*;
use tarantella_tests::faults::{acknowledge_then_die, await_word_after_failure};
use tarantella_tests::shm_files_of;

/// Ranks 0 and 1 go on in a group of their own after rank 2 is gone.
fn survivors_go_on(ctx: &Context) {
    let g = ctx.group_create().unwrap();
    ctx.group_add(g, Rank(0)).unwrap();
    ctx.group_add(g, Rank(1)).unwrap();
    ctx.group_commit(g, T).unwrap();
    ctx.barrier(g, T).unwrap();
    let mut v = [0i32];
    ctx.allreduce(&[1i32], &mut v, ReduceOp::Sum, g, T).unwrap();
    assert_eq!(v[0], 2);
}

/// Rank 2 streams acknowledgements to rank 0 and dies by SIGKILL in the middle; the
/// survivors' blocking calls return `PeerFailed` and their state vector marks it CORRUPT.
fn killed_peer(name: &str, transport: TransportChoice) {
    let Some(out) = spmd_job(name, 3, transport, Duration::from_secs(60), |_| {}) else {
        let ctx = Context::init().unwrap();
        let seg = setup(&ctx);
        // Rank 2 may finish `segment_create` and die while a slow rank 1 still waits in it
        // for rank 2's acknowledgement: start the traffic only once everybody is set up.
        ctx.barrier(Group::ALL, T).unwrap();
        let me = ctx.rank();
        let q = QueueId(0);
        match me.0 {
            0 => {
                let mut round = 0;
                let err = loop {
                    // Data to rank 2, then wait for its acknowledgement (notification 1).
                    let posted = ctx.write_notify(
                        Local::new(seg, 0),
                        Remote::new(Rank(2), seg, 4096),
                        65536,
                        NotificationId(0),
                        round + 1,
                        q,
                    );
                    if let Err(e) = posted {
                        break e;
                    }
                    match ctx.notify_waitsome(seg, NotificationId(1), 1, Timeout::BLOCK) {
                        Ok(id) => {
                            ctx.notify_reset(seg, id).unwrap();
                        }
                        Err(e) => break e,
                    }
                    round += 1;
                    let _ = ctx.wait(q, T);
                };
                assert!(round >= 10, "rank 2 died too early ({round})");
                assert!(
                    matches!(err, Error::PeerFailed { rank: Rank(2) }),
                    "{err:?}"
                );
                assert_eq!(ctx.state_vec()[2], PeerState::Corrupt);
                assert_eq!(ctx.state_vec()[1], PeerState::Healthy);
                // As in GPI-2: posting to the dead rank succeeds, the queue's next wait
                // reports it (once), and the one after succeeds.
                let _ = ctx.wait(q, T);
                ctx.write(Local::new(seg, 0), Remote::new(Rank(2), seg, 0), 8, q)
                    .unwrap();
                let waited = ctx.wait(q, T);
                assert!(
                    matches!(waited, Err(Error::PeerFailed { rank: Rank(2) })),
                    "{waited:?}"
                );
                ctx.wait(q, T).unwrap();
                let b = ctx.barrier(Group::ALL, T);
                assert!(
                    matches!(b, Err(Error::PeerFailed { rank: Rank(2) })),
                    "{b:?}"
                );
                ctx.notify(seg, Rank(1), NotificationId(5), 1, q).unwrap();
                ctx.wait(q, T).unwrap();
                survivors_go_on(&ctx);
            }
            1 => {
                await_word_after_failure(&ctx, seg);
                survivors_go_on(&ctx);
            }
            _ => acknowledge_then_die(&ctx, seg, q, 20),
        }
        std::process::exit(0);
    };
    assert!(!out.timed_out, "{}", out.report());
    assert_eq!(
        out.ranks[2].status.and_then(|s| s.signal()),
        Some(9),
        "{}",
        out.report()
    );
    for r in &out.ranks[..2] {
        assert!(r.status.is_some_and(|s| s.success()), "{}", out.report());
    }
}

#[test]
fn killed_peer_tcp() {
    killed_peer("killed_peer_tcp", TransportChoice::Tcp);
}

#[test]
fn killed_peer_shm() {
    killed_peer("killed_peer_shm", TransportChoice::Shm);
}

/// `proc_kill`: rank 0 kills rank 1, which dies by SIGKILL; rank 0 learns it as a failure,
/// and none of rank 1's shared-memory files is left.
fn proc_kill_terminates_the_target(name: &str, transport: TransportChoice) {
    let Some(out) = spmd_job(name, 2, transport, Duration::from_secs(60), |_| {}) else {
        let ctx = Context::init().unwrap();
        let seg = setup(&ctx);
        if ctx.rank() == Rank(0) {
            assert!(
                matches!(ctx.proc_kill(Rank(0), T), Err(Error::InvalidRank { .. })),
                "not on itself"
            );
            if transport == TransportChoice::Shm {
                // `segment_create` returned: rank 1 has created its file.
                let before = shm_files_of(ctx.job_id(), 1);
                assert!(!before.is_empty(), "rank 1 has no files");
            }
            ctx.proc_kill(Rank(1), T).unwrap();
            let r = ctx.notify_waitsome(seg, NotificationId(0), 1, T);
            assert!(
                matches!(r, Err(Error::PeerFailed { rank: Rank(1) })),
                "{r:?}"
            );
            assert_eq!(ctx.state_vec()[1], PeerState::Corrupt);
            let left = shm_files_of(ctx.job_id(), 1);
            assert!(left.is_empty(), "the killed rank left {left:?}");
            std::process::exit(0);
        }
        // Rank 1 waits for a notification that never comes: the kill ends it.
        let _ = ctx.notify_waitsome(seg, NotificationId(0), 1, T);
        std::process::exit(4);
    };
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
}

#[test]
fn proc_kill_terminates_the_target_tcp() {
    proc_kill_terminates_the_target("proc_kill_terminates_the_target_tcp", TransportChoice::Tcp);
}

#[test]
fn proc_kill_terminates_the_target_shm() {
    proc_kill_terminates_the_target("proc_kill_terminates_the_target_shm", TransportChoice::Shm);
}

/// A rank that leaves in order (`term`, exit 0) while the others still need it: their
/// blocking collectives end with `PeerFailed` naming it, over shared memory as over TCP
/// (they used to wait for ever over shared memory). The survivors learn of the departure at
/// different times, so one may fail its barrier at the start while another has entered and
/// waits on it: the first one's abort ends the other's wait (with 5 ranks a survivor waits
/// only on survivors in some rounds).
fn departed_peer(name: &str, transport: TransportChoice, n: u16) {
    let Some(out) = spmd_job(name, n, transport, Duration::from_secs(60), |_| {}) else {
        let ctx = Context::init().unwrap();
        setup(&ctx);
        ctx.barrier(Group::ALL, T).unwrap();
        let last = Rank(n - 1);
        if ctx.rank() == last {
            ctx.term(T).unwrap();
            std::process::exit(0);
        }
        let r = ctx.barrier(Group::ALL, Timeout::BLOCK);
        assert!(
            matches!(r, Err(Error::PeerFailed { rank }) if rank == last),
            "{r:?}"
        );
        let (one, mut sum) = ([1u64], [0u64]);
        let r = ctx.allreduce(&one, &mut sum, ReduceOp::Sum, Group::ALL, Timeout::BLOCK);
        assert!(
            matches!(r, Err(Error::PeerFailed { rank }) if rank == last),
            "{r:?}"
        );
        // The survivors go on in a group of their own.
        let g = ctx.group_create().unwrap();
        for r in 0..n - 1 {
            ctx.group_add(g, Rank(r)).unwrap();
        }
        ctx.group_commit(g, T).unwrap();
        ctx.barrier(g, T).unwrap();
        ctx.allreduce(&one, &mut sum, ReduceOp::Sum, g, T).unwrap();
        assert_eq!(sum[0], u64::from(n - 1));
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}

#[test]
fn departed_peer_ends_collectives_shm() {
    departed_peer(
        "departed_peer_ends_collectives_shm",
        TransportChoice::Shm,
        3,
    );
}

#[test]
fn departed_peer_ends_collectives_tcp() {
    departed_peer(
        "departed_peer_ends_collectives_tcp",
        TransportChoice::Tcp,
        3,
    );
}

#[test]
fn departed_peer_ends_collectives_shm_5() {
    departed_peer(
        "departed_peer_ends_collectives_shm_5",
        TransportChoice::Shm,
        5,
    );
}

#[test]
fn departed_peer_ends_collectives_tcp_5() {
    departed_peer(
        "departed_peer_ends_collectives_tcp_5",
        TransportChoice::Tcp,
        5,
    );
}
