//! The collectives under a context whose `transfer_size_max` is smaller than their writes:
//! every algorithm still runs, on every rank, because a longer write goes in pieces with
//! the notification on the last (before, the setup failed with `TransferTooLarge` on the
//! ranks whose block was over the limit and left the others waiting for them), and a
//! write that meets a full queue goes on from the piece it got to.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use allreduce::{Algorithm, Allreduce, Broadcast, Options, Reduction};
use common::{check_output, fill_input, LONG};
use gaspi::env::TransportChoice::{self, Shm, Tcp};
use gaspi::{Context, Group, Rank};

/// The limit: 4 KiB, where every algorithm's writes are several times longer.
const LIMIT: u64 = 4096;

fn small_writes(ctx: Arc<Context>) {
    assert_eq!(ctx.transfer_size_max(), LIMIT);
    let p = ctx.num_ranks() as usize;
    let me = ctx.rank().0 as usize;
    let mut algorithms = vec![
        Algorithm::Auto,
        Algorithm::RecursiveDoubling,
        Algorithm::Rabenseifner,
        Algorithm::Ring,
        Algorithm::OneShot,
    ];
    if (0..p as u16).all(|r| r == ctx.rank().0 || ctx.uses_shm_to(Rank(r))) {
        algorithms.push(Algorithm::SingleCopy);
    }
    // An odd count, so that the ranks' blocks differ in length: 30_001 f32 is 117 KiB.
    for algorithm in algorithms {
        for reduction in [Reduction::Sum, Reduction::Avg] {
            let o = Options {
                algorithm,
                ..Options::default()
            };
            let mut a = Allreduce::<f32>::new(&ctx, Group::ALL, 30_001, reduction, o).unwrap();
            for run in 0..2 {
                fill_input(a.input_mut().unwrap(), reduction, me);
                a.start().unwrap();
                let out = a.wait(LONG).unwrap();
                if let Err(e) = check_output(out, reduction, p) {
                    panic!("{algorithm:?} {reduction:?} run {run}: {e}");
                }
            }
        }
    }
    // The tree broadcast writes the whole vector at once (8000 f64, within `tree_max`), the
    // chain its chunks.
    let root = Rank(ctx.num_ranks() - 1);
    for count in [8000, 100_000] {
        let mut b =
            Broadcast::<f64>::new(&ctx, Group::ALL, count, root, Options::default()).unwrap();
        let buf = b.buffer_mut().unwrap();
        for (j, x) in buf.iter_mut().enumerate() {
            *x = if ctx.rank() == root { j as f64 } else { -1.0 };
        }
        b.start().unwrap();
        let out = b.wait(LONG).unwrap();
        assert!(
            out.iter().enumerate().all(|(j, x)| *x == j as f64),
            "{count}"
        );
    }
}

/// Recursive doubling's 64 MiB write, sixteen thousand pieces, through a queue of 1024
/// entries, driven by `test()` alone (which never waits): each call posts what fits and
/// goes on from there the next time. Starting the write over at each call, it never
/// finished (the test failed at its 60 s bound; it takes well under a second).
fn polled_through_a_small_queue(ctx: Arc<Context>) {
    let p = ctx.num_ranks() as usize;
    let me = ctx.rank().0 as usize;
    let o = Options {
        algorithm: Algorithm::RecursiveDoubling,
        ..Options::default()
    };
    let mut a = Allreduce::<f32>::new(&ctx, Group::ALL, 16 << 20, Reduction::Sum, o).unwrap();
    for run in 0..2 {
        fill_input(a.input_mut().unwrap(), Reduction::Sum, me);
        a.start().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !a.test().unwrap() {
            assert!(
                Instant::now() < deadline,
                "run {run} made no progress in 60 s"
            );
        }
        if let Err(e) = check_output(a.output().unwrap(), Reduction::Sum, p) {
            panic!("run {run}: {e}");
        }
    }
}

fn run(name: &str, n: u16, t: TransportChoice, queue: u32, body: fn(Arc<Context>)) {
    let config = gaspi::Config {
        transfer_size_max: LIMIT,
        queue_size_max: queue,
        ..gaspi::Config::default()
    };
    gaspi::testing::spmd_with(name, n, t, config, Duration::from_secs(120), |ctx| {
        let ctx = Arc::new(ctx);
        body(Arc::clone(&ctx));
        ctx.barrier(Group::ALL, LONG).unwrap();
    });
}

#[test]
fn writes_over_the_transfer_limit_go_in_pieces_shm_3() {
    let name = "writes_over_the_transfer_limit_go_in_pieces_shm_3";
    run(name, 3, Shm, 1024, small_writes);
}

#[test]
fn writes_over_the_transfer_limit_go_in_pieces_tcp_3() {
    let name = "writes_over_the_transfer_limit_go_in_pieces_tcp_3";
    run(name, 3, Tcp, 1024, small_writes);
}

#[test]
fn a_polled_write_in_pieces_resumes_where_the_queue_filled_tcp_2() {
    let name = "a_polled_write_in_pieces_resumes_where_the_queue_filled_tcp_2";
    run(name, 2, Tcp, 1024, polled_through_a_small_queue);
}
