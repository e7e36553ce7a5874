//! GASPI's statistics counters.

mod common;

use common::{setup, T};
use gaspi::env::TransportChoice;
use gaspi::*;

/// Statistics counters count what this rank posted and can be reset.
#[test]
fn statistic_counters() {
    gaspi::testing::spmd("statistic_counters", 2, TransportChoice::Shm, |ctx| {
        let seg = setup(&ctx);
        assert_eq!(ctx.statistic_counter_max(), Counter::ALL.len() as u32);
        for c in Counter::ALL {
            ctx.statistic_counter_reset(c);
        }
        let peer = Rank(1 - ctx.rank().0);
        ctx.write(
            Local::new(seg, 0),
            Remote::new(peer, seg, 0),
            100,
            QueueId(0),
        )
        .unwrap();
        ctx.write_notify(
            Local::new(seg, 0),
            Remote::new(peer, seg, 0),
            50,
            NotificationId(1),
            1,
            QueueId(0),
        )
        .unwrap();
        ctx.read(
            Local::new(seg, 0),
            Remote::new(peer, seg, 0),
            30,
            QueueId(0),
        )
        .unwrap();
        ctx.wait(QueueId(0), T).unwrap();
        ctx.passive_send(seg, 0, peer, 8, T).unwrap();
        ctx.passive_receive(seg, 64, 8, T).unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        assert_eq!(ctx.statistic_counter_get(Counter::BytesWritten), 150);
        assert_eq!(ctx.statistic_counter_get(Counter::BytesRead), 30);
        assert_eq!(ctx.statistic_counter_get(Counter::OpsPosted), 4);
        assert_eq!(ctx.statistic_counter_get(Counter::Barriers), 1);
        // Shared-memory peers get passive messages over the TCP control channel.
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentTcp), 1);
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentVerbs), 0);
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveReceivedVerbs), 0);
        assert_eq!(Counter::from_index(1).unwrap().info().0, "BytesRead");
        assert_eq!(Counter::from_index(5).unwrap(), Counter::PassiveSentTcp);
        assert!(Counter::from_index(Counter::ALL.len() as u32).is_err());
        ctx.statistic_counter_reset(Counter::BytesWritten);
        assert_eq!(ctx.statistic_counter_get(Counter::BytesWritten), 0);
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.term(T).unwrap();
    });
}
