//! From a chosen algorithm to the per-rank schedules of an allreduce: the one place that
//! knows which schedule builder each [`Algorithm`] stands for, shared by the collective's
//! setup and by anything that replays schedules without a runtime.

use crate::options::Algorithm;
use crate::schedule::{self, Schedule, Shape};

/// What one rank replays for an allreduce.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Schedules the runs cycle through (two for recursive doubling, whose staging
    /// alternates between runs; one otherwise).
    pub schedules: Vec<Schedule>,
    /// The largest single write the schedules post, in bytes (checked against the
    /// transport's limit at setup; 0 when every write is at most one chunk).
    pub largest_send: usize,
}

/// The plan of `algorithm` for the rank and vector `shape` describes; `avg` divides the
/// result by the number of ranks. `Auto` must have been resolved (it plans as the ring).
pub(crate) fn allreduce_plan(algorithm: Algorithm, shape: &Shape, avg: bool) -> Plan {
    let bytes = shape.count * shape.elem;
    match algorithm {
        Algorithm::RecursiveDoubling => Plan {
            schedules: (0..2)
                .map(|q| schedule::recursive_doubling(shape, avg, q))
                .collect(),
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
            schedules: vec![schedule::rabenseifner(shape, avg)],
            largest_send: bytes / 2 + shape.elem,
        },
        Algorithm::Ring | Algorithm::Auto => Plan {
            schedules: vec![schedule::ring(shape, avg)],
            largest_send: 0,
        },
    }
}
