//! Benchmarks of the tarantella workspace and the helpers they share.
//!
//! - `gaspi-p2p` (binary): point-to-point latency and bandwidth of the runtime.
//! - `allreduce-sweep` (binary): the nccl-tests table for allreduce or broadcast.
//! - `benches/collectives.rs` (criterion): allreduce and broadcast at 2 and 4 ranks.
//!
//! Multi-rank benchmarks start their peer ranks once through [`gaspi::testing::Job`]: the
//! process re-executes itself with [`ROLE`] set, and rank 0 reports.

use std::sync::Arc;
use std::time::Instant;

use allreduce::{Algorithm, Allreduce, Broadcast, Op, Options};
use gaspi::{Context, Group, Rank, ReduceOp, Timeout};

/// Set in the rank processes a benchmark starts.
pub const ROLE: &str = "TNT_BENCH_ROLE";

const T: Timeout = Timeout(120_000);

/// `4K`, `64M`, `1G` or plain bytes.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .map(|n| n * mult)
        .map_err(|_| format!("bad size {s:?} (use e.g. 4K, 64M)"))
}

/// `algbw` and `busbw` in GB/s, as nccl-tests computes them for allreduce.
pub fn allreduce_bw(bytes: usize, secs: f64, ranks: usize) -> (f64, f64) {
    let alg = bytes as f64 / secs / 1e9;
    (alg, alg * 2.0 * (ranks as f64 - 1.0) / ranks as f64)
}

/// Iterations that keep one measurement near `budget_bytes` of traffic (at least 5).
pub fn iterations(bytes: usize, budget_bytes: usize) -> usize {
    (budget_bytes / bytes.max(1)).clamp(5, 2000)
}

/// The largest of every rank's `v`.
pub fn max_over_ranks(ctx: &Context, v: f64) -> gaspi::Result<f64> {
    let mut out = [0f64];
    ctx.allreduce(&[v], &mut out, ReduceOp::Max, Group::ALL, T)?;
    Ok(out[0])
}

/// Rank `r`'s input element `j`: small integers, so the exact sum is known.
fn input(rank: usize, j: usize) -> f32 {
    ((rank + 1) * (j % 7 + 1)) as f32
}

/// One timed allreduce measurement, the same on every rank.
pub struct Timed {
    /// Seconds per operation, the maximum over ranks of each rank's median batch.
    pub secs: f64,
    /// Largest absolute error against the exact sum, over all ranks.
    pub max_err: f64,
}

/// Times `iters` in-place f32 SUM allreduces of `count` elements (after a warm-up), in
/// `batches` batches; returns the max over ranks of the median batch.
pub fn time_allreduce(
    ctx: &Arc<Context>,
    count: usize,
    algorithm: Algorithm,
    iters: usize,
    batches: usize,
) -> Result<Timed, allreduce::Error> {
    let me = ctx.rank().0 as usize;
    let p = ctx.num_ranks() as usize;
    let o = Options {
        algorithm,
        ..Options::default()
    };
    let mut ar = Allreduce::<f32>::new(ctx, Group::ALL, count, Op::Sum, o)?;
    let fill = |ar: &mut Allreduce<f32>| -> Result<(), allreduce::Error> {
        for (j, x) in ar.input_mut()?.iter_mut().enumerate() {
            *x = input(me, j);
        }
        Ok(())
    };
    fill(&mut ar)?;
    ar.start()?;
    let mut max_err = 0f64;
    for (j, x) in ar.wait(T)?.iter().enumerate() {
        let want: f32 = (0..p).map(|r| input(r, j)).sum();
        max_err = max_err.max((f64::from(*x) - f64::from(want)).abs());
    }
    let mut samples = Vec::with_capacity(batches);
    for _ in 0..batches {
        ctx.barrier(Group::ALL, T)?;
        let t = Instant::now();
        for _ in 0..iters {
            // In place, as nccl-tests: each run reduces the previous result.
            ar.start()?;
            ar.wait(T)?;
        }
        samples.push(t.elapsed().as_secs_f64() / iters as f64);
    }
    samples.sort_by(f64::total_cmp);
    let secs = max_over_ranks(ctx, samples[samples.len() / 2])?;
    let max_err = max_over_ranks(ctx, max_err)?;
    Ok(Timed { secs, max_err })
}

/// Times `iters` f32 broadcasts of `count` elements from rank 0 (max over ranks).
pub fn time_broadcast(
    ctx: &Arc<Context>,
    count: usize,
    iters: usize,
) -> Result<f64, allreduce::Error> {
    let mut b = Broadcast::<f32>::new(ctx, Group::ALL, count, Rank(0), Options::default())?;
    b.buffer_mut()?.fill(1.5);
    b.start()?;
    b.wait(T)?;
    ctx.barrier(Group::ALL, T)?;
    let t = Instant::now();
    for _ in 0..iters {
        b.start()?;
        b.wait(T)?;
    }
    let secs = t.elapsed().as_secs_f64() / iters as f64;
    Ok(max_over_ranks(ctx, secs)?)
}
