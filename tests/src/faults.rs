//! The killed-peer scenario shared by the fault tests of every transport: rank 2 answers
//! rank 0's messages, dies by SIGKILL in the middle of them, and rank 1 (not talking to rank 2)
//! learns of the failure.

use gaspi::{Context, Error, NotificationId, PeerState, QueueId, Rank, SegmentId, Timeout};

/// Rank 2's part: acknowledges rank 0's messages (notification 0, value = round + 1) with
/// notification 1, and kills itself after answering `die_after` rounds.
pub fn acknowledge_then_die(ctx: &Context, seg: SegmentId, q: QueueId, die_after: u32) -> ! {
    let timeout = Timeout::ms(20_000);
    for round in 0.. {
        let id = ctx
            .notify_waitsome(seg, NotificationId(0), 1, timeout)
            .unwrap();
        assert_eq!(ctx.notify_reset(seg, id).unwrap(), round + 1);
        if round == die_after {
            // Die in the middle of traffic.
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
        }
        ctx.notify(seg, Rank(0), NotificationId(1), 1, q).unwrap();
        ctx.wait(q, timeout).unwrap();
    }
    unreachable!("the loop only ends by SIGKILL")
}

/// Rank 1's part: blocked for rank 0's word (notification 5). Rank 2's death wakes it first,
/// once, with `PeerFailed`, and the next wait works normally; or rank 0's word lands first
/// (a shared-memory store can overtake this rank's own sight of the failure, a socket EOF
/// its progress thread has not handled yet), and then a wait that nothing satisfies ends
/// with the failure once it is seen. Either way rank 2 is CORRUPT here afterwards.
pub fn await_word_after_failure(ctx: &Context, seg: SegmentId) {
    let timeout = Timeout::ms(20_000);
    match ctx.notify_waitsome(seg, NotificationId(5), 1, Timeout::BLOCK) {
        Err(Error::PeerFailed { rank: Rank(2) }) => {
            ctx.notify_waitsome(seg, NotificationId(5), 1, timeout)
                .unwrap();
        }
        Ok(id) => {
            assert_eq!(id, NotificationId(5));
            let seen = ctx.notify_waitsome(seg, NotificationId(6), 1, timeout);
            assert!(
                matches!(seen, Err(Error::PeerFailed { rank: Rank(2) })),
                "{seen:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ctx.state_vec()[2], PeerState::Corrupt);
}
