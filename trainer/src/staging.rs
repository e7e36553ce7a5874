//! Gradient staging: a bucket's gradients packed into the allreduce's buffer (gaspi segment
//! memory) and the sum unpacked back into `.grad`, on the CPU or from a GPU.
//!
//! On the CPU (`StagingMode::Host`) the communication thread packs the gradients straight into
//! the segment and unpacks the sum from it (converting to the wire dtype and back).
//!
//! From a GPU (`StagingMode::Device`) the segment range is page-locked. Each gradient's hook
//! records an event on the stream current there, the one that produced that gradient (the
//! autograd engine runs a node's backward, and its hooks, on the stream its forward ran on,
//! so a model with side streams produces a bucket's gradients on several). The hook of the
//! bucket's last gradient, on the autograd thread, queues: the copy stream waits for every
//! member's event → pack the gradients into a flat device buffer (in the wire dtype) → copy
//! it to the segment (DMA) → event `sent`. (The pack first waits for the previous step's
//! unpack from the same flat buffer, event `unpacked`.) The communication thread starts the
//! allreduce once `sent` has completed and, when the sum is in, queues the copy back (host →
//! flat device buffer, event `received`) on a second copy stream, the copy-back stream. At
//! the end of the step the compute stream waits for `received` and unpacks the flat buffer
//! into `.grad`: the host never waits for the GPU, and backward of the remaining layers runs
//! while buckets travel.
//!
//! The copies back have their own stream because the hooks run ahead of the GPU: by the time
//! a bucket's sum is in, the copy stream usually already holds the later buckets' packs, each
//! waiting for gradients the GPU has not computed yet. A copy back queued behind them would
//! wait for the end of backward, so every bucket's copy back would be exposed after it. On
//! their own stream they run while backward goes on (on a second DMA engine). The copy
//! back waits for nothing on the copy stream: it is queued only after its bucket's `sent`
//! was seen complete. The bucket's next pack waits for `received` (and `unpacked`, which
//! follows it once a step has unpacked).
//!
//! The device path works on CPU tensors too (streams and events are then no-ops and copies
//! synchronous), which is how its logic is tested on machines without a GPU.

use std::sync::{Mutex, MutexGuard};

use fusion::{BucketId, BucketPlan, ParamId};
use tch::{Device, Tensor};

use crate::comm::BucketAllreduce;
use crate::error::{Error, Result};
use crate::memory_format::dense_view;
use crate::multi_tensor::foreach_copy;
use crate::pinned::PageLocked;
use crate::stream::{copy_async, set_current_device, Event, Stream};

/// Where the gradients are and how they reach the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StagingMode {
    /// CPU gradients, packed by the communication thread.
    Host,
    /// Gradients on a device (or CPU tensors standing in for one), packed there by the hooks
    /// and copied on two copy streams of that GPU, one each way (synchronously, for the CPU
    /// stand-in).
    Device(Device),
}

/// A point in a stream's work (a copy stream's, or the compute stream's for `unpacked`); on
/// the CPU stand-in always complete.
struct Marker(Option<Event>);

impl Marker {
    fn new(on_gpu: bool) -> Result<Self> {
        Ok(Marker(if on_gpu { Some(Event::new()?) } else { None }))
    }

    fn record(&mut self, stream: Option<&Stream>) -> Result<()> {
        match (&mut self.0, stream) {
            (Some(e), Some(s)) => e.record(s),
            _ => Ok(()),
        }
    }

    fn block(&self, stream: Option<&Stream>) -> Result<()> {
        match (&self.0, stream) {
            (Some(e), Some(s)) => e.block(s),
            _ => Ok(()),
        }
    }

    fn is_done(&self) -> Result<bool> {
        self.0.as_ref().map_or(Ok(true), Event::is_done)
    }
}

/// One member of a bucket: its parameter and its place in the flat buffer.
struct Member {
    /// Registration index (for messages) and the parameter itself (a shallow clone).
    index: usize,
    param: Tensor,
    offset: i64,
    numel: i64,
    /// Recorded by its gradient's hook on the stream that produced the gradient.
    grad_ready: Marker,
    /// Whether `grad_ready` is this step's: false when its last recording failed.
    marked: bool,
}

/// Everything of one bucket, dropped together: the views of the segment before the
/// page-locking, both before the allreduce that owns the segment.
pub(crate) struct Bucket {
    members: Vec<Member>,
    /// The allreduce's data range as a CPU tensor of the wire dtype.
    host: Tensor,
    /// The device path's flat buffer (on the gradients' device, wire dtype).
    flat: Option<Tensor>,
    sent: Marker,
    received: Marker,
    /// Recorded on the compute stream after the sums were unpacked from `flat`: the next
    /// step's pack into `flat` waits for it. A member's gradient event alone does not order
    /// the two when that gradient comes from a side stream.
    unpacked: Marker,
    _locked: Option<PageLocked>,
    allreduce: BucketAllreduce,
}

impl Bucket {
    pub(crate) fn allreduce(&mut self) -> &mut BucketAllreduce {
        &mut self.allreduce
    }
}

/// The staging of every bucket of one plan; shared by the hooks, the communication thread
/// and the step.
pub(crate) struct Staging {
    mode: StagingMode,
    /// The GPU's stream for packs and copies to the segment (`None` on the host path and
    /// for the CPU stand-in).
    copy_stream: Option<Stream>,
    /// The GPU's stream for the copies back from the segment (as `copy_stream`).
    copy_back_stream: Option<Stream>,
    buckets: Vec<Mutex<Bucket>>,
    /// Where each parameter is (the plan the buckets were built from).
    plan: BucketPlan,
}

fn flat_view(t: &Tensor, m: &Member) -> Result<Tensor> {
    Ok(t.f_narrow(0, m.offset, m.numel)?)
}

fn grad_of(m: &Member) -> Result<Tensor> {
    let g = m.param.grad();
    if !g.defined() {
        return Err(Error::MissingGradient { param: m.index });
    }
    Ok(g)
}

impl Staging {
    /// Wraps each bucket's allreduce (created collectively by the caller, in bucket order).
    pub(crate) fn new(
        params: &[Tensor],
        plan: &BucketPlan,
        allreduces: Vec<BucketAllreduce>,
        mode: StagingMode,
    ) -> Result<Self> {
        // Two streams from the pool, which hands its 32 out in turn: distinct but for a wrap.
        let (copy_stream, copy_back_stream) = match mode {
            StagingMode::Device(Device::Cuda(i)) => {
                (Some(Stream::from_pool(i)?), Some(Stream::from_pool(i)?))
            }
            _ => (None, None),
        };
        let on_gpu = copy_stream.is_some();
        let mut buckets = Vec::with_capacity(allreduces.len());
        for (bucket, mut allreduce) in plan.buckets().iter().zip(allreduces) {
            let members = bucket
                .members()
                .iter()
                .map(|m| {
                    Ok(Member {
                        index: m.param.0,
                        param: params[m.param.0].shallow_clone(),
                        offset: m.offset_elements as i64,
                        numel: m.numel as i64,
                        grad_ready: Marker::new(on_gpu)?,
                        marked: true,
                    })
                })
                .collect::<Result<Vec<Member>>>()?;
            let kind = allreduce.dtype().kind();
            let (ptr, count) = allreduce.data_range()?;
            let bytes = count * kind.elt_size_in_bytes();
            // SAFETY: `ptr` addresses `count` elements of the allreduce's segment, which lives
            // as long as `allreduce`, dropped after this tensor (field order of `Bucket`).
            let host =
                unsafe { Tensor::f_from_blob(ptr, &[count as i64], &[1], kind, Device::Cpu)? };
            let (flat, locked) = match mode {
                StagingMode::Host => (None, None),
                StagingMode::Device(device) => {
                    let flat = Tensor::f_empty([count as i64], (kind, device))?;
                    let locked = match device {
                        // An empty bucket (parameters without elements) has nothing to lock.
                        Device::Cuda(i) if on_gpu && bytes > 0 => {
                            // SAFETY: as for `host`: the range stays mapped while the
                            // allreduce lives, and `Bucket` drops the lock before it.
                            Some(unsafe { PageLocked::new(ptr, bytes, i)? })
                        }
                        _ => None,
                    };
                    (Some(flat), locked)
                }
            };
            buckets.push(Mutex::new(Bucket {
                members,
                host,
                flat,
                sent: Marker::new(on_gpu)?,
                received: Marker::new(on_gpu)?,
                unpacked: Marker::new(on_gpu)?,
                _locked: locked,
                allreduce,
            }));
        }
        Ok(Staging {
            mode,
            copy_stream,
            copy_back_stream,
            buckets,
            plan: plan.clone(),
        })
    }

    pub(crate) fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Locks bucket `b` (the hooks, the communication thread and the step take turns).
    pub(crate) fn bucket(&self, b: usize) -> MutexGuard<'_, Bucket> {
        // A panic while holding it is reported by the step that hit it; the data is plain.
        self.buckets[b].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when the hook of a bucket's last gradient packs and sends it (device path);
    /// false when the communication thread does (host path).
    pub(crate) fn sends_from_hook(&self) -> bool {
        matches!(self.mode, StagingMode::Device(_))
    }

    fn copy_stream(&self) -> Option<&Stream> {
        self.copy_stream.as_ref()
    }

    /// The GPU's index when the gradients are on a GPU (not the CPU stand-in).
    fn device_index(&self) -> Option<usize> {
        match (self.mode, &self.copy_stream) {
            (StagingMode::Device(Device::Cuda(i)), Some(_)) => Some(i),
            _ => None,
        }
    }

    /// Marks parameter `param`'s gradient as produced up to here on the calling thread's
    /// current stream (call it from the gradient's hook, before the bucket's [`send`]); a
    /// no-op off the GPU.
    ///
    /// [`send`]: Staging::send
    pub(crate) fn grad_ready(&self, param: usize) -> Result<()> {
        let Some(index) = self.device_index() else {
            return Ok(());
        };
        let (BucketId(b), at) = self.plan.member_index(ParamId(param))?;
        let mut bucket = self.bucket(b);
        let member = &mut bucket.members[at];
        let recorded = Stream::current(index).and_then(|s| member.grad_ready.record(Some(&s)));
        member.marked = recorded.is_ok();
        recorded
    }

    /// Packs bucket `b`'s gradients into the segment: on the host path now; on the device
    /// path queued behind the gradients' computation, on every stream that produced one (see
    /// [`grad_ready`](Staging::grad_ready); call it from the hook of the bucket's last
    /// gradient).
    pub(crate) fn send(&self, b: usize) -> Result<()> {
        let mut bucket = self.bucket(b);
        let bucket = &mut *bucket;
        let Some(flat) = &bucket.flat else {
            return pack(&bucket.members, &bucket.host, None);
        };
        let copy_stream = self.copy_stream();
        for m in &bucket.members {
            if !m.marked {
                return Err(Error::GradientNotMarked { param: m.index });
            }
            m.grad_ready.block(copy_stream)?;
        }
        // The last step's unpack may still read `flat` (never recorded on the first step:
        // then nothing to wait for). It follows that step's copy back, but a step that failed
        // before its unpack leaves `unpacked` behind `received`: wait for the copy back
        // (another stream) too, so `flat` and the segment are never written under it.
        bucket.unpacked.block(copy_stream)?;
        bucket.received.block(copy_stream)?;
        let _on_copy_stream = copy_stream.map(Stream::make_current).transpose()?;
        pack(&bucket.members, flat, copy_stream)?;
        copy_async(&bucket.host, flat)?;
        bucket.sent.record(copy_stream)
    }

    /// Whether bucket `b`'s packed gradients have reached the segment (the allreduce may
    /// start).
    pub(crate) fn is_sent(&self, b: usize) -> Result<bool> {
        self.bucket(b).sent.is_done()
    }

    /// Once bucket `b`'s allreduce has completed: the host path writes the sums into
    /// `.grad`; the device path queues their copy back to the device.
    pub(crate) fn receive(&self, b: usize) -> Result<()> {
        let mut bucket = self.bucket(b);
        let bucket = &mut *bucket;
        let Some(flat) = &bucket.flat else {
            return unpack(&bucket.members, &bucket.host);
        };
        let copy_back_stream = self.copy_back_stream.as_ref();
        let _on_copy_back_stream = copy_back_stream.map(Stream::make_current).transpose()?;
        copy_async(flat, &bucket.host)?;
        bucket.received.record(copy_back_stream)
    }

    /// At the end of the step, on the step's thread: the device path makes the compute
    /// stream wait for every bucket's copy back and unpacks the sums into `.grad` there.
    pub(crate) fn finish(&self) -> Result<()> {
        let StagingMode::Device(_) = self.mode else {
            return Ok(());
        };
        let compute = self.device_index().map(Stream::current).transpose()?;
        for b in 0..self.buckets.len() {
            let mut bucket = self.bucket(b);
            let bucket = &mut *bucket;
            bucket.received.block(compute.as_ref())?;
            if let Some(flat) = &bucket.flat {
                unpack(&bucket.members, flat)?;
                bucket.unpacked.record(compute.as_ref())?;
            }
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // A copy may still be under way (a step that failed half-way): the segments it reads
        // or writes are unregistered and freed right after this.
        if self.copy_stream.is_none() {
            return;
        }
        // Whatever thread drops it: on the staging's own device (see set_current_device).
        // The wait does not depend on it (a stream synchronizes on its own device), so a
        // failure to switch is logged and the wait made all the same.
        let device = self.device_index().map_or(Device::Cpu, Device::Cuda);
        if let Err(e) = set_current_device(device) {
            tracing::warn!("making the staging's GPU current to free its buffers: {e}");
        }
        for stream in self.copy_stream.iter().chain(&self.copy_back_stream) {
            if let Err(e) = stream.synchronize() {
                tracing::error!(
                    "waiting for the gradient copies before freeing their buffers: {e}"
                );
            }
        }
    }
}

/// Copies each member's gradient into its range of `to` (converting the dtype), all in one
/// multi-tensor copy on the current stream. Gradients read on `copy_stream` are recorded on
/// it: their memory must not be reused before that read is done, whatever the compute stream
/// does meanwhile.
fn pack(members: &[Member], to: &Tensor, copy_stream: Option<&Stream>) -> Result<()> {
    let (mut ranges, mut grads) = (Vec::new(), Vec::new());
    for m in members {
        let grad = grad_of(m)?;
        if let Some(stream) = copy_stream {
            stream.record_tensor(&grad)?;
        }
        ranges.push(dense_view(&flat_view(to, m)?, &grad)?);
        grads.push(grad);
    }
    foreach_copy(&ranges, &grads)
}

/// Writes each member's range of `from` into its gradient (converting the dtype), in one
/// multi-tensor copy.
fn unpack(members: &[Member], from: &Tensor) -> Result<()> {
    let (mut grads, mut ranges) = (Vec::new(), Vec::new());
    for m in members {
        let grad = grad_of(m)?;
        ranges.push(dense_view(&flat_view(from, m)?, &grad)?);
        grads.push(grad);
    }
    foreach_copy(&grads, &ranges)
}
