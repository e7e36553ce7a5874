//! The trainer's only contact with the collective layer: gradient-bucket allreduces, weight
//! broadcasts and small metric sums, all over the job's [`gaspi::Context`].

use std::sync::Arc;
use std::time::Duration;

use gaspi::{Context, Group, Rank, ReduceOp, Timeout};

use crate::error::{Error, Result};

use allreduce::{broadcast, Allreduce, Options, Reduction};
use half::bf16;

use crate::grad_dtype::GradDtype;

/// Default bound on any single collective: a dead or stuck peer becomes an error, not a hang.
pub const DEFAULT_COMM_TIMEOUT: Duration = Duration::from_secs(120);

/// The job's ranks as the trainer sees them.
#[derive(Clone)]
pub struct Comm {
    ctx: Arc<Context>,
    timeout: Duration,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish()
    }
}

/// A failed collective, with what the trainer was doing.
fn collective_err(action: &'static str) -> impl FnOnce(allreduce::Error) -> Error {
    move |source| Error::Collective { action, source }
}

impl Comm {
    /// Joins the job described by the launcher's environment (`tarantella -n N -- prog`);
    /// run without a launcher, this is a job of one rank.
    pub fn init() -> Result<Self> {
        Ok(Self::new(Arc::new(Context::init()?)))
    }

    /// Uses an already initialized context.
    pub fn new(ctx: Arc<Context>) -> Self {
        Comm {
            ctx,
            timeout: DEFAULT_COMM_TIMEOUT,
        }
    }

    /// Bounds every collective by `timeout` instead of [`DEFAULT_COMM_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// This process's rank, `0..size()`.
    pub fn rank(&self) -> usize {
        self.ctx.rank().0 as usize
    }

    /// The number of ranks in the job.
    pub fn size(&self) -> usize {
        self.ctx.num_ranks() as usize
    }

    /// Rank 0 writes checkpoints and shows progress.
    pub fn is_master(&self) -> bool {
        self.rank() == 0
    }

    /// The GASPI context underneath, for what the trainer does not wrap (local rank, ...).
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    pub(crate) fn timeout(&self) -> Timeout {
        Timeout::ms(self.timeout.as_millis().min(u128::from(u64::MAX - 1)) as u64)
    }

    /// Overwrites `data` on every rank with rank 0's values.
    pub fn broadcast_f32(&self, data: &mut [f32]) -> Result<()> {
        if self.size() == 1 || data.is_empty() {
            return Ok(());
        }
        broadcast(&self.ctx, Group::ALL, Rank(0), data, self.timeout())
            .map_err(collective_err("broadcast"))
    }

    /// Sums `values` over all ranks in place (any length; metrics, counters).
    pub fn sum_f64(&self, values: &mut [f64]) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let max = self.ctx.config().allreduce_elem_max.max(1) as usize;
        let mut out = vec![0.0; max.min(values.len())];
        for chunk in values.chunks_mut(max) {
            let out = &mut out[..chunk.len()];
            self.ctx
                .allreduce(chunk, out, ReduceOp::Sum, Group::ALL, self.timeout())?;
            chunk.copy_from_slice(out);
        }
        Ok(())
    }

    /// Waits until every rank got here.
    pub fn barrier(&self) -> Result<()> {
        self.ctx.barrier(Group::ALL, self.timeout())?;
        Ok(())
    }

    /// A reusable SUM allreduce over `count` elements of `dtype` for one gradient bucket.
    /// Collective: every rank creates its buckets in the same order.
    pub(crate) fn bucket_allreduce(
        &self,
        count: usize,
        dtype: GradDtype,
    ) -> Result<BucketAllreduce> {
        let options = Options::default();
        let created = match dtype {
            GradDtype::F32 => Allreduce::new(&self.ctx, Group::ALL, count, Reduction::Sum, options)
                .map(BucketAllreduce::F32),
            GradDtype::Bf16 => {
                Allreduce::new(&self.ctx, Group::ALL, count, Reduction::Sum, options)
                    .map(BucketAllreduce::Bf16)
            }
        };
        created.map_err(collective_err("creating a bucket allreduce"))
    }
}

/// One bucket's allreduce, in the wire dtype: fill its data range, [`start`](Self::start),
/// later [`wait_for`](Self::wait_for) it; the sum is then in the same range.
pub(crate) enum BucketAllreduce {
    F32(Allreduce<f32>),
    Bf16(Allreduce<bf16>),
}

impl BucketAllreduce {
    pub(crate) fn dtype(&self) -> GradDtype {
        match self {
            BucketAllreduce::F32(_) => GradDtype::F32,
            BucketAllreduce::Bf16(_) => GradDtype::Bf16,
        }
    }

    /// The data range (input and, once complete, result): its address and element count.
    /// Fixed for the life of the allreduce.
    pub(crate) fn data_range(&mut self) -> Result<(*mut u8, usize)> {
        let range = match self {
            BucketAllreduce::F32(a) => a.input_mut().map(|d| (d.as_mut_ptr().cast(), d.len())),
            BucketAllreduce::Bf16(a) => a.input_mut().map(|d| (d.as_mut_ptr().cast(), d.len())),
        };
        range.map_err(collective_err("reaching a bucket's buffer"))
    }

    pub(crate) fn start(&mut self) -> Result<()> {
        match self {
            BucketAllreduce::F32(a) => a.start(),
            BucketAllreduce::Bf16(a) => a.start(),
        }
        .map_err(collective_err("starting a bucket allreduce"))
    }

    /// Drives the allreduce for at most `timeout`: [`Waited::Complete`] when the sum is in
    /// the data range, [`Waited::TimedOut`] when the time ran out first (call again; the run
    /// goes on).
    pub(crate) fn wait_for(&mut self, timeout: Timeout) -> Result<Waited> {
        let waited = match self {
            BucketAllreduce::F32(a) => a.wait(timeout).map(|_| ()),
            BucketAllreduce::Bf16(a) => a.wait(timeout).map(|_| ()),
        };
        match waited {
            Ok(()) => Ok(Waited::Complete),
            Err(e) if e.is_timeout() => Ok(Waited::TimedOut(e)),
            Err(e) => Err(collective_err("waiting for a bucket allreduce")(e)),
        }
    }
}

/// How far a bounded wait for a bucket's allreduce got.
pub(crate) enum Waited {
    /// The sum is in the data range.
    Complete,
    /// The time ran out first; the collective's timeout error, for the caller that gives up.
    TimedOut(allreduce::Error),
}
