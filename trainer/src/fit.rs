//! The training loop of the `train` binary: data sharding, exact global-batch loss, LR
//! schedule, gradient accumulation and clipping, data-parallel validation, metrics aggregated
//! over ranks, callbacks, progress, profiling and checkpoints.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use tch::{nn, Tensor};

use crate::callbacks::EarlyStopping;
use crate::checkpoint::{self, model_spec, Which};
use crate::comm::Comm;
use crate::data::{self, DatasetKind, TrainSamples};
use crate::ddp::{DataParallel, DdpConfig};
use crate::device::{self, DeviceArg};
use crate::error::{Error, Result};
use crate::evaluate::evaluate;
use crate::hooks::{now_ns, StepTrace};
use crate::manifest::{Manifest, FORMAT};
use crate::metrics::{EpochLine, EpochMetrics, MetricsCsv, Monitor};
use crate::models::{forward, ModelInput, ModelKind};
use crate::optim::{clip_grad_norm, Optimizer, OptimizerKind};
use crate::profile::ProfileSummary;
use crate::record::{accumulate, install_grads, step_times, write_record};
use crate::schedule::{Schedule, ScheduleConfig, ScheduleKind};
use crate::shard::{epoch_permutation, local_batches};
use crate::stream::Autocast;
use crate::synthetic::DeviceSynthetic;
use crate::{global_batch_loss, progress::EpochProgress};

/// Reference batch size of the linear LR scaling rule (Goyal et al.): `lr * B / 256`.
pub const LR_SCALING_REFERENCE_BATCH: usize = 256;

/// Everything a training run needs; the `train` binary fills it from its command line.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    pub model: ModelKind,
    /// Hidden layer sizes of the MLP.
    pub mlp_hidden: Vec<i64>,
    /// Global batch size (over all ranks) of one forward/backward micro-step.
    pub batch_size: usize,
    pub epochs: u64,
    pub lr: f64,
    pub optimizer: OptimizerKind,
    pub schedule: ScheduleKind,
    /// Linear LR warmup from ~0 to the full rate over this many epochs.
    pub warmup_epochs: u64,
    /// Cosine's final rate and reduce-on-plateau's floor.
    pub min_lr: f64,
    /// Step decay: times `lr_gamma` every `lr_step_epochs` epochs.
    pub lr_step_epochs: u64,
    pub lr_gamma: f64,
    /// Reduce-on-plateau: times `plateau_factor` after `plateau_patience` bad epochs.
    pub plateau_factor: f64,
    pub plateau_patience: u64,
    /// Multiply the LR by `batch_size * grad_accum / 256`.
    pub scale_lr: bool,
    /// Clip the (summed, identical on every rank) gradients to this global L2 norm.
    pub clip_grad_norm: Option<f64>,
    /// Optimizer step every this many micro-steps (effective batch `batch_size * grad_accum`).
    pub grad_accum: usize,
    /// Synthetic, MNIST or Fashion-MNIST.
    pub dataset: DatasetKind,
    /// Directory of the IDX files (Fashion-MNIST defaults to `data::FASHION_MNIST_DIR`).
    pub data_dir: Option<PathBuf>,
    /// Use only the first N samples of each split (quick runs); `None`: all.
    pub train_subset: Option<usize>,
    pub test_subset: Option<usize>,
    /// Size of the synthetic dataset.
    pub samples: usize,
    pub seed: u64,
    /// Validate every N epochs (and after the last); `None`: every epoch when there is a test
    /// split; 0: never.
    pub validation_freq: Option<u64>,
    /// Samples per rank per forward pass during validation.
    pub eval_batch_size: usize,
    /// Early stopping after this many validated epochs without improvement of `monitor`.
    pub early_stop_patience: Option<u64>,
    pub min_delta: f64,
    pub monitor: Monitor,
    pub checkpoint_dir: Option<PathBuf>,
    /// Keep this many latest checkpoints (plus the best by `monitor`).
    pub keep_checkpoints: usize,
    /// Continue from the checkpoint in `checkpoint_dir`.
    pub resume: bool,
    pub ddp: DdpConfig,
    /// `--device`: where the model, its gradients and the batches live.
    pub device: DeviceArg,
    /// Mixed precision: forward and loss under autocast to bf16 (weights stay f32).
    pub amp_bf16: bool,
    pub profile: bool,
    /// Stop after this many optimizer steps in total (for tests and benchmarks).
    pub max_steps: Option<u64>,
    /// Per-rank step records (`<path>.rank<r>`): loss, accuracy, weight checksum, hook trace.
    pub record: Option<PathBuf>,
    /// One CSV row per epoch, written by the master.
    pub metrics_csv: Option<PathBuf>,
    pub progress_bar: bool,
    /// A log line per step.
    pub verbose: bool,
}

/// What a run ends with (the same on every rank).
#[derive(Clone, Debug, Default)]
pub struct TrainSummary {
    pub steps: u64,
    /// Global loss and accuracy of the last step.
    pub last_loss: f64,
    pub last_accuracy: f64,
    /// One entry per epoch run (by this process).
    pub history: Vec<EpochMetrics>,
    /// Set when early stopping ended the run: (stopped after epoch, best epoch).
    pub early_stopped: Option<(u64, u64)>,
    /// `resume` found a run that had already finished; nothing was trained.
    pub already_finished: bool,
    pub profile: Option<ProfileSummary>,
}

impl TrainSummary {
    /// The last validated epoch's metrics, if any.
    pub fn last_validation(&self) -> Option<&EpochMetrics> {
        self.history.iter().rev().find(|m| m.val_loss.is_some())
    }
}

fn schedule_config(cfg: &TrainConfig, steps_per_epoch: u64) -> ScheduleConfig {
    let mut base_lr = cfg.lr;
    if cfg.scale_lr {
        base_lr *= (cfg.batch_size * cfg.grad_accum) as f64 / LR_SCALING_REFERENCE_BATCH as f64;
    }
    ScheduleConfig {
        kind: cfg.schedule,
        base_lr,
        warmup_steps: cfg.warmup_epochs * steps_per_epoch,
        total_steps: cfg.epochs * steps_per_epoch,
        steps_per_epoch,
        min_lr: cfg.min_lr,
        step_epochs: cfg.lr_step_epochs,
        gamma: cfg.lr_gamma,
        plateau_factor: cfg.plateau_factor,
        plateau_patience: cfg.plateau_patience,
    }
}

/// Trains on every rank of `comm`; collective.
pub fn train(comm: &Comm, cfg: &TrainConfig) -> Result<TrainSummary> {
    let (p, rank, master) = (comm.size(), comm.rank(), comm.is_master());
    if cfg.grad_accum == 0 {
        return Err(Error::Config("--grad-accum must be at least 1".into()));
    }
    let ctx = comm.context();
    let placement = device::select(
        cfg.device,
        usize::from(ctx.local_rank()),
        usize::from(ctx.local_num()),
    )?;
    let device = placement.device;
    crate::stream::set_current_device(device)?;
    if master {
        match (device, placement.ranks_sharing) {
            (tch::Device::Cpu, _) => {
                tracing::info!("training on the CPU (--device {})", cfg.device)
            }
            (d, 1) => tracing::info!("training on {d:?}, one rank per GPU"),
            (d, k) => tracing::info!("training on {d:?}: {k} ranks of this host share it"),
        }
    }
    if cfg.amp_bf16 && device == tch::Device::Cpu && master {
        tracing::warn!("--amp bf16 on the CPU: autocast to bf16 works there but is slow");
    }
    let (mut splits, on_device) = match cfg.model.input() {
        ModelInput::Mnist => (
            Some(data::load(
                cfg.dataset,
                cfg.data_dir.as_deref(),
                cfg.samples,
                cfg.seed,
            )?),
            None,
        ),
        input if cfg.dataset == DatasetKind::Synthetic => (
            None,
            Some(DeviceSynthetic::new(input, cfg.samples, cfg.seed, device)?),
        ),
        _ => {
            return Err(Error::Config(format!(
                "--model {:?} trains on synthetic data on the device (--dataset synthetic); \
                 the MNIST-shaped datasets fit the small models",
                cfg.model
            )))
        }
    };
    if let Some(splits) = splits.as_mut() {
        if let Some(n) = cfg.train_subset {
            splits.train.truncate(n);
        }
        if let (Some(n), Some(test)) = (cfg.test_subset, splits.test.as_mut()) {
            test.truncate(n);
        }
    }
    let data = match (&splits, &on_device) {
        (Some(s), _) => TrainSamples::Host(&s.train),
        (None, Some(d)) => TrainSamples::Device(d),
        (None, None) => return Err(Error::Config("no training data was loaded".into())),
    };
    let test_split = splits.as_ref().and_then(|s| s.test.as_ref());
    if cfg.batch_size == 0 || cfg.batch_size * cfg.grad_accum > data.len() {
        return Err(Error::Config(format!(
            "global batch size {} (times --grad-accum {}) must be in 1..={} (the training set \
             size)",
            cfg.batch_size,
            cfg.grad_accum,
            data.len()
        )));
    }
    let validation_freq = match (cfg.validation_freq, test_split) {
        (Some(0), _) | (_, None) => None,
        (Some(n), Some(_)) => Some(n),
        (None, Some(_)) => Some(1),
    };
    if cfg.early_stop_patience.is_some() && validation_freq.is_none() {
        return Err(Error::Config(
            "early stopping monitors validation metrics: it needs a test split (--dataset \
             mnist or fashion-mnist) and --validation-freq >= 1"
                .into(),
        ));
    }
    let micro = crate::shard::micro_batch_range(cfg.batch_size, p, rank)?.len();
    if cfg.model.has_batch_norm() && master && cfg.batch_size / p < 16 {
        tracing::warn!(
            "{:?} has BatchNorm and the micro-batch is {} (< 16) samples per rank: its \
             statistics are per rank and will be noisy",
            cfg.model,
            cfg.batch_size / p
        );
    }
    let steps_per_epoch = (data.len() / cfg.batch_size / cfg.grad_accum) as u64;
    let mut schedule = Schedule::new(schedule_config(cfg, steps_per_epoch))?;
    let mut early_stop = cfg
        .early_stop_patience
        .map(|n| EarlyStopping::new(cfg.monitor, n, cfg.min_delta))
        .transpose()?;
    tch::manual_seed(cfg.seed as i64);
    let vs = nn::VarStore::new(device);
    let model = cfg.model.build(&vs.root(), &cfg.mlp_hidden)?;
    let mut ddp = DataParallel::new(comm, &vs, cfg.ddp)?;
    let mut opt = Optimizer::new(cfg.optimizer, ddp.params(), cfg.lr)?;
    let (mut epochs_done, mut step) = (0, 0);
    let mut summary = TrainSummary::default();
    if let Some(dir) = &cfg.checkpoint_dir {
        checkpoint::check_writable(comm, dir)?;
    }
    if cfg.resume {
        let root = cfg
            .checkpoint_dir
            .as_ref()
            .ok_or_else(|| Error::Config("--resume needs --checkpoint-dir".to_owned()))?;
        let (dir, manifest) = checkpoint::read_manifest(comm, root, Which::Latest)?;
        manifest.check_compatible(
            &dir,
            &model_spec(cfg.model, &cfg.mlp_hidden, &vs),
            &cfg.optimizer,
        )?;
        summary.history = manifest.metrics.clone();
        summary.steps = manifest.global_step;
        summary.early_stopped = manifest.early_stopped;
        if let Some(last) = manifest.metrics.last() {
            summary.last_loss = last.loss;
            summary.last_accuracy = last.accuracy;
        }
        if manifest.early_stopped.is_some() || manifest.epochs_done >= cfg.epochs {
            if master {
                println!(
                    "the run in {} already finished after epoch {}/{}{}; nothing to train. Its \
                     final metrics:",
                    root.display(),
                    manifest.epochs_done,
                    manifest.epochs,
                    if manifest.early_stopped.is_some() {
                        " (early stopping)"
                    } else {
                        ""
                    }
                );
                if let Some(last) = manifest.metrics.last() {
                    println!(
                        "{}",
                        EpochLine {
                            metrics: last,
                            epochs: manifest.epochs
                        }
                    );
                }
            }
            summary.already_finished = true;
            comm.barrier()?;
            return Ok(summary);
        }
        checkpoint::load_tensors(comm, &dir, &manifest, &vs, Some(&mut opt))?;
        schedule.plateau = manifest.plateau;
        (epochs_done, step) = (manifest.epochs_done, manifest.global_step);
        tracing::info!(epochs_done, step, "resumed from {}", dir.display());
    }
    let mut record = match &cfg.record {
        Some(path) => {
            let path = PathBuf::from(format!("{}.rank{rank}", path.display()));
            let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            Some((path, std::io::BufWriter::new(file)))
        }
        None => None,
    };
    let mut csv = match (&cfg.metrics_csv, master) {
        (Some(path), true) => Some(MetricsCsv::create(path, cfg.resume)?),
        _ => None,
    };
    let mut all_times = Vec::new();
    let mut accum: Vec<Tensor> = Vec::new();
    tracing::info!(
        ranks = p,
        micro_batch = micro,
        params = ddp.params().iter().map(Tensor::numel).sum::<usize>(),
        buckets = ddp.plan().num_buckets(),
        "training {:?} on {} samples with global batch {}",
        cfg.model,
        data.len(),
        cfg.batch_size
    );
    'epochs: for epoch in epochs_done..cfg.epochs {
        let order = epoch_permutation(data.len(), cfg.seed, epoch);
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
                break 'epochs;
            }
            opt.set_lr(schedule.lr(step));
            let t0 = now_ns();
            // [loss sum, correct, samples] of this optimizer step, local.
            let mut m = [0f64; 3];
            let mut trace = StepTrace::default();
            let effective_batch = cfg.batch_size * cfg.grad_accum;
            for (micro_step, indices) in group.iter().enumerate() {
                let (x, y) = data.batch(indices, device)?;
                ddp.zero_grad();
                let (logits, loss, loss_sum) = {
                    let _amp = cfg
                        .amp_bf16
                        .then(|| Autocast::enter(device, tch::Kind::BFloat16))
                        .transpose()?;
                    let logits = forward(model.as_ref(), &x, true)?;
                    let (loss, loss_sum) = global_batch_loss(&logits, &y, effective_batch)?;
                    (logits, loss, loss_sum)
                };
                trace = ddp.backward(&loss)?;
                if cfg.grad_accum > 1 {
                    accumulate(&mut accum, ddp.params(), micro_step == 0)?;
                }
                let correct = tch::no_grad(|| -> Result<f64> {
                    Ok(logits
                        .f_argmax(-1, false)?
                        .f_eq_tensor(&y)?
                        .f_sum(tch::Kind::Float)?
                        .f_double_value(&[])?)
                })?;
                m[0] += loss_sum;
                m[1] += correct;
                m[2] += indices.len() as f64;
            }
            if cfg.grad_accum > 1 {
                install_grads(&accum, ddp.params())?;
            }
            if let Some(max_norm) = cfg.clip_grad_norm {
                clip_grad_norm(ddp.params(), max_norm)?;
            }
            let t_opt = now_ns();
            opt.step()?;
            if let (true, tch::Device::Cuda(i)) = (cfg.profile, device) {
                // GPU work is asynchronous: a profiled step ends when the GPU is done with it.
                tch::Cuda::synchronize(i as i64);
            }
            let t_end = now_ns();
            step += 1;
            times.push(step_times(t0, &trace, t_opt, t_end));
            comm.sum_f64(&mut m)?;
            // The same global sum on every rank: all stop together, before anything diverged
            // can reach a checkpoint.
            if !m[0].is_finite() {
                return Err(Error::Step {
                    step,
                    message: format!(
                        "the training loss is not finite ({}); stopping before it reaches a \
                         checkpoint (lower --lr, add --clip-grad-norm, or resume from the last \
                         good checkpoint)",
                        m[0] / m[2].max(1.0)
                    ),
                });
            }
            for (s, v) in sums.iter_mut().zip(m) {
                *s += v;
            }
            summary.last_loss = m[0] / m[2];
            summary.last_accuracy = m[1] / m[2];
            bar.step(summary.last_loss, summary.last_accuracy, m[2], opt.lr());
            if let Some((path, out)) = record.as_mut() {
                let device_bytes = crate::stream::device_allocated_bytes(device)?;
                write_record(
                    out,
                    step,
                    &summary,
                    ddp.weights_checksum()?,
                    &trace,
                    device_bytes,
                )
                .map_err(|e| Error::io(path.as_path(), e))?;
            }
        }
        bar.finish();
        let validate =
            validation_freq.is_some_and(|f| (epoch + 1) % f == 0 || epoch + 1 == cfg.epochs);
        let val = match (test_split, validate) {
            (Some(test), true) => Some(evaluate(
                comm,
                model.as_ref(),
                test,
                cfg.eval_batch_size,
                device,
            )?),
            _ => None,
        };
        if let Some(v) = val.filter(|v| !v.loss.is_finite()) {
            return Err(Error::Step {
                step,
                message: format!(
                    "the validation loss is not finite ({}); the last good checkpoint stays",
                    v.loss
                ),
            });
        }
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
        if master {
            println!(
                "{}",
                EpochLine {
                    metrics: &metrics,
                    epochs: cfg.epochs
                }
            );
            if cfg.profile {
                if let Some(p) = ProfileSummary::from_steps(&times, 2) {
                    println!("  {p}");
                }
            }
        }
        if let Some(csv) = csv.as_mut() {
            csv.write(&metrics)?;
        }
        all_times.extend(times);
        summary.history.push(metrics);
        let plateau_metric = cfg.monitor.value(&metrics).unwrap_or(metrics.loss);
        if let Some(lr) = schedule.end_epoch(
            if metrics.val_loss.is_some() {
                cfg.monitor
            } else {
                Monitor::ValLoss
            },
            plateau_metric,
        ) {
            if master {
                println!("  reduce-on-plateau: learning rate now {lr:.3e}");
            }
        }
        let stop = match early_stop.as_mut() {
            Some(es) => es.end_epoch(&metrics, &vs)?,
            None => false,
        };
        if stop {
            if let Some(es) = &early_stop {
                es.restore_best(&vs)?;
                let (best, best_epoch) = es.best().unwrap_or((f64::NAN, 0));
                summary.early_stopped = Some((epoch + 1, best_epoch));
                if master {
                    println!(
                        "early stopping after epoch {}: {} did not improve for {} validated \
                         epochs; restored the weights of epoch {best_epoch} ({} {best:.4})",
                        epoch + 1,
                        es.monitor.name(),
                        es.patience,
                        es.monitor.name()
                    );
                }
            }
        }
        if let Some(root) = &cfg.checkpoint_dir {
            let manifest = Manifest {
                format: FORMAT,
                model: model_spec(cfg.model, &cfg.mlp_hidden, &vs),
                optimizer: cfg.optimizer,
                schedule: schedule.config,
                plateau: schedule.plateau,
                dataset: cfg.dataset,
                data_dir: cfg.data_dir.clone(),
                seed: cfg.seed,
                batch_size: cfg.batch_size,
                grad_accum: cfg.grad_accum,
                epochs: cfg.epochs,
                epochs_done: epoch + 1,
                global_step: step,
                optimizer_steps: opt.steps(),
                finished: stop || epoch + 1 == cfg.epochs,
                early_stopped: summary.early_stopped,
                metrics: summary.history.clone(),
                files: Default::default(),
            };
            checkpoint::save(
                comm,
                root,
                cfg.keep_checkpoints,
                cfg.monitor,
                &vs,
                &opt,
                manifest,
            )?;
        }
        if stop {
            break;
        }
    }
    summary.steps = step;
    if cfg.profile {
        summary.profile = ProfileSummary::from_steps(&all_times, 2);
        if let Some(p) = &summary.profile {
            if master {
                println!("{p}");
            }
        }
    }
    if let Some((path, mut out)) = record {
        out.flush().map_err(|e| Error::io(path, e))?;
    }
    comm.barrier()?;
    Ok(summary)
}
