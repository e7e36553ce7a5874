//! What the autograd hooks do during backward: mark the parameter ready in the bucketer and,
//! when that completes a bucket, hand the bucket to the communication thread. Also records
//! when each event happened, for profiling and for the overlap tests.

use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_channel::Sender;
use fusion::{BucketId, ParamId, ReadyTracker};

use crate::clock::now_ns;
use crate::error::{Error, HookFailure, HookFailures, Result};
use crate::ffi::{self, HookTarget};
use crate::reducer::Msg;
use crate::staging::Staging;

/// What one training step's backward pass and gradient reduction looked like.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepTrace {
    /// Step number (1 for the first step).
    pub step: u64,
    /// How often each parameter's hook fired in this step (registration order); all 1 when
    /// healthy.
    pub hook_counts: Vec<u32>,
    /// [`now_ns`] of the first hook of the step.
    pub first_hook_ns: u64,
    /// [`now_ns`] of the last hook of the step.
    pub last_hook_ns: u64,
    /// When the autograd engine reported the end of backward (end-of-backward callback).
    pub backward_end_ns: Option<u64>,
    /// Per bucket: when its last member became ready (in the hook).
    pub bucket_ready_ns: Vec<u64>,
    /// Per bucket: when the communication thread started its allreduce.
    pub bucket_start_ns: Vec<u64>,
    /// Per bucket: when its reduced gradients were written back.
    pub bucket_done_ns: Vec<u64>,
    /// When `backward` returned to the caller.
    pub backward_returned_ns: u64,
    /// When every bucket was written back (`backward` then returns).
    pub reduced_ns: u64,
}

/// Per-step state shared by the hooks (autograd thread) and the step (caller's thread).
struct StepState {
    tracker: ReadyTracker,
    to_comm: Sender<Msg>,
    /// Set on the device path: a complete bucket is packed and sent from the hook, on the
    /// stream that computed its gradients.
    sender: Option<Arc<Staging>>,
    trace: StepTrace,
    end_queued: bool,
    /// What went wrong in this step's hooks, in order.
    failures: Vec<HookFailure>,
}

/// The hooks' target. Lives in an `Arc` that the data-parallel wrapper keeps until it has
/// removed every hook.
pub(crate) struct HookState {
    state: Mutex<StepState>,
    /// Start each bucket's allreduce from the hook (false: only after backward).
    overlap: bool,
}

impl HookState {
    pub(crate) fn new(
        tracker: ReadyTracker,
        to_comm: Sender<Msg>,
        staging: Option<Arc<Staging>>,
        overlap: bool,
    ) -> Self {
        let buckets = tracker.plan().num_buckets();
        let params = tracker.plan().num_params();
        HookState {
            state: Mutex::new(StepState {
                tracker,
                to_comm,
                sender: staging.filter(|s| s.sends_from_hook()),
                trace: StepTrace {
                    hook_counts: vec![0; params],
                    bucket_ready_ns: vec![0; buckets],
                    ..StepTrace::default()
                },
                end_queued: false,
                failures: Vec::new(),
            }),
            overlap,
        }
    }

    fn lock(&self) -> MutexGuard<'_, StepState> {
        // A panic inside the lock is caught by the trampoline and reported; keep going so the
        // step can return the error instead of poisoning every later call.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Prepares for the next backward pass.
    pub(crate) fn begin_step(&self, step: u64) {
        let mut s = self.lock();
        s.tracker.begin_step();
        s.trace.step = step;
        s.trace.hook_counts.fill(0);
        s.trace.bucket_ready_ns.fill(0);
        s.trace.first_hook_ns = 0;
        s.trace.last_hook_ns = 0;
        s.trace.backward_end_ns = None;
        s.trace.bucket_start_ns.clear();
        s.trace.bucket_done_ns.clear();
        s.end_queued = false;
        s.failures.clear();
    }

    /// After backward returned: the trace so far, or what went wrong in the hooks.
    pub(crate) fn end_step(&self) -> Result<StepTrace> {
        let mut s = self.lock();
        let step = s.trace.step;
        if !s.failures.is_empty() {
            return Err(Error::Backward {
                step,
                failures: HookFailures(std::mem::take(&mut s.failures)),
            });
        }
        if !s.tracker.is_step_complete() {
            let params: Vec<usize> = s
                .trace
                .hook_counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c == 0)
                .map(|(i, _)| i)
                .collect();
            return Err(Error::UnusedParameters { step, params });
        }
        Ok(s.trace.clone())
    }

    /// The buckets of the current plan, in order (for the no-overlap mode).
    pub(crate) fn num_buckets(&self) -> usize {
        self.lock().tracker.plan().num_buckets()
    }

    /// The order the gradients became ready in during the last complete step.
    pub(crate) fn observed_order(&self) -> Option<Vec<ParamId>> {
        self.lock()
            .tracker
            .observed_order()
            .map(<[ParamId]>::to_vec)
    }

    /// Switches to a new plan and the communication thread that serves it (between steps).
    pub(crate) fn replace(
        &self,
        tracker: ReadyTracker,
        to_comm: Sender<Msg>,
        staging: Option<Arc<Staging>>,
    ) {
        let mut s = self.lock();
        s.sender = staging.filter(|s| s.sends_from_hook());
        let (params, buckets) = (tracker.plan().num_params(), tracker.plan().num_buckets());
        s.tracker = tracker;
        s.to_comm = to_comm;
        s.trace.hook_counts = vec![0; params];
        s.trace.bucket_ready_ns = vec![0; buckets];
    }
}

impl HookTarget for HookState {
    fn param_ready(&self, index: usize) {
        let now = now_ns();
        let mut s = self.lock();
        if let Some(count) = s.trace.hook_counts.get_mut(index) {
            *count += 1;
        }
        if s.trace.first_hook_ns == 0 {
            s.trace.first_hook_ns = now;
        }
        s.trace.last_hook_ns = now;
        if !s.end_queued {
            s.end_queued = true;
            if let Err(e) = ffi::queue_end_of_backward(self) {
                s.failures
                    .push(HookFailure::QueueEndOfBackward(Box::new(e)));
            }
        }
        // Before the bucket can be sent: the copy stream must wait for this gradient on the
        // stream that produced it.
        if let Some(Err(e)) = s.sender.as_ref().map(|st| st.grad_ready(index)) {
            s.failures.push(HookFailure::GradReady {
                param: index,
                source: Box::new(e),
            });
        }
        match s.tracker.mark_ready(ParamId(index)) {
            Ok(Some(BucketId(bucket))) => {
                if let Some(t) = s.trace.bucket_ready_ns.get_mut(bucket) {
                    *t = now;
                }
                if self.overlap {
                    // A bucket whose copy was not queued must not start: its segment still
                    // holds the last step's data. The step fails instead (no Start: the comm
                    // thread reports the bucket as never ready).
                    let packed = match s.sender.as_ref().map(|st| st.send(bucket)) {
                        Some(Err(e)) => {
                            s.failures.push(HookFailure::Send {
                                bucket,
                                source: Box::new(e),
                            });
                            false
                        }
                        _ => true,
                    };
                    if packed && s.to_comm.send(Msg::Start(BucketId(bucket))).is_err() {
                        s.failures.push(HookFailure::CommThreadGone);
                    }
                }
            }
            Ok(None) => {}
            Err(e) => s.failures.push(HookFailure::Ready(e)),
        }
    }

    fn backward_done(&self) {
        let now = now_ns();
        self.lock().trace.backward_end_ns = Some(now);
    }

    fn hook_panicked(&self) {
        self.lock().failures.push(HookFailure::Panicked);
    }
}
