//! The training loop of the `train` binary: data sharding, exact global-batch loss, LR
//! schedule, metrics aggregated over ranks, progress, profiling and checkpoints.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use tch::{nn, Tensor};

use crate::checkpoint::{self, Progress};
use crate::comm::Comm;
use crate::data::Dataset;
use crate::ddp::{DataParallel, DdpConfig};
use crate::error::{Error, Result};
use crate::hooks::{now_ns, StepTrace};
use crate::models::ModelKind;
use crate::optim::{Optimizer, OptimizerKind};
use crate::profile::{ProfileSummary, StepTimes};
use crate::shard::{epoch_permutation, local_batches};
use crate::{global_batch_loss, progress::EpochProgress};

/// Reference batch size of the linear LR scaling rule (Goyal et al.): `lr * B / 256`.
pub const LR_SCALING_REFERENCE_BATCH: usize = 256;

/// Everything a training run needs; the `train` binary fills it from its command line.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    pub model: ModelKind,
    /// Hidden layer sizes of the MLP.
    pub mlp_hidden: Vec<i64>,
    /// Global batch size (over all ranks).
    pub batch_size: usize,
    pub epochs: u64,
    pub lr: f64,
    pub optimizer: OptimizerKind,
    /// Linear LR warmup from ~0 to the full rate over this many epochs.
    pub warmup_epochs: u64,
    /// Multiply the LR by `batch_size / 256`.
    pub scale_lr: bool,
    /// Real MNIST IDX files; synthetic data when `None`.
    pub data_dir: Option<PathBuf>,
    /// Size of the synthetic dataset.
    pub samples: usize,
    pub seed: u64,
    pub checkpoint_dir: Option<PathBuf>,
    /// Continue from the checkpoint in `checkpoint_dir`.
    pub resume: bool,
    pub ddp: DdpConfig,
    pub profile: bool,
    /// Stop after this many optimizer steps in total (for tests and benchmarks).
    pub max_steps: Option<u64>,
    /// Per-rank step records (`<path>.rank<r>`): loss, accuracy, weight checksum, hook trace.
    pub record: Option<PathBuf>,
    pub progress_bar: bool,
}

/// What a run ends with (the same on every rank).
#[derive(Clone, Debug, Default)]
pub struct TrainSummary {
    pub steps: u64,
    pub last_loss: f64,
    pub last_accuracy: f64,
    pub profile: Option<ProfileSummary>,
}

/// The learning rate at `step` (0-based) of a run with `steps_per_epoch`.
pub fn learning_rate(cfg: &TrainConfig, step: u64, steps_per_epoch: u64) -> f64 {
    let mut lr = cfg.lr;
    if cfg.scale_lr {
        lr *= cfg.batch_size as f64 / LR_SCALING_REFERENCE_BATCH as f64;
    }
    let warmup = cfg.warmup_epochs * steps_per_epoch;
    if step < warmup {
        lr *= (step + 1) as f64 / warmup as f64;
    }
    lr
}

/// Trains on every rank of `comm`; collective.
pub fn train(comm: &Comm, cfg: &TrainConfig) -> Result<TrainSummary> {
    let (p, rank) = (comm.size(), comm.rank());
    let data = match &cfg.data_dir {
        Some(dir) => Dataset::mnist(dir)?,
        None => Dataset::synthetic(cfg.samples, cfg.seed)?,
    };
    if cfg.batch_size == 0 || cfg.batch_size > data.len() {
        return Err(Error::Config(format!(
            "global batch size {} must be in 1..={} (the dataset size)",
            cfg.batch_size,
            data.len()
        )));
    }
    let micro = crate::shard::micro_batch_range(cfg.batch_size, p, rank)?.len();
    if cfg.model.has_batch_norm() && comm.is_master() && cfg.batch_size / p < 16 {
        tracing::warn!(
            "{:?} has BatchNorm and the micro-batch is {} (< 16) samples per rank: its \
             statistics are per rank and will be noisy",
            cfg.model,
            cfg.batch_size / p
        );
    }
    tch::manual_seed(cfg.seed as i64);
    let mut vs = nn::VarStore::new(tch::Device::Cpu);
    let model = cfg.model.build(&vs.root(), &cfg.mlp_hidden)?;
    let mut ddp = DataParallel::new(comm, &vs, cfg.ddp)?;
    let mut opt = Optimizer::new(cfg.optimizer, ddp.params(), cfg.lr)?;
    let mut start = Progress::default();
    if cfg.resume {
        let dir = cfg
            .checkpoint_dir
            .as_ref()
            .ok_or_else(|| Error::Config("--resume needs --checkpoint-dir".to_owned()))?;
        start = checkpoint::load(comm, dir, &mut vs, &mut opt)?;
        tracing::info!(
            epochs_done = start.epochs_done,
            step = start.global_step,
            "resumed"
        );
    }
    let steps_per_epoch = (data.len() / cfg.batch_size) as u64;
    let mut record = match &cfg.record {
        Some(path) => {
            let path = PathBuf::from(format!("{}.rank{rank}", path.display()));
            let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            Some((path, std::io::BufWriter::new(file)))
        }
        None => None,
    };
    let mut summary = TrainSummary::default();
    let mut times = Vec::new();
    let mut step = start.global_step;
    tracing::info!(
        ranks = p,
        micro_batch = micro,
        params = ddp.params().iter().map(Tensor::numel).sum::<usize>(),
        buckets = ddp.plan().num_buckets(),
        "training {:?} with global batch {}",
        cfg.model,
        cfg.batch_size
    );
    'epochs: for epoch in start.epochs_done..cfg.epochs {
        let order = epoch_permutation(data.len(), cfg.seed, epoch);
        let batches = local_batches(&order, cfg.batch_size, p, rank)?;
        let mut bar = EpochProgress::new(
            comm.is_master() && cfg.progress_bar,
            epoch,
            cfg.epochs,
            batches.len() as u64,
        );
        let epoch_start = Instant::now();
        let mut sums = [0f64; 3]; // loss sum, correct, samples over the epoch
        for indices in &batches {
            if cfg.max_steps.is_some_and(|max| step >= max) {
                break 'epochs;
            }
            opt.set_lr(learning_rate(cfg, step, steps_per_epoch));
            let t0 = now_ns();
            let (x, y) = data.batch(indices)?;
            ddp.zero_grad();
            let logits = forward(model.as_ref(), &x)?;
            let (loss, loss_sum) = global_batch_loss(&logits, &y, cfg.batch_size)?;
            let trace = ddp.backward(&loss)?;
            let t_opt = now_ns();
            opt.step()?;
            let t_end = now_ns();
            step += 1;
            let t = step_times(t0, &trace, t_opt, t_end);
            if cfg.profile && comm.is_master() {
                tracing::info!(
                    step,
                    step_ms = t.step_ms,
                    compute_ms = t.compute_ms,
                    exposed_comm_ms = t.exposed_comm_ms,
                    optimizer_ms = t.optimizer_ms,
                    "profile"
                );
            }
            times.push(t);
            let correct =
                tch::no_grad(|| logits.argmax(-1, false).eq_tensor(&y).sum(tch::Kind::Float))
                    .double_value(&[]);
            let mut m = [loss_sum, correct, indices.len() as f64];
            comm.sum_f64(&mut m)?;
            for (s, v) in sums.iter_mut().zip(m) {
                *s += v;
            }
            summary.last_loss = m[0] / m[2];
            summary.last_accuracy = m[1] / m[2];
            bar.step(summary.last_loss, summary.last_accuracy, m[2]);
            if let Some((path, out)) = record.as_mut() {
                write_record(out, step, &summary, ddp.weights_checksum()?, &trace)
                    .map_err(|e| Error::io(path.as_path(), e))?;
            }
        }
        let elapsed = epoch_start.elapsed().as_secs_f64();
        bar.finish();
        if comm.is_master() && sums[2] > 0.0 {
            println!(
                "epoch {}/{}: loss {:.4} accuracy {:.2}% {:.0} samples/s",
                epoch + 1,
                cfg.epochs,
                sums[0] / sums[2],
                100.0 * sums[1] / sums[2],
                sums[2] / elapsed.max(1e-9)
            );
        }
        if let Some(dir) = &cfg.checkpoint_dir {
            let progress = Progress {
                epochs_done: epoch + 1,
                global_step: step,
            };
            checkpoint::save(comm, dir, &vs, &opt, progress)?;
        }
    }
    summary.steps = step;
    if cfg.profile {
        summary.profile = ProfileSummary::from_steps(&times, 2);
        if let Some(p) = &summary.profile {
            if comm.is_master() {
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

/// The model's forward pass; tch's `ModuleT` panics on libtorch errors (a shape mismatch,
/// say), which becomes an error here instead of aborting the rank.
fn forward(model: &dyn nn::ModuleT, x: &Tensor) -> Result<Tensor> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.forward_t(x, true))).map_err(
        |panic| {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown error");
            Error::Model(format!("forward pass failed: {message}"))
        },
    )
}

fn step_times(t0: u64, trace: &StepTrace, t_opt: u64, t_end: u64) -> StepTimes {
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
fn write_record(
    out: &mut impl Write,
    step: u64,
    summary: &TrainSummary,
    checksum: u64,
    trace: &StepTrace,
) -> std::io::Result<()> {
    writeln!(
        out,
        "step={step} loss={:e} accuracy={:e} checksum={checksum:016x} hooks={} \
         first_hook_ns={} last_hook_ns={} backward_end_ns={} ready_ns={} start_ns={} done_ns={}",
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
