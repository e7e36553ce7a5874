//! The training loop of the `train` binary: data sharding, exact global-batch loss, LR
//! schedule, gradient accumulation and clipping, data-parallel validation, metrics aggregated
//! over ranks, callbacks, progress, profiling and checkpoints.
//!
//! [`train`] sets a run up and runs its epochs. The parts, each in its own module: what the
//! run is asked to do ([`TrainConfig`]), the data it draws from ([`TrainSamples`]), continuing
//! from a checkpoint (`resume`), one optimizer step (`step`, with `accumulate`), the end of an
//! epoch (`epoch`: validation, metrics, reduce-on-plateau, early stopping, checkpoint), the
//! `--record` lines (`record`) and what the run ends with ([`TrainSummary`]).

mod accumulate;
mod config;
mod epoch;
mod record;
mod resume;
mod samples;
mod step;
mod summary;

use std::time::Instant;

use tch::nn;

use crate::callbacks::EarlyStopping;
use crate::checkpoint;
use crate::comm::Comm;
use crate::ddp::DataParallel;
use crate::device;
use crate::error::{Error, Result};
use crate::metrics::{EpochMetrics, MetricsCsv};
use crate::optim::Optimizer;
use crate::profile::{DeviceMemory, ProfileSummary};
use crate::progress::EpochProgress;
use crate::schedule::Schedule;
use crate::shard::{epoch_permutation, local_batches, micro_batch_range};

pub use config::{TrainConfig, LR_SCALING_REFERENCE_BATCH};
pub use samples::TrainSamples;
pub use summary::TrainSummary;

use epoch::{EpochEnd, Position};
use record::StepRecorder;
use resume::Resumed;
use samples::RunData;
use step::{check_loss_is_finite, Stepper};

/// Places this rank on its device (`--device`, see [`device::select`]) and makes it the
/// thread's current one; the master says where the job trains.
fn select_device(comm: &Comm, cfg: &TrainConfig) -> Result<tch::Device> {
    let ctx = comm.context();
    let placement = device::select(
        cfg.device,
        usize::from(ctx.local_rank()),
        usize::from(ctx.local_num()),
    )?;
    let device = placement.device;
    crate::stream::set_current_device(device)?;
    if comm.is_master() {
        match (device, placement.ranks_sharing) {
            (tch::Device::Cpu, _) => {
                tracing::info!("training on the CPU (--device {})", cfg.device)
            }
            (d, 1) => tracing::info!("training on {d:?}, one rank per GPU"),
            (d, k) => tracing::info!("training on {d:?}: {k} ranks of this host share it"),
        }
        if cfg.amp_bf16 && device == tch::Device::Cpu {
            tracing::warn!("--amp bf16 on the CPU: autocast to bf16 works there but is slow");
        }
        if cfg.cudnn_benchmark && device == tch::Device::Cpu {
            tracing::warn!("--cudnn-benchmark on the CPU: no effect (cuDNN is the GPU's)");
        }
    }
    if cfg.cudnn_benchmark && device.is_cuda() {
        tch::Cuda::cudnn_set_benchmark(true);
    }
    Ok(device)
}

/// Trains on every rank of `comm`; collective.
pub fn train(comm: &Comm, cfg: &TrainConfig) -> Result<TrainSummary> {
    let (p, rank, master) = (comm.size(), comm.rank(), comm.is_master());
    if cfg.grad_accum == 0 {
        return Err(Error::Config("--grad-accum must be at least 1".into()));
    }
    let device = select_device(comm, cfg)?;
    let data = RunData::load(cfg, device)?;
    let samples = data.train();
    let test_split = data.test();
    cfg.check_batch_size(samples.len())?;
    let validation_freq = cfg.resolved_validation_freq(test_split.is_some())?;
    let micro = micro_batch_range(cfg.batch_size, p, rank)?.len();
    if cfg.model.has_batch_norm() && master && cfg.batch_size / p < 16 {
        tracing::warn!(
            "{:?} has BatchNorm and the micro-batch is {} (< 16) samples per rank: its \
             statistics are per rank and will be noisy",
            cfg.model,
            cfg.batch_size / p
        );
    }
    let steps_per_epoch = (samples.len() / cfg.batch_size / cfg.grad_accum) as u64;
    let mut schedule = Schedule::new(cfg.schedule_config(steps_per_epoch))?;
    let mut early_stop = cfg
        .early_stop_patience
        .map(|n| EarlyStopping::new(cfg.monitor, n, cfg.min_delta))
        .transpose()?;
    tch::manual_seed(cfg.seed as i64);
    let vs = nn::VarStore::new(device);
    let model = cfg.model.build(&vs.root(), &cfg.mlp_hidden)?;
    if cfg.channels_last {
        let converted = crate::memory_format::convert_variables(&vs)?;
        if master && converted == 0 {
            tracing::warn!(
                "--channels-last: {:?} has no convolution to convert",
                cfg.model
            );
        }
    }
    let mut ddp = DataParallel::new(comm, &vs, cfg.ddp)?;
    let mut opt = Optimizer::new(cfg.optimizer, ddp.params(), cfg.lr)?;
    let mut summary = TrainSummary::default();
    if let Some(dir) = &cfg.checkpoint_dir {
        checkpoint::check_writable(comm, dir, cfg.resume)?;
    }
    let (epochs_done, mut step) = if cfg.resume {
        let state = resume::State {
            vs: &vs,
            opt: &mut opt,
            schedule: &mut schedule,
            early_stop: early_stop.as_mut(),
            summary: &mut summary,
        };
        match resume::resume(comm, cfg, state)? {
            Resumed::Finished => return Ok(summary),
            Resumed::At { epochs_done, step } => (epochs_done, step),
        }
    } else {
        (0, 0)
    };
    let mut record = cfg
        .record
        .as_deref()
        .map(|path| StepRecorder::create(path, rank))
        .transpose()?;
    let mut csv = match (&cfg.metrics_csv, master) {
        (Some(path), true) => Some(MetricsCsv::create(path, cfg.resume)?),
        _ => None,
    };
    let mut stepper = Stepper::new(cfg, samples, model.as_ref(), device);
    let epoch_end = EpochEnd {
        comm,
        cfg,
        vs: &vs,
        model: model.as_ref(),
        device,
    };
    let mut all_times = Vec::new();
    let mut device_after_step_2 = None;
    tracing::info!(
        ranks = p,
        micro_batch = micro,
        params = ddp.params().iter().map(tch::Tensor::numel).sum::<usize>(),
        buckets = ddp.plan().num_buckets(),
        "training {:?} on {} samples with global batch {}",
        cfg.model,
        samples.len(),
        cfg.batch_size
    );
    'epochs: for epoch in epochs_done..cfg.epochs {
        let order = epoch_permutation(samples.len(), cfg.seed, epoch);
        let batches = local_batches(&order, cfg.batch_size, p, rank)?;
        let groups: Vec<&[Vec<usize>]> = batches.chunks_exact(cfg.grad_accum).collect();
        let mut bar = EpochProgress::new(
            master,
            cfg.progress_bar,
            cfg.verbose,
            epoch,
            cfg.epochs,
            groups.len() as u64,
        );
        let epoch_start = Instant::now();
        let mut times = Vec::new();
        let mut sums = [0f64; 3]; // loss sum, correct, samples over the epoch
        for group in &groups {
            if cfg.max_steps.is_some_and(|max| step >= max) {
                bar.finish();
                all_times.append(&mut times);
                break 'epochs;
            }
            opt.set_lr(schedule.lr(step));
            let done = stepper.run(&mut ddp, &mut opt, group)?;
            step += 1;
            times.push(done.times);
            if cfg.profile && step == 2 {
                device_after_step_2 = Some(crate::stream::device_allocated_bytes(device)?);
            }
            // [loss sum, correct, samples] of this optimizer step, over all ranks.
            let mut m = done.sums;
            comm.sum_f64(&mut m)?;
            check_loss_is_finite(step, m)?;
            for (s, v) in sums.iter_mut().zip(m) {
                *s += v;
            }
            summary.last_loss = m[0] / m[2];
            summary.last_accuracy = m[1] / m[2];
            bar.step(summary.last_loss, summary.last_accuracy, m[2], opt.lr());
            if let Some(record) = record.as_mut() {
                record.write(step, &summary, &ddp, &done.trace)?;
            }
        }
        bar.finish();
        let due = validation_freq.is_some_and(|f| (epoch + 1) % f == 0 || epoch + 1 == cfg.epochs);
        let val = match (test_split, due) {
            (Some(test), true) => Some(epoch_end.validate(test, step)?),
            _ => None,
        };
        let seconds = epoch_start.elapsed().as_secs_f64();
        let metrics = EpochMetrics {
            epoch: epoch + 1,
            lr: opt.lr(),
            loss: sums[0] / sums[2].max(1.0),
            accuracy: sums[1] / sums[2].max(1.0),
            val_loss: val.map(|v| v.loss),
            val_accuracy: val.map(|v| v.accuracy),
            val_samples: val.map(|v| v.samples),
            seconds,
            samples_per_second: sums[2] / seconds.max(1e-9),
        };
        epoch_end.report(&metrics, &times);
        if let Some(csv) = csv.as_mut() {
            csv.write(&metrics)?;
        }
        all_times.extend(times);
        summary.history.push(metrics);
        epoch_end.update_plateau(&mut schedule, &metrics);
        let stop = match early_stop.as_mut() {
            Some(es) => epoch_end.early_stop(es, &metrics, &mut summary)?,
            None => false,
        };
        let finished = stop || epoch + 1 == cfg.epochs;
        let at = Position {
            epochs_done: epoch + 1,
            step,
            finished,
        };
        epoch_end.checkpoint(at, &opt, &schedule, early_stop.as_ref(), &summary)?;
        if stop {
            break;
        }
    }
    summary.steps = step;
    if cfg.profile {
        summary.profile = ProfileSummary::from_steps(&all_times, 2);
        if let (Some(p), Some(after_step_2), true) = (
            summary.profile.as_mut(),
            device_after_step_2,
            device.is_cuda(),
        ) {
            p.device_bytes = Some(DeviceMemory {
                after_step_2,
                at_end: crate::stream::device_allocated_bytes(device)?,
            });
        }
        if let Some(p) = &summary.profile {
            if master {
                println!("{p}");
            }
        }
    }
    if let Some(record) = record {
        record.finish()?;
    }
    comm.barrier()?;
    Ok(summary)
}
