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
    UnknownParam { param: ParamId, num_params: usize },

    /// A bucket id outside `0..num_buckets`.
    #[error("unknown bucket {bucket} (the plan has {num_buckets} buckets)")]
    UnknownBucket {
        bucket: BucketId,
        num_buckets: usize,
    },

    /// A parameter was marked ready twice within one step. Usually a missing `begin_step`.
    #[error("parameter {param} was marked ready twice in step {step}")]
    ParamMarkedTwice { param: ParamId, step: u64 },

    /// `numel * dtype.size_bytes()` does not fit in `usize`.
    #[error("parameter {param} is too large: {numel} elements of {dtype}")]
    ParamTooLarge {
        param: ParamId,
        numel: usize,
        dtype: DType,
    },

    /// A bucket's total size overflows `usize`.
    #[error("bucket {bucket} would exceed usize::MAX bytes")]
    BucketTooLarge { bucket: BucketId },

    /// A bucketing order that is not a permutation of the parameters: wrong length.
    #[error("the order lists {found} parameters but the plan has {expected}")]
    OrderLengthMismatch { expected: usize, found: usize },

    /// A bucketing order that is not a permutation of the parameters: a repeated entry.
    #[error("parameter {param} appears more than once in the order")]
    DuplicateInOrder { param: ParamId },

    /// `rebuild_from_observed_order` before any step completed.
    #[error("no step has completed yet, so there is no observed ready order")]
    NoObservedOrder,

    /// The plan cannot change while buckets of the current step are in flight.
    #[error("a step is in progress ({marked} of {total} parameters marked ready)")]
    StepInProgress { marked: usize, total: usize },

    /// A fusion threshold given in KiB that overflows bytes.
    #[error("fusion threshold of {kib} KiB overflows usize bytes")]
    ThresholdTooLarge { kib: usize },

    /// A malformed threshold value, e.g. from `TNT_FUSION_THRESHOLD_KB`.
    #[error("invalid fusion threshold {value:?} in {source_name}: {reason}")]
    InvalidThreshold {
        /// Where the value came from (an env var name, or `"argument"`).
        source_name: &'static str,
        value: String,
        reason: String,
    },
}
