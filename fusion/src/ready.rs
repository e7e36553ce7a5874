//! Ready tracking: which parameters' gradients are ready in this step, and which buckets that
//! completes.
//!
//! # Threads
//! [`ReadyTracker`] is `Send + Sync` plain data and takes `&mut self` to mark; it has no lock of
//! its own. The autograd hook that marks parameters runs on a libtorch thread, so the caller
//! shares it as e.g. `Arc<parking_lot::Mutex<ReadyTracker>>`. Why not lock inside:
//! - the caller already needs one critical section around "mark ready, and if a bucket
//!   completed, hand it to the communication thread" so buckets are enqueued in completion
//!   order; an inner lock would be a second lock taken on every gradient for nothing;
//! - rebuilding the plan must exclude marking altogether, which an outer lock gives for free;
//! - it keeps `fusion` free of dependencies, as the architecture asks.
//!
//! A mark is O(1) without allocation, so holding the lock in the hook is cheap.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fusion_threshold::FusionThreshold;
use crate::ids::{BucketId, ParamId};
use crate::plan::{BucketPlan, ParamSpec};

/// Per-step ready state over a [`BucketPlan`]; remembers the ready order of the last complete
/// step so the plan can be rebuilt to match it.
#[derive(Clone, Debug)]
pub struct ReadyTracker {
    plan: Arc<BucketPlan>,
    /// Number of `begin_step` calls since construction or `reset`; reported in errors.
    step: u64,
    marked: Vec<bool>,
    /// Per bucket: members not yet marked in this step.
    remaining: Vec<usize>,
    completed_buckets: usize,
    marked_params: usize,
    /// Ready order of the step in progress.
    current_order: Vec<ParamId>,
    /// Ready order of the last complete step; meaningful only when `has_observed_order`.
    /// Swapped with `current_order` when a step completes, so marking never allocates.
    observed_order: Vec<ParamId>,
    has_observed_order: bool,
}

// The tracker crosses into the autograd hook's thread inside the caller's mutex.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ReadyTracker>();
};

impl ReadyTracker {
    /// A tracker over `plan`, ready for its first step (no `begin_step` needed).
    pub fn new(plan: impl Into<Arc<BucketPlan>>) -> Self {
        let plan = plan.into();
        let mut tracker = ReadyTracker {
            marked: Vec::new(),
            remaining: Vec::new(),
            current_order: Vec::with_capacity(plan.num_params()),
            observed_order: Vec::with_capacity(plan.num_params()),
            plan,
            step: 0,
            completed_buckets: 0,
            marked_params: 0,
            has_observed_order: false,
        };
        tracker.clear_marks();
        tracker
    }

    /// Builds the plan in reverse registration order and a tracker over it.
    pub fn from_params(params: &[ParamSpec], fusion_threshold: FusionThreshold) -> Result<Self> {
        Ok(Self::new(BucketPlan::new(params, fusion_threshold)?))
    }

    /// The current plan; shared so the communication thread can read it without this lock.
    pub fn plan(&self) -> &Arc<BucketPlan> {
        &self.plan
    }

    /// Number of `begin_step` calls since construction or `reset`.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Starts a new step: forgets this step's marks. The observed order of the last complete
    /// step is kept. Calling it after an incomplete step abandons that step.
    pub fn begin_step(&mut self) {
        self.step += 1;
        self.clear_marks();
    }

    /// Back to the freshly constructed state: no marks, no observed order, step 0.
    pub fn reset(&mut self) {
        self.step = 0;
        self.has_observed_order = false;
        self.observed_order.clear();
        self.clear_marks();
    }

    /// Records that `param`'s gradient is ready. Returns the bucket this completed, if any;
    /// each bucket is returned exactly once per step.
    pub fn mark_ready(&mut self, param: ParamId) -> Result<Option<BucketId>> {
        let bucket = self.plan.bucket_of(param)?;
        let already_marked = std::mem::replace(&mut self.marked[param.0], true);
        if already_marked {
            return Err(Error::ParamMarkedTwice {
                param,
                step: self.step,
            });
        }
        self.marked_params += 1;
        self.current_order.push(param);
        let remaining = &mut self.remaining[bucket.0];
        *remaining -= 1;
        if *remaining > 0 {
            return Ok(None);
        }
        self.completed_buckets += 1;
        if self.is_step_complete() {
            std::mem::swap(&mut self.current_order, &mut self.observed_order);
            self.has_observed_order = true;
        }
        Ok(Some(bucket))
    }

    /// True once every bucket of the plan is complete in this step (vacuously for no buckets).
    pub fn is_step_complete(&self) -> bool {
        self.completed_buckets == self.plan.num_buckets()
    }

    /// Whether every member of `bucket` is marked ready in this step.
    pub fn is_bucket_complete(&self, bucket: BucketId) -> Result<bool> {
        self.plan.bucket(bucket)?;
        Ok(self.remaining[bucket.0] == 0)
    }

    /// Buckets still waiting for at least one member, in bucket order.
    pub fn pending_buckets(&self) -> impl Iterator<Item = BucketId> + '_ {
        self.remaining
            .iter()
            .enumerate()
            .filter(|(_, &remaining)| remaining > 0)
            .map(|(index, _)| BucketId(index))
    }

    /// Buckets completed in this step.
    pub fn num_completed_buckets(&self) -> usize {
        self.completed_buckets
    }

    /// Parameters marked ready in this step.
    pub fn num_marked(&self) -> usize {
        self.marked_params
    }

    /// Whether `param` is marked ready in this step.
    pub fn is_marked(&self, param: ParamId) -> Result<bool> {
        self.plan.bucket_of(param)?;
        Ok(self.marked[param.0])
    }

    /// The ready order recorded during the last complete step, if any step completed.
    pub fn observed_order(&self) -> Option<&[ParamId]> {
        self.has_observed_order
            .then_some(self.observed_order.as_slice())
    }

    /// Replaces the plan by one built (same parameters and fusion threshold) in the ready order of
    /// the last complete step, and starts a fresh step over it. Call between steps: bucket
    /// buffers laid out for the old plan must be re-allocated from the returned plan.
    pub fn rebuild_from_observed_order(&mut self) -> Result<Arc<BucketPlan>> {
        let total = self.plan.num_params();
        if self.marked_params != 0 && !self.is_step_complete() {
            return Err(Error::StepInProgress {
                marked: self.marked_params,
                total,
            });
        }
        let order = self.observed_order().ok_or(Error::NoObservedOrder)?;
        let plan = BucketPlan::with_order(self.plan.params(), order, self.plan.fusion_threshold())?;
        self.plan = Arc::new(plan);
        self.clear_marks();
        Ok(Arc::clone(&self.plan))
    }

    fn clear_marks(&mut self) {
        self.marked.clear();
        self.marked.resize(self.plan.num_params(), false);
        self.remaining.clear();
        self.remaining
            .extend(self.plan.buckets().iter().map(|b| b.members().len()));
        self.completed_buckets = 0;
        self.marked_params = 0;
        self.current_order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    /// Three f32 params of 4 elements; threshold 32 bytes: buckets [2, 1] and [0].
    fn tracker() -> ReadyTracker {
        let params = [ParamSpec::new(4, DType::F32); 3];
        ReadyTracker::from_params(&params, FusionThreshold::from_bytes(32)).unwrap()
    }

    #[test]
    fn reports_each_bucket_when_its_last_member_is_ready() {
        let mut t = tracker();
        assert_eq!(t.mark_ready(ParamId(1)).unwrap(), None);
        assert_eq!(t.mark_ready(ParamId(0)).unwrap(), Some(BucketId(1)));
        assert!(!t.is_step_complete());
        assert_eq!(t.pending_buckets().collect::<Vec<_>>(), [BucketId(0)]);
        assert_eq!(t.mark_ready(ParamId(2)).unwrap(), Some(BucketId(0)));
        assert!(t.is_step_complete());
        assert_eq!(t.pending_buckets().count(), 0);
        assert_eq!(
            t.observed_order().unwrap(),
            [ParamId(1), ParamId(0), ParamId(2)]
        );
    }

    #[test]
    fn double_mark_and_unknown_param_are_errors() {
        let mut t = tracker();
        t.mark_ready(ParamId(2)).unwrap();
        assert_eq!(
            t.mark_ready(ParamId(2)).unwrap_err(),
            Error::ParamMarkedTwice {
                param: ParamId(2),
                step: 0
            }
        );
        assert!(matches!(
            t.mark_ready(ParamId(3)),
            Err(Error::UnknownParam { .. })
        ));
        // A failed mark leaves the state untouched.
        assert_eq!(t.num_marked(), 1);
    }

    #[test]
    fn begin_step_clears_marks_but_keeps_the_observed_order() {
        let mut t = tracker();
        for p in [0, 1, 2] {
            t.mark_ready(ParamId(p)).unwrap();
        }
        t.begin_step();
        assert_eq!(t.step(), 1);
        assert_eq!(t.num_marked(), 0);
        assert_eq!(t.pending_buckets().count(), 2);
        assert!(t.observed_order().is_some());
        assert_eq!(t.mark_ready(ParamId(0)).unwrap(), Some(BucketId(1)));
        t.reset();
        assert_eq!(t.step(), 0);
        assert!(t.observed_order().is_none());
    }

    #[test]
    fn rebuild_follows_the_observed_order() {
        let mut t = tracker();
        assert_eq!(t.rebuild_from_observed_order(), Err(Error::NoObservedOrder));
        for p in [0, 2, 1] {
            t.mark_ready(ParamId(p)).unwrap();
        }
        let plan = t.rebuild_from_observed_order().unwrap();
        let members: Vec<Vec<ParamId>> = plan
            .buckets()
            .iter()
            .map(|b| b.members().iter().map(|m| m.param).collect())
            .collect();
        assert_eq!(members, [vec![ParamId(0), ParamId(2)], vec![ParamId(1)]]);
        assert_eq!(t.num_marked(), 0);
        assert_eq!(t.mark_ready(ParamId(1)).unwrap(), Some(BucketId(1)));
        assert_eq!(
            t.rebuild_from_observed_order(),
            Err(Error::StepInProgress {
                marked: 1,
                total: 3
            })
        );
    }

    #[test]
    fn queries_reject_unknown_ids() {
        let t = tracker();
        assert!(matches!(
            t.is_bucket_complete(BucketId(2)),
            Err(Error::UnknownBucket { .. })
        ));
        assert!(matches!(
            t.is_marked(ParamId(9)),
            Err(Error::UnknownParam { .. })
        ));
        assert!(!t.is_bucket_complete(BucketId(0)).unwrap());
    }

    #[test]
    fn an_empty_model_is_always_complete() {
        let t = ReadyTracker::from_params(&[], FusionThreshold::DEFAULT).unwrap();
        assert!(t.is_step_complete());
    }
}
