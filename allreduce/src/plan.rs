//! From a chosen algorithm to the per-rank schedules of an allreduce: the one place that
//! knows which schedule builder each [`Algorithm`] stands for, shared by the collective's
//! setup and by anything that replays schedules without a runtime.

use crate::algorithm::Algorithm;
use crate::options::Thresholds;
use crate::schedule::{self, Action, HostMemory, Schedule, Shape};

/// What one rank replays for an allreduce.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Schedules the runs cycle through (two where recursive doubling runs, whose staging
    /// alternates between runs; one otherwise).
    pub schedules: Vec<Schedule>,
    /// The largest single write the schedules post, in bytes (checked against the
    /// transport's limit at setup; 0 when every write is at most one chunk).
    pub largest_send: usize,
}

/// The plan of `algorithm` for the rank and vector `shape` describes, over a group laid out
/// on hosts as `hosts` (member indices per host, partitioning the group: see
/// `schedule::host_layout`), this rank's host running the hierarchical allreduce's
/// intra-host phases as `host_memory` says; `avg` divides the result by the number of
/// ranks. `Auto` must have been resolved (it plans as the ring). The hierarchical allreduce
/// picks each unit's algorithm between hosts by `thresholds`, as [`Algorithm::Auto`] would
/// for a vector of the unit's size on that many ranks.
pub(crate) fn allreduce_plan(
    algorithm: Algorithm,
    shape: &Shape,
    hosts: &[Vec<usize>],
    host_memory: HostMemory,
    thresholds: &Thresholds,
    avg: bool,
) -> Plan {
    let bytes = shape.count * shape.elem;
    match algorithm {
        Algorithm::RecursiveDoubling => Plan {
            schedules: (0..2).map(|q| flat(algorithm, shape, avg, q)).collect(),
            largest_send: bytes,
        },
        Algorithm::OneShot => Plan {
            schedules: (0..2).map(|q| schedule::one_shot(shape, avg, q)).collect(),
            largest_send: bytes,
        },
        Algorithm::SingleCopy => Plan {
            schedules: vec![schedule::single_copy(shape, avg)],
            largest_send: 0,
        },
        Algorithm::Rabenseifner => Plan {
            schedules: vec![flat(algorithm, shape, avg, 0)],
            largest_send: bytes / 2 + shape.elem,
        },
        Algorithm::Ring | Algorithm::Auto => Plan {
            schedules: vec![flat(Algorithm::Ring, shape, avg, 0)],
            largest_send: 0,
        },
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
            let schedules = if odd.actions == even.actions {
                vec![even]
            } else {
                vec![even, odd]
            };
            let largest_send = schedules
                .iter()
                .flat_map(|s| &s.actions)
                .map(|a| match a {
                    Action::Send { len, .. } => *len,
                    _ => 0,
                })
                .max()
                .unwrap_or(0);
            Plan {
                schedules,
                largest_send,
            }
        }
    }
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
