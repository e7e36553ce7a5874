//! The allreduce object: set up once for a group, a size, a type and an operation, then
//! started many times.

use std::sync::Arc;

use gaspi::{Context, Group, Timeout};

use crate::algorithm::Algorithm;
use crate::collective::{set_up, Collective, GroupSetup};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::plan::{allreduce_plan, Averaging};
use crate::reduction::Reduction;
use crate::thresholds::Thresholds;

/// A reusable allreduce of `count` elements of `T` over a group.
///
/// Setting up allocates a segment and notification ids for this collective alone, so any
/// number of them can be in flight at once, started in any order on different ranks.
/// The data lives in that segment: fill [`input_mut`](Self::input_mut) (or pass a slice to
/// [`start_from`](Self::start_from)), [`start`](Self::start), then [`test`](Self::test)
/// or [`wait`](Self::wait) for the result. The result is bit-identical on every member.
pub struct Allreduce<T: Element> {
    /// The set-up collective.
    inner: Collective<T>,
    /// What [`Options::pick`] chose.
    algorithm: Algorithm,
    /// What every run applies.
    reduction: Reduction,
}

/// The second word of the setup signature the members compare (see `setup.rs`): which
/// collective (`kind`), element type, reduction and algorithm, a byte each, and 32 bits
/// more (`extra`).
fn kind_signature(kind: u64, dtype: u64, reduction: u64, alg: u64, extra: u32) -> u64 {
    kind | dtype << 8 | reduction << 16 | alg << 24 | u64::from(extra) << 32
}

/// 32 bits standing for what shapes the plan beyond the signature's other words (FNV-1a
/// over the hosts' sizes and members, then the thresholds), for the setup signature:
/// members that see different layouts, or pass different thresholds (which pick the
/// hierarchical allreduce's algorithm between hosts), would build schedules that do not
/// fit together, so they fail setup together with `SetupMismatch` instead of waiting on
/// each other.
fn plan_digest(hosts: &[Vec<usize>], thresholds: &Thresholds) -> u32 {
    let layout = hosts
        .iter()
        .flat_map(|m| std::iter::once(usize::MAX - m.len()).chain(m.iter().copied()));
    let words = layout
        .map(|w| w as u64)
        .chain([u64::MAX])
        .chain(thresholds.words());
    let h = words.fold(0xcbf29ce484222325u64, |h, w| {
        (h ^ w).wrapping_mul(0x100000001b3)
    });
    (h ^ h >> 32) as u32
}

impl<T: Element> Allreduce<T> {
    /// Sets up the collective. Collective over `group`: every member calls it with the
    /// same count, reduction and options, in the same order relative to the other collective
    /// constructors of this crate (it allocates a segment on all members).
    pub fn new(
        ctx: &Arc<Context>,
        group: Group,
        count: usize,
        reduction: Reduction,
        options: Options,
    ) -> Result<Self> {
        let options = options.resolved()?;
        let setup = set_up::<T>(ctx, group, count, &options, options.algorithm.tag() as u32)?;
        let GroupSetup { shape, hosts, .. } = &setup;
        let bytes = count * shape.elem;
        let algorithm = options.pick(bytes, hosts, setup.all_shared_memory);
        if algorithm == Algorithm::SingleCopy && !setup.all_shared_memory {
            // On every member (they agreed on what they asked for and on the transport):
            // nobody goes on to create the segment alone.
            return Err(Error::AlgorithmUnavailable {
                algorithm,
                why: "some member is not reached through shared memory",
            });
        }
        let averaging = Averaging::of::<T>(reduction);
        let plan = allreduce_plan(
            algorithm,
            shape,
            hosts,
            setup.host_memory,
            &options.thresholds,
            averaging,
        );
        let signature = [
            count as u64,
            kind_signature(
                1,
                T::DATA_TYPE as u64,
                reduction as u64,
                algorithm.tag(),
                plan_digest(hosts, &options.thresholds),
            ),
            shape.chunk_bytes as u64,
        ];
        let inner = Collective::new(
            ctx,
            group,
            setup.members,
            count,
            reduction,
            plan.schedules,
            signature,
            setup.streams,
            &options,
        )?;
        tracing::debug!(count, ?reduction, ?algorithm, "allreduce set up");
        Ok(Allreduce {
            inner,
            algorithm,
            reduction,
        })
    }

    /// Elements per run.
    pub fn count(&self) -> usize {
        self.inner.count()
    }

    /// The algorithm in use (never `Auto`): what [`Options::algorithm`] asked for, or what
    /// `Auto` picked for this size and layout of the group on hosts.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The reduction every run applies (fixed at setup, agreed by all members).
    pub fn reduction(&self) -> Reduction {
        self.reduction
    }

    /// The input buffer, to fill in place before [`start`](Self::start) (no extra copy).
    /// After a run it holds the result. Fails while a run is in flight.
    pub fn input_mut(&mut self) -> Result<&mut [T]> {
        self.inner.buffer_mut()
    }

    /// Starts a run over the current contents of [`input_mut`](Self::input_mut).
    pub fn start(&mut self) -> Result<()> {
        self.inner.start()
    }

    /// Copies `data` (exactly `count` elements) in and starts a run.
    pub fn start_from(&mut self, data: &[T]) -> Result<()> {
        self.inner.start_from(data)
    }

    /// Makes progress without blocking; `true` once the run is complete.
    pub fn test(&mut self) -> Result<bool> {
        self.inner.test()
    }

    /// Waits for the run to complete and returns the result. On
    /// [`Error::Timeout`](crate::Error::Timeout) the run goes on: call again.
    pub fn wait(&mut self, timeout: Timeout) -> Result<&[T]> {
        self.inner.wait(timeout)
    }

    /// The result of the last completed run.
    pub fn output(&self) -> Result<&[T]> {
        self.inner.output()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_and_thresholds_have_different_digests() {
        let t = Thresholds::default();
        let layouts = [
            vec![vec![0, 1], vec![2, 3]],
            vec![vec![0, 2], vec![1, 3]],
            vec![vec![0, 1, 2], vec![3]],
            vec![vec![0], vec![1, 2, 3]],
            vec![vec![0, 1, 2, 3]],
            vec![vec![0], vec![1], vec![2], vec![3]],
        ];
        let mut digests: Vec<u32> = layouts.iter().map(|l| plan_digest(l, &t)).collect();
        // The hierarchical allreduce between hosts picks its algorithm by the thresholds.
        for other in [
            Thresholds {
                ring_min: t.ring_min * 2,
                ..t
            },
            Thresholds {
                small_max: t.small_max / 2,
                ..t
            },
            Thresholds {
                single_copy_min: t.single_copy_min + 1,
                ..t
            },
            Thresholds {
                single_copy_min_two_ranks: t.single_copy_min_two_ranks + 1,
                ..t
            },
        ] {
            digests.push(plan_digest(&layouts[0], &other));
        }
        for (i, a) in digests.iter().enumerate() {
            for b in &digests[i + 1..] {
                assert_ne!(a, b, "{layouts:?}");
            }
        }
        assert_eq!(digests[0], plan_digest(&[vec![0, 1], vec![2, 3]], &t));
    }
}
