//! The error type of every fallible call in this crate.

use crate::dtype::DType;
use crate::ids::{BucketId, ParamId};

/// `Result` with this crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the bucketer, the ready tracker and the configuration can fail with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter index outside `0..num_params`.
    #[error("unknown parameter {param} (the plan has {num_params} parameters)")]
    UnknownParam {
        /// The index asked for.
        param: ParamId,
        /// How many parameters the plan has.
        num_params: usize,
    },

    /// A bucket id outside `0..num_buckets`.
    #[error("unknown bucket {bucket} (the plan has {num_buckets} buckets)")]
    UnknownBucket {
        /// The id asked for.
        bucket: BucketId,
        /// How many buckets the plan has.
        num_buckets: usize,
    },

    /// A parameter was marked ready twice within one step. Usually a missing `begin_step`.
    #[error("parameter {param} was marked ready twice in step {step}")]
    ParamMarkedTwice {
        /// The parameter marked twice.
        param: ParamId,
        /// The tracker's step count ([`ReadyTracker::step`](crate::ReadyTracker::step)).
        step: u64,
    },

    /// `numel * dtype.size_bytes()` does not fit in `usize`.
    #[error("parameter {param} is too large: {numel} elements of {dtype}")]
    ParamTooLarge {
        /// The parameter whose size overflows.
        param: ParamId,
        /// Its element count.
        numel: usize,
        /// Its element type.
        dtype: DType,
    },

    /// A bucket's total size overflows `usize`.
    #[error("bucket {bucket} would exceed usize::MAX bytes")]
    BucketTooLarge {
        /// The bucket that would overflow.
        bucket: BucketId,
    },

    /// A bucketing order that is not a permutation of the parameters: wrong length.
    #[error("the order lists {found} parameters but the plan has {expected}")]
    OrderLengthMismatch {
        /// The plan's parameter count.
        expected: usize,
        /// The order's length.
        found: usize,
    },

    /// A bucketing order that is not a permutation of the parameters: a repeated entry.
    #[error("parameter {param} appears more than once in the order")]
    DuplicateInOrder {
        /// The first parameter found twice.
        param: ParamId,
    },

    /// `rebuild_from_observed_order` before any step completed.
    #[error("no step has completed yet, so there is no observed ready order")]
    NoObservedOrder,

    /// The plan cannot change while buckets of the current step are in flight.
    #[error("a step is in progress ({marked} of {total} parameters marked ready)")]
    StepInProgress {
        /// Parameters marked ready so far in this step.
        marked: usize,
        /// The plan's parameter count.
        total: usize,
    },

    /// A fusion threshold given in KiB that overflows bytes.
    #[error("fusion threshold of {kib} KiB overflows usize bytes")]
    FusionThresholdTooLarge {
        /// The threshold asked for, in KiB.
        kib: usize,
    },

    /// A malformed fusion threshold, e.g. in [`tnt_env::FUSION_THRESHOLD_KB`].
    #[error("invalid fusion threshold {value:?} in {source_name}: {reason}")]
    InvalidFusionThreshold {
        /// Where the value came from (an environment variable's name, or `"argument"`).
        source_name: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}
