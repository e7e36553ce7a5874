//! Collectives over [`gaspi`]: allreduce (pipelined ring, recursive doubling, Rabenseifner,
//! and hierarchical across hosts) and broadcast (binomial tree, pipelined chain), for `f32`,
//! `f64`, `f16`, `bf16`, `i32`, `i64`, `u32` and `u64` with SUM, MIN, MAX, PROD and AVG.
//!
//! A collective is set up once for a group, a size and a type ([`Allreduce::new`],
//! [`Broadcast::new`]): that allocates its own segment and notification ids, so many can be
//! in flight at once. Each run is `start` then `test`/`wait`. The collective is driven
//! forward by the calling thread inside `test`/`wait`, or by a thread of the collective's
//! own ([`Driver::Thread`]). Results are bit-identical on every member and from run to run.
//!
//! Errors say what a caller can act on ([`Error`]): a timeout resumes
//! ([`Error::is_timeout`]), a failed run names its cause ([`Error::Failed`],
//! [`Error::peer_failed`]), and a bad setup says which argument or member disagrees.
//!
//! ```
//! use std::sync::Arc;
//! use allreduce::{Allreduce, Options, Reduction};
//! use gaspi::{Context, Group, Timeout};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Arc::new(Context::init()?); // one rank without a launcher
//! let n = ctx.num_ranks() as f32;
//! let mut sum =
//!     Allreduce::<f32>::new(&ctx, Group::ALL, 1000, Reduction::Sum, Options::default())?;
//! for step in 0..3 {
//!     sum.input_mut()?.fill(step as f32);
//!     sum.start()?;
//!     // ... overlap other work here, polling with sum.test()? ...
//!     let out = sum.wait(Timeout::ms(10_000))?;
//!     assert!(out.iter().all(|x| *x == step as f32 * n));
//! }
//!
//! // One-shot helpers set up, run and free a collective.
//! let mut weights = vec![0.5f64; 10];
//! allreduce::broadcast(&ctx, Group::ALL, gaspi::Rank(0), &mut weights, Timeout::BLOCK)?;
//! # drop(sum);
//! # Ok(())
//! # }
//! ```
//!
//! Algorithms and their thresholds are described on [`Options`] and in `docs/allreduce.md`;
//! [`sim`] predicts every algorithm's time on a model of the machine by replaying the real
//! schedules of all ranks.

mod algorithm;
mod broadcast;
mod collective;
mod driver;
mod element;
mod engine;
mod error;
mod host_cache;
mod options;
mod plan;
mod queue;
mod reduce;
mod reduction;
mod region;
mod schedule;
mod setup;
pub mod sim;
mod simd;
mod stream_copy;
mod thresholds;
mod widen;

use std::sync::Arc;

use gaspi::{Context, Group, Rank, Timeout};

pub use algorithm::Algorithm;
pub use broadcast::Broadcast;
pub use element::{DataType, Element};
pub use error::{Error, Result};
pub use half::{bf16, f16};
pub use options::{Driver, Options, NET_CHUNK_BYTES, SHM_CHUNK_BYTES};
pub use queue::QUEUES_MAX;
pub use reduce::Allreduce;
pub use reduction::Reduction;
pub use thresholds::Thresholds;

/// Reduces `data` in place over `group` (sets up a collective, runs it once, frees it).
/// For repeated reductions keep an [`Allreduce`] instead.
pub fn allreduce<T: Element>(
    ctx: &Arc<Context>,
    group: Group,
    data: &mut [T],
    reduction: Reduction,
    timeout: Timeout,
) -> Result<()> {
    let mut ar = Allreduce::new(ctx, group, data.len(), reduction, Options::default())?;
    ar.start_from(data)?;
    data.copy_from_slice(ar.wait(timeout)?);
    Ok(())
}

/// Broadcasts `data` from `root` to every member of `group`, in place (sets up a
/// collective, runs it once, frees it).
pub fn broadcast<T: Element>(
    ctx: &Arc<Context>,
    group: Group,
    root: Rank,
    data: &mut [T],
    timeout: Timeout,
) -> Result<()> {
    let mut bc = Broadcast::new(ctx, group, data.len(), root, Options::default())?;
    bc.start_from(data)?;
    data.copy_from_slice(bc.wait(timeout)?);
    Ok(())
}
