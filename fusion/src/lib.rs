//! Tensor-fusion bucketer: packs gradients into buckets and reports when a bucket is complete.
//! Pure logic: no I/O, no tensors, no communication.
//!
//! - [`BucketPlan`] lays parameters out in buckets of at least a [`FusionThreshold`]
//!   (default [`FusionThreshold::DEFAULT`], 32 KiB), in reverse registration order
//!   because backward produces gradients last layer first. Each bucket is one contiguous buffer
//!   of one [`DType`]; every [`BucketMember`] knows its offset in it.
//! - [`ReadyTracker`] is fed "parameter ready" events during backward and answers with the
//!   bucket that just became complete, exactly once per step, so its allreduce can start while
//!   backward still runs. After a step it can rebuild the plan in the ready order it observed.
//!
//! ```
//! use fusion::{BucketId, DType, FusionThreshold, ParamId, ParamSpec, ReadyTracker};
//!
//! // Three parameters in registration order; 1 KiB threshold.
//! let params = [
//!     ParamSpec::new(200, DType::F32), // 800 bytes
//!     ParamSpec::new(100, DType::F32), // 400 bytes
//!     ParamSpec::new(300, DType::F32), // 1200 bytes
//! ];
//! let mut tracker = ReadyTracker::from_params(&params, FusionThreshold::from_kib(1)?)?;
//!
//! // Reverse registration order: param 2 alone reaches 1 KiB; params 1 and 0 share bucket 1.
//! let plan = tracker.plan().clone();
//! assert_eq!(plan.num_buckets(), 2);
//! let (bucket, member) = plan.locate(ParamId(0))?;
//! assert_eq!((bucket, member.offset_bytes), (BucketId(1), 400));
//!
//! // Backward marks gradients ready (from the autograd hook, behind the caller's mutex).
//! tracker.begin_step();
//! assert_eq!(tracker.mark_ready(ParamId(2))?, Some(BucketId(0))); // start its allreduce
//! assert_eq!(tracker.mark_ready(ParamId(1))?, None);
//! assert_eq!(tracker.mark_ready(ParamId(0))?, Some(BucketId(1)));
//! assert!(tracker.is_step_complete());
//! assert!(tracker.mark_ready(ParamId(0)).is_err()); // twice in one step
//!
//! // Lay buckets out in the order backward really produced the gradients.
//! let rebuilt = tracker.rebuild_from_observed_order()?;
//! assert_eq!(rebuilt.order(), [ParamId(2), ParamId(1), ParamId(0)]);
//! # Ok::<(), fusion::Error>(())
//! ```
//!
//! The fusion threshold comes from the command line (`"64".parse::<FusionThreshold>()`, in
//! KiB) or from the launcher's [`tnt_env::FUSION_THRESHOLD_KB`] via
//! [`FusionThreshold::from_env`].

#![forbid(unsafe_code)]

mod dtype;
mod error;
mod fusion_threshold;
mod ids;
mod plan;
mod ready;

pub use dtype::DType;
pub use error::{Error, Result};
pub use fusion_threshold::FusionThreshold;
pub use ids::{BucketId, ParamId};
pub use plan::{Bucket, BucketMember, BucketPlan, ParamSpec};
pub use ready::ReadyTracker;
