//! Failures on the verbs path (fake device): an error completion and a dead peer mark the
//! peer CORRUPT, `wait` reports `PeerFailed`, and the survivors go on.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use gaspi::testing::spmd_job;
use gaspi::*;
use tarantella_tests::Net;

const T: Timeout = Timeout::ms(20_000);
const S: SegmentId = SegmentId(0);
const Q: QueueId = QueueId(0);

fn job(name: &str, n: u16) -> Option<gaspi::testing::JobOutcome> {
    let net = Net::FakeVerbs;
    spmd_job(name, n, net.transport(), Duration::from_secs(60), |j| {
        j.env.extend(net.env())
    })
}

fn setup() -> Context {
    let ctx = Context::init().unwrap();
    ctx.segment_create(S, 1 << 17, Group::ALL, T, Alloc::Initialized)
        .unwrap();
    ctx
}

/// Rank 0's write to rank 1 completes with an error: `wait` returns `PeerFailed`, rank 1 is
/// CORRUPT in rank 0's state vector, later posts to it fail at once, and traffic with rank 2
/// goes on.
#[test]
fn error_completion_marks_peer_corrupt() {
    if let Some(out) = job("error_completion_marks_peer_corrupt", 3) {
        out.assert_success();
        return;
    }
    let ctx = setup();
    match ctx.rank().0 {
        0 => {
            ctx.barrier(Group::ALL, T).unwrap();
            // A first write looks the segment's keys up (a directory read); the fault hits
            // the data write after it.
            ctx.write(Local::new(S, 0), Remote::new(Rank(1), S, 0), 8, Q)
                .unwrap();
            ctx.wait(Q, T).unwrap();
            assert!(ctx.fail_next_verbs_request());
            ctx.write(Local::new(S, 0), Remote::new(Rank(1), S, 0), 4096, Q)
                .unwrap();
            let w = ctx.wait(Q, T);
            assert!(
                matches!(w, Err(Error::PeerFailed { rank: Rank(1) })),
                "{w:?}"
            );
            assert_eq!(ctx.state_vec()[1], PeerState::Corrupt);
            assert_eq!(ctx.state_vec()[2], PeerState::Healthy);
            let again = ctx.write(Local::new(S, 0), Remote::new(Rank(1), S, 0), 8, Q);
            assert!(matches!(again, Err(Error::PeerFailed { .. })), "{again:?}");
            ctx.wait(Q, T).unwrap();
            ctx.notify(S, Rank(2), NotificationId(1), 1, Q).unwrap();
            ctx.wait(Q, T).unwrap();
        }
        1 => {
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.notify_waitsome(S, NotificationId(2), 1, T).unwrap();
        }
        _ => {
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.notify_waitsome(S, NotificationId(1), 1, T).unwrap();
            ctx.notify(S, Rank(1), NotificationId(2), 1, Q).unwrap();
            ctx.wait(Q, T).unwrap();
        }
    }
    ctx.term(T).unwrap();
    std::process::exit(0);
}

/// Rank 2 dies by SIGKILL in the middle of a verbs stream from rank 0: rank 0's posts or
/// waits fail with `PeerFailed { rank: 2 }` instead of hanging, and ranks 0 and 1 go on.
#[test]
fn killed_peer_over_verbs() {
    if let Some(out) = job("killed_peer_over_verbs", 3) {
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
        return;
    }
    let ctx = setup();
    match ctx.rank().0 {
        0 => {
            let mut round = 0u32;
            let err = loop {
                let step = ctx
                    .write_notify(
                        Local::new(S, 0),
                        Remote::new(Rank(2), S, 4096),
                        65536,
                        NotificationId(0),
                        round + 1,
                        Q,
                    )
                    .and_then(|_| ctx.wait(Q, T))
                    .and_then(|_| ctx.notify_waitsome(S, NotificationId(1), 1, Timeout::BLOCK));
                match step {
                    Ok(id) => {
                        ctx.notify_reset(S, id).unwrap();
                    }
                    Err(e) => break e,
                }
                round += 1;
            };
            assert!(round >= 10, "rank 2 died too early ({round})");
            assert!(
                matches!(err, Error::PeerFailed { rank: Rank(2) }),
                "{err:?}"
            );
            assert_eq!(ctx.state_vec()[2], PeerState::Corrupt);
            let posted = ctx.write(Local::new(S, 0), Remote::new(Rank(2), S, 0), 8, Q);
            assert!(
                matches!(posted, Err(Error::PeerFailed { .. })),
                "{posted:?}"
            );
            let _ = ctx.wait(Q, T);
            ctx.notify(S, Rank(1), NotificationId(5), 1, Q).unwrap();
            ctx.wait(Q, T).unwrap();
        }
        1 => match ctx.notify_waitsome(S, NotificationId(5), 1, Timeout::BLOCK) {
            // Rank 2's death may wake this wait first (once); then rank 0's word comes.
            Err(Error::PeerFailed { rank: Rank(2) }) => {
                ctx.notify_waitsome(S, NotificationId(5), 1, T).unwrap();
            }
            Ok(id) => assert_eq!(id, NotificationId(5)),
            other => panic!("{other:?}"),
        },
        _ => {
            for round in 0..50u32 {
                let id = ctx.notify_waitsome(S, NotificationId(0), 1, T).unwrap();
                assert_eq!(ctx.notify_reset(S, id).unwrap(), round + 1);
                if round == 20 {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::this(),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                ctx.notify(S, Rank(0), NotificationId(1), 1, Q).unwrap();
                ctx.wait(Q, T).unwrap();
            }
        }
    }
    ctx.term(T).unwrap();
    std::process::exit(0);
}
