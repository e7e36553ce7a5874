//! Failures on the verbs path (fake device): an error completion and a dead peer mark the
//! peer CORRUPT, `wait` reports `PeerFailed`, and the survivors go on.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use gaspi::testing::spmd_job;
use gaspi::*;
use tarantella_tests::faults::{acknowledge_then_die, await_word_after_failure};
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
    // A rank that finishes `segment_create` first must not fail or die while another still
    // waits there for its acknowledgement: faults start once everybody is set up.
    ctx.barrier(Group::ALL, T).unwrap();
    ctx
}

/// Rank 0's write to rank 1 completes with an error: `wait` returns `PeerFailed`, rank 1 is
/// CORRUPT in rank 0's state vector, a later post to it fails at the next `wait`, and
/// traffic with rank 2 goes on.
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
            // As in GPI-2: a later post to it succeeds and the next wait reports it.
            ctx.write(Local::new(S, 0), Remote::new(Rank(1), S, 0), 8, Q)
                .unwrap();
            let again = ctx.wait(Q, T);
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
            // As in GPI-2: posting to the dead rank succeeds and the next wait reports it.
            let _ = ctx.wait(Q, T);
            ctx.write(Local::new(S, 0), Remote::new(Rank(2), S, 0), 8, Q)
                .unwrap();
            let waited = ctx.wait(Q, T);
            assert!(
                matches!(waited, Err(Error::PeerFailed { rank: Rank(2) })),
                "{waited:?}"
            );
            ctx.wait(Q, T).unwrap();
            ctx.notify(S, Rank(1), NotificationId(5), 1, Q).unwrap();
            ctx.wait(Q, T).unwrap();
        }
        1 => await_word_after_failure(&ctx, S),
        _ => acknowledge_then_die(&ctx, S, Q, 20),
    }
    ctx.term(T).unwrap();
    std::process::exit(0);
}

/// An error completion on a passive SEND (injected): `passive_send` returns `PeerFailed`,
/// the target is CORRUPT in the sender's state vector and later sends to it fail at once,
/// nothing arrives there, and passive messages to the third rank still go over verbs.
#[test]
fn passive_send_error_marks_peer_corrupt() {
    if let Some(out) = job("passive_send_error_marks_peer_corrupt", 3) {
        out.assert_success();
        return;
    }
    let ctx = setup();
    let seg = ctx.segment(S).unwrap();
    seg.write(0, &[7u8; 64]).unwrap();
    ctx.barrier(Group::ALL, T).unwrap();
    match ctx.rank().0 {
        0 => {
            assert!(ctx.fail_next_verbs_request());
            let sent = ctx.passive_send(S, 0, Rank(1), 64, T);
            assert!(
                matches!(sent, Err(Error::PeerFailed { rank: Rank(1) })),
                "{sent:?}"
            );
            assert_eq!(ctx.state_vec()[1], PeerState::Corrupt);
            assert_eq!(ctx.state_vec()[2], PeerState::Healthy);
            let again = ctx.passive_send(S, 0, Rank(1), 64, T);
            assert!(matches!(again, Err(Error::PeerFailed { .. })), "{again:?}");
            ctx.passive_send(S, 0, Rank(2), 64, T).unwrap();
            assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentVerbs), 1);
            assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentTcp), 0);
        }
        1 => {
            ctx.notify_waitsome(S, NotificationId(2), 1, T).unwrap();
            let none = ctx.passive_receive(S, 4096, 64, Timeout::TEST);
            assert!(matches!(none, Err(Error::Timeout)), "{none:?}");
        }
        _ => {
            assert_eq!(ctx.passive_receive(S, 4096, 64, T).unwrap(), (Rank(0), 64));
            assert_eq!(ctx.statistic_counter_get(Counter::PassiveReceivedVerbs), 1);
            ctx.notify(S, Rank(1), NotificationId(2), 1, Q).unwrap();
            ctx.wait(Q, T).unwrap();
        }
    }
    ctx.term(T).unwrap();
    std::process::exit(0);
}

/// Rank 1 receives nothing, so rank 0's third passive message (2 receive buffers) waits
/// for a buffer and times out; then rank 1 is SIGKILLed. Resuming that send without a
/// timeout returns `PeerFailed` instead of hanging, and rank 0 goes on with rank 2.
#[test]
fn passive_send_to_killed_peer() {
    let net = Net::FakeVerbs;
    let name = "passive_send_to_killed_peer";
    let out = spmd_job(name, 3, net.transport(), Duration::from_secs(60), |j| {
        j.env.extend(net.env());
        j.env.push(("GASPI_IB_PASSIVE_DEPTH".into(), "2".into()));
    });
    if let Some(out) = out {
        assert!(!out.timed_out, "{}", out.report());
        let signal = out.ranks[1].status.and_then(|s| s.signal());
        assert_eq!(signal, Some(9), "{}", out.report());
        for r in [&out.ranks[0], &out.ranks[2]] {
            assert!(r.status.is_some_and(|s| s.success()), "{}", out.report());
        }
        return;
    }
    let ctx = setup();
    ctx.barrier(Group::ALL, T).unwrap();
    match ctx.rank().0 {
        0 => {
            for _ in 0..2 {
                ctx.passive_send(S, 0, Rank(1), 64, T).unwrap();
            }
            let waiting = ctx.passive_send(S, 0, Rank(1), 64, Timeout::ms(50));
            assert!(matches!(waiting, Err(Error::Timeout)), "{waiting:?}");
            ctx.notify(S, Rank(1), NotificationId(0), 1, Q).unwrap();
            ctx.wait(Q, T).unwrap();
            let resumed = ctx.passive_send(S, 0, Rank(1), 64, Timeout::BLOCK);
            assert!(
                matches!(resumed, Err(Error::PeerFailed { rank: Rank(1) })),
                "{resumed:?}"
            );
            ctx.passive_send(S, 0, Rank(2), 64, T).unwrap();
        }
        1 => {
            ctx.notify_waitsome(S, NotificationId(0), 1, T).unwrap();
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
            unreachable!("killed");
        }
        _ => {
            assert_eq!(ctx.passive_receive(S, 0, 64, T).unwrap(), (Rank(0), 64));
        }
    }
    ctx.term(T).unwrap();
    std::process::exit(0);
}
