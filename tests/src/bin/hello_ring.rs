//! Every rank passes a token around the ring with `write_notify`, then all ranks agree on a
//! sum with the small allreduce. Run it with the launcher:
//! `tarantella -n 4 -- target/release/hello_ring`

use gaspi::{
    Alloc, Context, Group, Local, NotificationId, QueueId, Rank, ReduceOp, Remote, SegmentId,
    Timeout,
};

fn main() -> gaspi::Result<()> {
    // A binary chooses its logging; this one shows the runtime's at GASPI_LOG's level.
    gaspi::log::init_from_env();
    let ctx = Context::init()?;
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let seg = SegmentId(0);
    let t = Timeout::ms(30_000);
    ctx.segment_create(seg, 4096, Group::ALL, t, Alloc::Initialized)?;
    let segment = ctx.segment(seg)?;

    // The token starts at rank 0 and gains 1 at every hop.
    let right = Rank((me.0 + 1) % n);
    if me.0 != 0 {
        let id = ctx.notify_waitsome(seg, NotificationId(0), 1, t)?;
        ctx.notify_reset(seg, id)?;
    }
    let token: u64 = if me.0 == 0 { 0 } else { segment.get(8)? };
    segment.write(0, &[token + 1])?;
    if n > 1 {
        ctx.write_notify(
            Local::new(seg, 0),
            Remote::new(right, seg, 8),
            8,
            NotificationId(0),
            1,
            QueueId(0),
        )?;
        ctx.wait(QueueId(0), t)?;
    }
    if me.0 == 0 && n > 1 {
        let id = ctx.notify_waitsome(seg, NotificationId(0), 1, t)?;
        ctx.notify_reset(seg, id)?;
        let back: u64 = segment.get(8)?;
        assert_eq!(back, u64::from(n), "the token made one hop per rank");
    }
    let mut sum = [0u64];
    ctx.allreduce(&[u64::from(me.0)], &mut sum, ReduceOp::Sum, Group::ALL, t)?;
    ctx.barrier(Group::ALL, t)?;
    let shm_peers = (0..n)
        .filter(|r| *r != me.0 && ctx.uses_shm_to(Rank(*r)))
        .count();
    println!(
        "rank {me}/{n}: token ring ok, sum of ranks = {} (shared memory to {shm_peers} peers, TCP to {})",
        sum[0],
        n as usize - 1 - shm_peers
    );
    ctx.term(t)
}
