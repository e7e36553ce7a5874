//! The training loop of the `train` binary: data sharding, exact global-batch loss, LR
//! schedule, metrics aggregated over ranks, progress, profiling and checkpoints.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use tch::{nn, Tensor};

use crate::checkpoint::{self, Progress};
use crate::comm::Comm;
use crate::data::{Dataset, DatasetKind, Split};
use crate::ddp::{DataParallel, DdpConfig};
use crate::error::{Error, Result};
use crate::evaluate::{evaluate, Evaluation};
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
    /// The learning rate after warmup.
    pub schedule: crate::schedule::Schedule,
    /// Multiply the LR by `batch_size / 256`.
    pub scale_lr: bool,
    /// What to learn.
    pub dataset: DatasetKind,
    /// Train on the first this many samples of the training split only.
    pub train_subset: Option<usize>,
    /// The IDX files (MNIST, Fashion-MNIST); Fashion-MNIST defaults to the system's copy.
    pub data_dir: Option<PathBuf>,
    /// Evaluate on the test split every this many epochs (`None`: every epoch when the
    /// dataset has a test split; 0: never).
    pub validation_freq: Option<u64>,
    /// The master appends one row per epoch here (flushed each epoch).
    pub metrics_csv: Option<PathBuf>,
    /// Per-step lines when stderr is not a terminal.
    pub verbose: bool,
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
    /// The last evaluation on the test split.
    pub validation: Option<Evaluation>,
    pub profile: Option<ProfileSummary>,
}

/// The learning rate at `step` (0-based) of a run with `steps_per_epoch`: the base rate
/// (linearly scaled with `scale_lr`), warmed up, then as `cfg.schedule` says.
pub fn learning_rate(cfg: &TrainConfig, step: u64, steps_per_epoch: u64) -> f64 {
    let mut lr = cfg.lr;
    if cfg.scale_lr {
        lr *= cfg.batch_size as f64 / LR_SCALING_REFERENCE_BATCH as f64;
    }
    let total = cfg.epochs * steps_per_epoch;
    let total = cfg.max_steps.map_or(total, |m| m.min(total));
    crate::schedule::rate_at(
        cfg.schedule,
        lr,
        step,
        steps_per_epoch,
        cfg.warmup_epochs * steps_per_epoch,
        total,
    )
}

/// Trains on every rank of `comm`; collective.
pub fn train(comm: &Comm, cfg: &TrainConfig) -> Result<TrainSummary> {
    let (p, rank) = (comm.size(), comm.rank());
    let (data, test) = load(cfg)?;
    let validation_freq = match (cfg.validation_freq, &test) {
        (Some(f), None) if f > 0 => {
            return Err(Error::Config(format!(
                "--validation-freq {f}: the {} dataset has no test split",
                cfg.dataset
            )))
        }
        (Some(f), _) => f,
        (None, Some(_)) => 1,
        (None, None) => 0,
    };
    let mut metrics = match (&cfg.metrics_csv, comm.is_master()) {
        (Some(path), true) => Some(MetricsCsv::create(path)?),
        _ => None,
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
    if let Some(dir) = &cfg.checkpoint_dir {
        checkpoint::check_writable(comm, dir)?;
    }
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
        if start.epochs_done >= cfg.epochs {
            return finished_run(comm, cfg, dir, start, model.as_ref(), test.as_ref());
        }
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
            cfg.verbose,
            epoch,
            cfg.epochs,
            batches.len() as u64,
        );
        let epoch_start = Instant::now();
        let mut lr = learning_rate(cfg, step, steps_per_epoch);
        let mut sums = [0f64; 3]; // loss sum, correct, samples over the epoch
        for indices in &batches {
            if cfg.max_steps.is_some_and(|max| step >= max) {
                break 'epochs;
            }
            lr = learning_rate(cfg, step, steps_per_epoch);
            opt.set_lr(lr);
            let t0 = now_ns();
            let (x, y) = data.batch(indices)?;
            ddp.zero_grad();
            let logits = forward(model.as_ref(), &x, true)?;
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
        let validate = validation_freq > 0 && (epoch + 1) % validation_freq == 0;
        let val = match (&test, validate) {
            (Some(t), true) => Some(evaluate(comm, model.as_ref(), t, EVAL_BATCH)?),
            _ => None,
        };
        if val.is_some() {
            summary.validation = val;
        }
        if sums[2] > 0.0 {
            let row = EpochRow {
                epoch: epoch + 1,
                epochs: cfg.epochs,
                lr,
                loss: sums[0] / sums[2],
                accuracy: sums[1] / sums[2],
                val,
                seconds: elapsed,
                samples_per_s: sums[2] / elapsed.max(1e-9),
            };
            if comm.is_master() {
                println!("{row}");
            }
            if let Some(m) = metrics.as_mut() {
                m.append(&row)?;
            }
        }
        if let Some(dir) = &cfg.checkpoint_dir {
            let progress = Progress {
                epochs_done: epoch + 1,
                global_step: step,
                loss: sums[0] / sums[2].max(1.0),
                accuracy: sums[1] / sums[2].max(1.0),
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

/// Resuming a run that already did all its epochs: says so, and reports the metrics of its
/// last epoch and, where there is a test split, the test metrics of its weights.
fn finished_run(
    comm: &Comm,
    cfg: &TrainConfig,
    dir: &std::path::Path,
    done: Progress,
    model: &dyn nn::ModuleT,
    test: Option<&Dataset>,
) -> Result<TrainSummary> {
    let validation = match test {
        Some(t) => Some(evaluate(comm, model, t, EVAL_BATCH)?),
        None => None,
    };
    if comm.is_master() {
        println!(
            "the checkpoint in {} is of a finished run ({} of {} epochs): nothing to train",
            dir.display(),
            done.epochs_done,
            cfg.epochs
        );
    }
    Ok(TrainSummary {
        steps: done.global_step,
        last_loss: done.loss,
        last_accuracy: done.accuracy,
        validation,
        profile: None,
    })
}

/// Samples per rank and forward pass when evaluating.
const EVAL_BATCH: usize = 1000;

/// The training split and, where the dataset has one, the test split.
fn load(cfg: &TrainConfig) -> Result<(Dataset, Option<Dataset>)> {
    match cfg.dataset {
        DatasetKind::Synthetic => {
            if let Some(dir) = &cfg.data_dir {
                return Err(Error::Config(format!(
                    "--data-dir {} needs --dataset mnist or fashion-mnist",
                    dir.display()
                )));
            }
            Ok((Dataset::synthetic(cfg.samples, cfg.seed)?, None))
        }
        kind => {
            let dir = kind.resolve_dir(cfg.data_dir.as_deref())?;
            let mut train = Dataset::idx(kind, &dir, Split::Train)?;
            if let Some(n) = cfg.train_subset {
                train = train.truncated(n)?;
            }
            let test = match cfg.validation_freq {
                Some(0) => None,
                _ => Some(Dataset::idx(kind, &dir, Split::Test)?),
            };
            Ok((train, test))
        }
    }
}

/// The model's forward pass (`train`: training mode); tch's `ModuleT` panics on libtorch
/// errors (a shape mismatch, say), which becomes an error here instead of aborting the rank.
pub(crate) fn forward(model: &dyn nn::ModuleT, x: &Tensor, train: bool) -> Result<Tensor> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.forward_t(x, train))).map_err(
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

/// One epoch's results: printed as a Keras-like line and written as a CSV row.
#[derive(Clone, Copy, Debug)]
pub struct EpochRow {
    pub epoch: u64,
    pub epochs: u64,
    /// The learning rate of the epoch's last step.
    pub lr: f64,
    pub loss: f64,
    pub accuracy: f64,
    pub val: Option<Evaluation>,
    pub seconds: f64,
    pub samples_per_s: f64,
}

impl std::fmt::Display for EpochRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Epoch {}/{} - {:.1}s - loss: {:.4} - accuracy: {:.4}",
            self.epoch, self.epochs, self.seconds, self.loss, self.accuracy
        )?;
        if let Some(v) = self.val {
            write!(
                f,
                " - val_loss: {:.4} - val_accuracy: {:.4}",
                v.loss, v.accuracy
            )?;
        }
        write!(f, " - {:.0} samples/s", self.samples_per_s)
    }
}

/// The `--metrics-csv` file: a header, then one row per epoch, flushed as written.
struct MetricsCsv {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl MetricsCsv {
    const HEADER: &'static str =
        "epoch,lr,loss,accuracy,val_loss,val_accuracy,seconds,samples_per_s";

    fn create(path: &std::path::Path) -> Result<Self> {
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let mut m = MetricsCsv {
            path: path.to_path_buf(),
            out: std::io::BufWriter::new(file),
        };
        m.write_line(Self::HEADER)?;
        Ok(m)
    }

    fn append(&mut self, r: &EpochRow) -> Result<()> {
        let (vl, va) = match r.val {
            Some(v) => (format!("{:.6}", v.loss), format!("{:.6}", v.accuracy)),
            None => (String::new(), String::new()),
        };
        let line = format!(
            "{},{:e},{:.6},{:.6},{vl},{va},{:.3},{:.1}",
            r.epoch, r.lr, r.loss, r.accuracy, r.seconds, r.samples_per_s
        );
        self.write_line(&line)
    }

    fn write_line(&mut self, line: &str) -> Result<()> {
        writeln!(self.out, "{line}")
            .and_then(|()| self.out.flush())
            .map_err(|e| Error::io(&self.path, e))
    }
}
