//! One optimizer step on this rank: forward and backward of each of its micro-batches (the
//! gradients allreduced by [`DataParallel::backward`] while backward runs), gradient
//! accumulation over `--grad-accum` micro-steps, clipping, the update, and the step's timings.

use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use super::accumulate::GradAccumulator;
use super::config::TrainConfig;
use super::samples::TrainSamples;
use crate::clock::now_ns;
use crate::ddp::DataParallel;
use crate::error::{Error, Result};
use crate::global_batch_loss;
use crate::hooks::StepTrace;
use crate::models::forward;
use crate::optim::{clip_grad_norm, Optimizer};
use crate::profile::StepTimes;
use crate::stream::Autocast;

/// What one optimizer step did on this rank.
pub(super) struct StepDone {
    /// `[loss sum, correct predictions, samples]` over this rank's samples of the step.
    pub(super) sums: [f64; 3],
    /// The last micro-step's backward and gradient reduction.
    pub(super) trace: StepTrace,
    /// Where the step's time went.
    pub(super) times: StepTimes,
}

/// Runs the optimizer steps of a run: the model, where its data comes from, and the
/// gradients accumulated between micro-steps.
pub(super) struct Stepper<'a> {
    cfg: &'a TrainConfig,
    samples: TrainSamples<'a>,
    model: &'a dyn ModuleT,
    device: Device,
    accum: GradAccumulator,
}

impl<'a> Stepper<'a> {
    /// Steps of `model` (wrapped by the caller's [`DataParallel`]) on `samples`, on `device`.
    pub(super) fn new(
        cfg: &'a TrainConfig,
        samples: TrainSamples<'a>,
        model: &'a dyn ModuleT,
        device: Device,
    ) -> Self {
        Stepper {
            cfg,
            samples,
            model,
            device,
            accum: GradAccumulator::default(),
        }
    }

    /// One optimizer step over `group`: this rank's sample indices of each micro-step.
    pub(super) fn run(
        &mut self,
        ddp: &mut DataParallel,
        opt: &mut Optimizer,
        group: &[Vec<usize>],
    ) -> Result<StepDone> {
        let cfg = self.cfg;
        let t0 = now_ns();
        let mut sums = [0f64; 3];
        let mut trace = StepTrace::default();
        let effective_batch = cfg.batch_size * cfg.grad_accum;
        for (micro_step, indices) in group.iter().enumerate() {
            let (mut x, y) = self.samples.batch(indices, self.device)?;
            if cfg.channels_last {
                x = crate::memory_format::channels_last(&x)?;
            }
            ddp.zero_grad();
            let (logits, loss, loss_sum) = {
                let _amp = cfg
                    .amp_bf16
                    .then(|| Autocast::enter(self.device, tch::Kind::BFloat16))
                    .transpose()?;
                let logits = forward(self.model, &x, true)?;
                let (loss, loss_sum) = global_batch_loss(&logits, &y, effective_batch)?;
                (logits, loss, loss_sum)
            };
            trace = ddp.backward(&loss)?;
            if cfg.grad_accum > 1 {
                self.accum.add(ddp.params(), micro_step == 0)?;
            }
            // One read of the GPU per micro-step, after backward is queued.
            let [loss_sum, correct] = tch::no_grad(|| -> Result<[f64; 2]> {
                let correct = logits
                    .f_argmax(-1, false)?
                    .f_eq_tensor(&y)?
                    .f_sum(Kind::Double)?;
                let both = Tensor::f_stack(&[loss_sum.f_to_kind(Kind::Double)?, correct], 0)?;
                let both = Vec::<f64>::try_from(both.f_to_device(Device::Cpu)?)?;
                Ok([both[0], both[1]])
            })?;
            sums[0] += loss_sum;
            sums[1] += correct;
            sums[2] += indices.len() as f64;
        }
        if cfg.grad_accum > 1 {
            self.accum.install(ddp.params())?;
        }
        if let Some(max_norm) = cfg.clip_grad_norm {
            clip_grad_norm(ddp.params(), max_norm)?;
        }
        let t_opt = now_ns();
        opt.step()?;
        if let (true, Device::Cuda(i)) = (cfg.profile, self.device) {
            // GPU work is asynchronous: a profiled step ends when the GPU is done with it.
            tch::Cuda::synchronize(i as i64);
        }
        let t_end = now_ns();
        Ok(StepDone {
            sums,
            times: step_times(t0, &trace, t_opt, t_end),
            trace,
        })
    }
}

/// The step's timings from its start `t0`, its trace, and the optimizer's start and end.
fn step_times(t0: u64, trace: &StepTrace, t_opt: u64, t_end: u64) -> StepTimes {
    let ms = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e6;
    StepTimes {
        compute_ms: ms(t0, trace.backward_returned_ns),
        exposed_comm_ms: ms(trace.backward_returned_ns, trace.reduced_ns),
        optimizer_ms: ms(t_opt, t_end),
        step_ms: ms(t0, t_end),
    }
}

/// Stops the run when step `step`'s global sums (`[loss sum, correct, samples]`, the same on
/// every rank) have a loss that is not finite: every rank stops together, before anything
/// diverged can reach a checkpoint.
pub(super) fn check_loss_is_finite(step: u64, global: [f64; 3]) -> Result<()> {
    if global[0].is_finite() {
        return Ok(());
    }
    Err(Error::Step {
        step,
        message: format!(
            "the training loss is not finite ({}); stopping before it reaches a checkpoint \
             (lower --lr, add --clip-grad-norm, or resume from the last good checkpoint)",
            global[0] / global[2].max(1.0)
        ),
    })
}
