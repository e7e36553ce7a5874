//! Per-step bookkeeping of the training loop: gradient accumulation buffers, step timings and
//! the `--record` lines (loss, accuracy, weight checksum, hook trace) the tests compare.

use std::io::Write;

use tch::Tensor;

use crate::error::Result;
use crate::fit::TrainSummary;
use crate::hooks::StepTrace;
use crate::profile::StepTimes;

/// Gradient accumulation: adds the (already allreduced) gradients of one micro-step to
/// `accum` (`first`: overwrite).
pub(crate) fn accumulate(accum: &mut Vec<Tensor>, params: &[Tensor], first: bool) -> Result<()> {
    if accum.len() != params.len() {
        *accum = params.iter().map(Tensor::zeros_like).collect();
    }
    tch::no_grad(|| -> Result<()> {
        for (a, p) in accum.iter_mut().zip(params) {
            let g = p.grad();
            if first {
                let _ = a.f_zero_()?;
            }
            if g.defined() {
                let _ = a.f_add_(&g)?;
            }
        }
        Ok(())
    })
}

/// Puts the accumulated gradients into `.grad` for the optimizer.
pub(crate) fn install_grads(accum: &[Tensor], params: &[Tensor]) -> Result<()> {
    tch::no_grad(|| -> Result<()> {
        for (a, p) in accum.iter().zip(params) {
            let mut g = p.grad();
            if g.defined() {
                g.f_copy_(a)?;
            }
        }
        Ok(())
    })
}

pub(crate) fn step_times(t0: u64, trace: &StepTrace, t_opt: u64, t_end: u64) -> StepTimes {
    let ms = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e6;
    StepTimes {
        compute_ms: ms(t0, trace.backward_returned_ns),
        exposed_comm_ms: ms(trace.backward_returned_ns, trace.reduced_ns),
        optimizer_ms: ms(t_opt, t_end),
        step_ms: ms(t0, t_end),
    }
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

/// One line per step: `key=value` fields, lists comma-separated (see `TrainConfig::record`).
pub(crate) fn write_record(
    out: &mut impl Write,
    step: u64,
    summary: &TrainSummary,
    checksum: u64,
    trace: &StepTrace,
    device_bytes: u64,
) -> std::io::Result<()> {
    writeln!(
        out,
        "step={step} loss={:e} accuracy={:e} checksum={checksum:016x} hooks={} \
         first_hook_ns={} last_hook_ns={} backward_end_ns={} ready_ns={} start_ns={} done_ns={} \
         device_bytes={device_bytes}",
        summary.last_loss,
        summary.last_accuracy,
        join(&trace.hook_counts),
        trace.first_hook_ns,
        trace.last_hook_ns,
        trace.backward_end_ns.unwrap_or(0),
        join(&trace.bucket_ready_ns),
        join(&trace.bucket_start_ns),
        join(&trace.bucket_done_ns),
    )
}
