//! From a chosen algorithm to the per-rank schedules of an allreduce: the one place that
//! knows which schedule builder each [`Algorithm`] stands for, shared by the collective's
//! setup and by anything that replays schedules without a runtime.

use crate::algorithm::Algorithm;
use crate::element::{DataType, Element};
use crate::reduction::Reduction;
use crate::schedule::{self, Action, HostMemory, Schedule, Shape};
use crate::thresholds::Thresholds;

/// Where an average divides by the number of ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Averaging {
    /// Nowhere: the reduction is not AVG.
    None,
    /// Each member divides its own vector before the sum, as NCCL's average and PyTorch
    /// DDP's gradient averaging do: `f16`, whose largest value is 65504, so that sums of
    /// values in its range stay in it (two ranks of 40000 summed to infinity before the
    /// division). It costs a pass over the whole vector where dividing at the end costs
    /// one over each member's block, and rounds every term.
    Before,
    /// The sum is divided once at the end, by each block's owner: the wider floating-point
    /// types, whose sums of realistic values do not overflow, and integers, where dividing
    /// first would drop each member's remainder (the sum wraps on overflow, as SUM does).
    After,
}

impl Averaging {
    /// How `reduction` over elements of `T` averages.
    pub(crate) fn of<T: Element>(reduction: Reduction) -> Self {
        match reduction {
            Reduction::Avg if T::DATA_TYPE == DataType::F16 => Averaging::Before,
            Reduction::Avg => Averaging::After,
            _ => Averaging::None,
        }
    }
}

/// What one rank replays for an allreduce.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Schedules the runs cycle through (two where recursive doubling runs, whose staging
    /// alternates between runs; one otherwise).
    pub schedules: Vec<Schedule>,
}

/// The plan of `algorithm` for the rank and vector `shape` describes, over a group laid out
/// on hosts as `hosts` (member indices per host, partitioning the group: see
/// `schedule::host_layout`), this rank's host running the hierarchical allreduce's
/// intra-host phases as `host_memory` says, dividing by the number of ranks where
/// `averaging` says. `Auto` must have been resolved (it plans as the ring). The hierarchical allreduce
/// picks each unit's algorithm between hosts by `thresholds`, as [`Algorithm::Auto`] would
/// for a vector of the unit's size on that many ranks.
pub(crate) fn allreduce_plan(
    algorithm: Algorithm,
    shape: &Shape,
    hosts: &[Vec<usize>],
    host_memory: HostMemory,
    thresholds: &Thresholds,
    averaging: Averaging,
) -> Plan {
    let bytes = shape.count * shape.elem;
    let avg = averaging == Averaging::After;
    let mut schedules = match algorithm {
        Algorithm::RecursiveDoubling | Algorithm::OneShot => {
            (0..2).map(|q| flat(algorithm, shape, avg, q)).collect()
        }
        Algorithm::SingleCopy | Algorithm::Rabenseifner => {
            vec![flat(algorithm, shape, avg, 0)]
        }
        Algorithm::Ring | Algorithm::Auto => vec![flat(Algorithm::Ring, shape, avg, 0)],
        Algorithm::Hierarchical => {
            let build = |parity: usize| {
                let inter = move |sub: &Shape, avg: bool| {
                    let alg = thresholds.flat(sub.count * sub.elem, sub.ranks);
                    flat(alg, sub, avg, parity)
                };
                let pieces = hierarchical_pieces(shape, hosts);
                schedule::hierarchical(shape, hosts, pieces, host_memory, avg, &inter)
            };
            let (even, odd) = (build(0), build(1));
            // Two schedules only where an embedded recursive doubling alternates its slots.
            if odd.actions == even.actions {
                vec![even]
            } else {
                vec![even, odd]
            }
        }
    };
    if averaging == Averaging::Before && bytes > 0 {
        // Before anything is sent: peers read this rank's vector only after its first
        // notification.
        for s in &mut schedules {
            s.actions.insert(0, Action::Divide { off: 0, len: bytes });
        }
    }
    Plan { schedules }
}

/// At most this many pieces per shard: each piece's allreduce between hosts has its own
/// notification ids and pipeline fill, and at sixteen the first and last piece, whose
/// intra-host work is not overlapped, are a sixteenth of the whole each.
const HIERARCHICAL_MAX_PIECES: usize = 16;

/// Pieces of the hierarchical allreduce are this fraction of the pipelining chunk (256 KiB
/// across hosts). Measured on 2 netns hosts of 3 ranks at 2 Gbit/s (docs/allreduce.md,
/// session 12): against whole chunks and at most 8 pieces, 4 MiB took 17.9 ms instead of
/// 19.4, 16 MiB 72.6 instead of 73.7 and 64 MiB 291 instead of 295; the simulator agrees.
const HIERARCHICAL_PIECES_PER_CHUNK: usize = 4;

/// Pieces per shard of the hierarchical allreduce over `hosts`: a quarter of the pipelining
/// chunk each, so that the link between hosts carries one piece while the host reduces the
/// next (see `schedule/hierarchical.rs`), at most [`HIERARCHICAL_MAX_PIECES`]. From the
/// group's layout and the options alone, the same on every rank; one on one host, where
/// there is no link to overlap.
fn hierarchical_pieces(shape: &Shape, hosts: &[Vec<usize>]) -> usize {
    if hosts.len() < 2 {
        return 1;
    }
    let shards = hosts.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let shard_bytes = shape.count.div_ceil(shards) * shape.elem;
    let piece = (shape.chunk_bytes / HIERARCHICAL_PIECES_PER_CHUNK).max(1);
    (shard_bytes / piece).clamp(1, HIERARCHICAL_MAX_PIECES)
}

/// The schedule of a flat `algorithm` (`parity` alternates recursive doubling's slots).
fn flat(algorithm: Algorithm, shape: &Shape, avg: bool, parity: usize) -> Schedule {
    match algorithm {
        Algorithm::RecursiveDoubling => schedule::recursive_doubling(shape, avg, parity),
        Algorithm::Rabenseifner => schedule::rabenseifner(shape, avg),
        Algorithm::OneShot => schedule::one_shot(shape, avg, parity),
        Algorithm::SingleCopy => schedule::single_copy(shape, avg),
        // Hierarchical never nests (a shard's group has one rank per host).
        Algorithm::Ring | Algorithm::Auto | Algorithm::Hierarchical => schedule::ring(shape, avg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALGORITHMS: [Algorithm; 6] = [
        Algorithm::Ring,
        Algorithm::RecursiveDoubling,
        Algorithm::Rabenseifner,
        Algorithm::Hierarchical,
        Algorithm::OneShot,
        Algorithm::SingleCopy,
    ];

    fn shape(me: usize, ranks: usize, count: usize) -> Shape {
        Shape {
            me,
            ranks,
            count,
            elem: 4,
            chunk_bytes: 4096,
            notif_limit: 65536,
            ring_staging_bytes: schedule::RING_STAGING_BYTES,
            in_cache: true,
        }
    }

    fn plan(alg: Algorithm, me: usize, ranks: usize, count: usize, avg: Averaging) -> Plan {
        let hosts = [(0..ranks / 2).collect(), (ranks / 2..ranks).collect()];
        let memory = HostMemory::Shared;
        let t = Thresholds::default();
        allreduce_plan(alg, &shape(me, ranks, count), &hosts, memory, &t, avg)
    }

    fn divides(s: &Schedule) -> Vec<(usize, &Action)> {
        let d = s.actions.iter().enumerate();
        d.filter(|(_, a)| matches!(a, Action::Divide { .. }))
            .collect()
    }

    /// `f16` AVG divides each member's whole vector once, before anything else; the other
    /// types divide only at the end, as the schedules place it.
    #[test]
    fn an_average_divides_first_for_f16_and_last_for_the_others() {
        assert_eq!(
            Averaging::of::<half::f16>(Reduction::Avg),
            Averaging::Before
        );
        assert_eq!(
            Averaging::of::<half::bf16>(Reduction::Avg),
            Averaging::After
        );
        assert_eq!(Averaging::of::<f32>(Reduction::Avg), Averaging::After);
        assert_eq!(Averaging::of::<i32>(Reduction::Avg), Averaging::After);
        assert_eq!(Averaging::of::<f32>(Reduction::Sum), Averaging::None);
        for alg in ALGORITHMS {
            for me in 0..5 {
                for s in plan(alg, me, 5, 1000, Averaging::Before).schedules {
                    let whole = Action::Divide { off: 0, len: 4000 };
                    assert_eq!(divides(&s), [(0, &whole)], "{alg:?} rank {me}");
                }
                for s in plan(alg, me, 5, 1000, Averaging::After).schedules {
                    assert!(divides(&s).iter().all(|(i, _)| *i > 0), "{alg:?} rank {me}");
                }
                for s in plan(alg, me, 5, 1000, Averaging::None).schedules {
                    assert!(divides(&s).is_empty(), "{alg:?} rank {me}");
                }
            }
            // Some member divides its result (the rest may receive theirs divided).
            let after = (0..5).flat_map(|me| plan(alg, me, 5, 1000, Averaging::After).schedules);
            assert!(
                after.map(|s| divides(&s).len()).sum::<usize>() > 0,
                "{alg:?}"
            );
        }
    }
}
