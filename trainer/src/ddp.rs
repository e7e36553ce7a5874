//! [`DataParallel`]: makes a `VarStore` model train the same on N ranks as on one.

use std::sync::Arc;

use fusion::{BucketPlan, DType, FusionThreshold, ParamId, ParamSpec, ReadyTracker};
use tch::{nn, Device, Kind, Tensor};

use crate::clock::now_ns;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::ffi;
use crate::grad_dtype::GradDtype;
use crate::hooks::{HookState, StepTrace};
use crate::reducer::Reducer;
use crate::staging::StagingMode;

/// How gradients are fused and when their allreduce starts.
#[derive(Clone, Copy, Debug)]
pub struct DdpConfig {
    /// Minimum bucket size; see [`fusion::FusionThreshold`].
    pub fusion_threshold: FusionThreshold,
    /// Start each bucket's allreduce from the autograd hook while backward continues (true),
    /// or all of them after backward (false, for comparison).
    pub overlap: bool,
    /// After the first step, lay the buckets out in the order rank 0 saw the gradients
    /// become ready (instead of reverse registration order), so buckets fill in order.
    pub rebuild_buckets: bool,
    /// The element type gradients are allreduced in.
    pub grad_dtype: GradDtype,
    /// Stage CPU gradients through a separate flat buffer as GPU gradients are (hooks pack,
    /// copies in and out): the device path's logic, exercised on machines without a GPU.
    pub device_staging_on_cpu: bool,
    /// For step timing on a GPU (`train --profile`): wait for the GPU to finish backward
    /// before noting its end, and for the summed gradients to be back in `.grad` before
    /// noting the reduction's end. Without it both are host times, and the GPU's backward,
    /// still running after `backward` returned, would count as exposed communication. The
    /// waits block only the step's thread: every bucket's copy is queued before them.
    pub time_device_work: bool,
}

impl Default for DdpConfig {
    fn default() -> Self {
        DdpConfig {
            fusion_threshold: FusionThreshold::DEFAULT,
            overlap: true,
            rebuild_buckets: true,
            grad_dtype: GradDtype::F32,
            device_staging_on_cpu: false,
            time_device_work: false,
        }
    }
}

/// A data-parallel view of a model's [`nn::VarStore`].
///
/// Creation broadcasts rank 0's variables and installs a post-accumulate-grad hook on every
/// trainable parameter. [`DataParallel::backward`] runs backward and returns once every
/// rank holds the **sum** of all ranks' gradients in `.grad` (so the loss should be the sum over
/// the local samples divided by the global batch size, see [`crate::global_batch_loss`]).
pub struct DataParallel {
    comm: Comm,
    params: Vec<Tensor>,
    plan: Arc<BucketPlan>,
    state: Arc<HookState>,
    reducer: Reducer,
    config: DdpConfig,
    /// Where the parameters live (all on one device).
    device: Device,
    step: u64,
    /// The step that failed, after which no step is taken (see [`Error::AfterFailedStep`]).
    failed_step: Option<u64>,
}

impl DataParallel {
    /// Collective: every rank calls it with the same model.
    pub fn new(comm: &Comm, vs: &nn::VarStore, config: DdpConfig) -> Result<Self> {
        now_ns();
        broadcast_variables(comm, vs)?;
        let params = vs.trainable_variables();
        let device = vs.device();
        // This thread works with the parameters' GPU from here on (see set_current_device).
        crate::stream::set_current_device(device)?;
        let mut specs = Vec::with_capacity(params.len());
        for (i, p) in params.iter().enumerate() {
            check_param(i, p, device)?;
            specs.push(ParamSpec::new(p.numel(), DType::F32));
        }
        let tracker = ReadyTracker::from_params(&specs, config.fusion_threshold)?;
        let plan = Arc::clone(tracker.plan());
        let reducer = spawn_reducer(comm, &plan, &params, device, &config)?;
        let state = Arc::new(HookState::new(
            tracker,
            reducer.sender(),
            reducer.staging().cloned(),
            config.overlap,
        ));
        let ddp = DataParallel {
            comm: comm.clone(),
            params,
            plan,
            state,
            reducer,
            config,
            device,
            step: 0,
            failed_step: None,
        };
        for (i, p) in ddp.params.iter().enumerate() {
            // On failure `ddp` is dropped here, which clears the hooks installed so far.
            ffi::set_post_acc_grad_hook(p, &ddp.state, i)?;
        }
        tracing::debug!(
            params = ddp.params.len(),
            buckets = ddp.plan.num_buckets(),
            fusion_threshold = %config.fusion_threshold,
            overlap = config.overlap,
            device = ?device,
            grad_dtype = ?config.grad_dtype,
            "data-parallel model ready"
        );
        Ok(ddp)
    }

    /// The device the parameters (and gradients) live on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The job the gradients are reduced over.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// The trainable parameters, in registration order.
    pub fn params(&self) -> &[Tensor] {
        &self.params
    }

    /// The bucket layout in use.
    pub fn plan(&self) -> &BucketPlan {
        &self.plan
    }

    /// Steps completed so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Zeroes the gradients of every trainable parameter (keeps the tensors).
    pub fn zero_grad(&self) {
        for p in &self.params {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.detach_().zero_();
            }
        }
    }

    /// Runs backward from `loss` and returns once `.grad` holds the sum of every rank's
    /// gradients. Bucket allreduces start during backward (unless overlap is off). After a
    /// step that failed, every later call fails with [`Error::AfterFailedStep`].
    pub fn backward(&mut self, loss: &Tensor) -> Result<StepTrace> {
        if let Some(failed) = self.failed_step {
            return Err(Error::AfterFailedStep { failed });
        }
        let step = self.step + 1;
        let result = self.step_backward(step, loss);
        if result.is_err() {
            self.failed_step = Some(step);
        }
        result
    }

    fn step_backward(&mut self, step: u64, loss: &Tensor) -> Result<StepTrace> {
        self.state.begin_step(step);
        let backward = loss
            .f_backward()
            .map_err(Error::from)
            .and_then(|()| self.wait_for_device_when_timing());
        let backward_returned_ns = now_ns();
        let hooks = self.state.end_step();
        // Buckets start after backward only when backward produced every gradient.
        let started = if self.config.overlap || backward.is_err() || hooks.is_err() {
            Ok(())
        } else {
            self.reducer.start_all()
        };
        // Always collect the communication thread's result, even when backward failed after
        // its hooks started some buckets.
        let comm = self.reducer.finish();
        backward?;
        let mut trace = hooks?;
        started?;
        let times = comm?;
        if let Some(staging) = self.reducer.staging() {
            staging.finish()?;
        }
        self.wait_for_device_when_timing()?;
        debug_assert_eq!(times.start_ns.len(), self.state.num_buckets());
        trace.bucket_start_ns = times.start_ns;
        trace.bucket_done_ns = times.done_ns;
        trace.backward_returned_ns = backward_returned_ns;
        trace.reduced_ns = now_ns();
        self.step = step;
        if step == 1 && self.config.rebuild_buckets {
            self.rebuild_from_observed_order()?;
        }
        Ok(trace)
    }

    /// With [`DdpConfig::time_device_work`] on a GPU: blocks until the work queued so far on
    /// the compute stream has run.
    fn wait_for_device_when_timing(&self) -> Result<()> {
        match self.device {
            Device::Cuda(i) if self.config.time_device_work => {
                crate::stream::Stream::current(i)?.synchronize()
            }
            _ => Ok(()),
        }
    }

    /// Collective: re-lays the buckets out in rank 0's observed ready order (if it differs)
    /// and recreates the bucket allreduces for it.
    fn rebuild_from_observed_order(&mut self) -> Result<()> {
        let n = self.params.len();
        // Rank 0's order to everyone: a sum where the other ranks contribute zeros.
        let mut order = vec![0f64; n];
        if self.comm.is_master() {
            let observed = self.state.observed_order().ok_or_else(|| Error::Step {
                step: self.step,
                message: "no complete ready order was observed".to_owned(),
            })?;
            for (slot, p) in order.iter_mut().zip(observed) {
                *slot = p.0 as f64;
            }
        }
        self.comm.sum_f64(&mut order)?;
        let order: Vec<ParamId> = order.iter().map(|&i| ParamId(i as usize)).collect();
        if order == self.plan.order() {
            return Ok(());
        }
        let plan = Arc::new(BucketPlan::with_order(
            self.plan.params(),
            &order,
            self.plan.fusion_threshold(),
        )?);
        let reducer = spawn_reducer(&self.comm, &plan, &self.params, self.device, &self.config)?;
        self.state.replace(
            ReadyTracker::new(Arc::clone(&plan)),
            reducer.sender(),
            reducer.staging().cloned(),
        );
        // The old thread exits once its last sender (just replaced) is gone.
        self.reducer = reducer;
        tracing::debug!(
            buckets = plan.num_buckets(),
            "buckets rebuilt in the observed order"
        );
        self.plan = plan;
        Ok(())
    }

    /// An order-sensitive hash of the bits of every trainable parameter: equal on every rank
    /// when the replicas agree exactly.
    pub fn weights_checksum(&self) -> Result<u64> {
        weights_checksum(&self.params)
    }
}

impl Drop for DataParallel {
    fn drop(&mut self) {
        // The hooks point at `self.state`: remove them before it can be freed.
        for p in &self.params {
            if let Err(e) = ffi::clear_post_acc_grad_hook(p) {
                tracing::warn!("removing a gradient hook: {e}");
            }
        }
    }
}

/// The communication thread for `plan`, staging as the parameters' device needs.
fn spawn_reducer(
    comm: &Comm,
    plan: &Arc<BucketPlan>,
    params: &[Tensor],
    device: Device,
    config: &DdpConfig,
) -> Result<Reducer> {
    let mode = match device {
        Device::Cpu if !config.device_staging_on_cpu => StagingMode::Host,
        other => StagingMode::Device(other),
    };
    Reducer::spawn(
        comm,
        Arc::clone(plan),
        params.iter().map(Tensor::shallow_clone).collect(),
        config.grad_dtype,
        mode,
    )
}

fn check_param(index: usize, p: &Tensor, device: Device) -> Result<()> {
    if p.kind() != Kind::Float || p.device() != device {
        return Err(Error::Model(format!(
            "trainable parameter {index} is {:?} on {:?}; every parameter must be f32 on {:?} \
             (the model's device)",
            p.kind(),
            p.device(),
            device
        )));
    }
    Ok(())
}

/// FNV-1a over the bytes of `tensors`, in order.
pub fn weights_checksum(tensors: &[Tensor]) -> Result<u64> {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buf = Vec::new();
    for t in tensors {
        let flat = t.f_to_device(Device::Cpu)?.f_contiguous()?;
        buf.resize(flat.numel(), 0f32);
        flat.f_copy_data(&mut buf, flat.numel())?;
        for v in &buf {
            for byte in v.to_bits().to_le_bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    Ok(hash)
}

/// Overwrites every variable of `vs` (trainable or not, in name order) with rank 0's values.
pub fn broadcast_variables(comm: &Comm, vs: &nn::VarStore) -> Result<()> {
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let tensors: Vec<Tensor> = named.into_iter().map(|(_, t)| t).collect();
    broadcast_tensors(comm, &tensors)
}

/// Overwrites `tensors` (f32, on any device) with rank 0's values, in one broadcast.
pub fn broadcast_tensors(comm: &Comm, tensors: &[Tensor]) -> Result<()> {
    if comm.size() == 1 {
        return Ok(());
    }
    let total: usize = tensors.iter().map(Tensor::numel).sum();
    let mut flat = vec![0f32; total];
    let mut offset = 0;
    for (i, t) in tensors.iter().enumerate() {
        check_param(i, t, t.device())?;
        let n = t.numel();
        t.f_to_device(Device::Cpu)?
            .f_contiguous()?
            .f_copy_data(&mut flat[offset..offset + n], n)?;
        offset += n;
    }
    comm.broadcast_f32(&mut flat)?;
    let mut offset = 0;
    for t in tensors {
        let n = t.numel();
        let values = Tensor::from_slice(&flat[offset..offset + n])
            .f_view(t.size().as_slice())?
            .f_to_device(t.device())?;
        let mut target = t.shallow_clone();
        tch::no_grad(|| target.f_copy_(&values))?;
        offset += n;
    }
    Ok(())
}
