//! The smoke test: every rank sends its rank to its right neighbour with `write_notify` and
//! reads its left neighbour's, then an allreduce of the ranks, a barrier and `term`; over TCP
//! (2 and 3 ranks), shared memory (2 and 5) and on a single rank.

use gaspi::*;
use tarantella_tests::spmd_cases;

spmd_cases!(
    ring,
    |ctx: Context| {
        let me = ctx.rank();
        let n = ctx.num_ranks();
        let seg = SegmentId(0);
        ctx.segment_create(
            seg,
            4096,
            Group::ALL,
            Timeout::ms(10_000),
            Alloc::Initialized,
        )
        .unwrap();
        ctx.segment(seg)
            .unwrap()
            .write(0, &[me.0 as u64 + 100])
            .unwrap();
        let right = Rank((me.0 + 1) % n);
        ctx.write_notify(
            Local::new(seg, 0),
            Remote::new(right, seg, 8),
            8,
            NotificationId(0),
            1,
            QueueId(0),
        )
        .unwrap();
        let id = ctx
            .notify_waitsome(seg, NotificationId(0), 1, Timeout::ms(10_000))
            .unwrap();
        assert_eq!(ctx.notify_reset(seg, id).unwrap(), 1);
        let got: u64 = ctx.segment(seg).unwrap().get(8).unwrap();
        assert_eq!(got, ((me.0 + n - 1) % n) as u64 + 100);
        ctx.wait(QueueId(0), Timeout::ms(10_000)).unwrap();
        let mut sum = [0u64];
        ctx.allreduce(
            &[me.0 as u64],
            &mut sum,
            ReduceOp::Sum,
            Group::ALL,
            Timeout::ms(10_000),
        )
        .unwrap();
        assert_eq!(sum[0], (0..n as u64).sum::<u64>());
        ctx.barrier(Group::ALL, Timeout::ms(10_000)).unwrap();
        ctx.term(Timeout::BLOCK).unwrap();
    },
    tcp_2 = (2, Tcp),
    tcp_3 = (3, Tcp),
    shm_2 = (2, Shm),
    shm_5 = (5, Shm),
    single = (1, Auto),
);
