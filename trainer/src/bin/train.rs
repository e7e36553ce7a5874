//! `train`: data-parallel training of an example model. Run it under the launcher,
//! `tarantella -n 2 -- train --model lenet5`, or plainly for one rank. `train evaluate` and
//! `train predict` run a checkpoint on the test split.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use fusion::FusionThreshold;
use trainer::checkpoint::Which;
use trainer::data::DatasetKind;
use trainer::device::DeviceArg;
use trainer::evaluate::{evaluate, predict, write_predictions};
use trainer::fit::{train, TrainConfig};
use trainer::metrics::Monitor;
use trainer::models::ModelKind;
use trainer::schedule::ScheduleKind;
use trainer::{Comm, DdpConfig, GradDtype, OptimizerKind};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum AmpArg {
    Bf16,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OptimizerArg {
    Sgd,
    Adam,
    Adamw,
}

/// Data-parallel training over GASPI (global-batch semantics: results do not depend on the
/// number of ranks).
#[derive(Debug, Parser)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[arg(long, value_enum, default_value = "lenet5")]
    model: ModelKind,
    /// Global batch size, split over the ranks.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    #[arg(long, default_value_t = 1)]
    epochs: u64,
    #[arg(long, default_value_t = 0.05)]
    lr: f64,
    #[arg(long, value_enum, default_value = "sgd")]
    optimizer: OptimizerArg,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.9)]
    momentum: f64,
    /// Weight decay: L2 added to the gradient for sgd and adam, decoupled for adamw.
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    /// Learning-rate schedule after the warmup: constant, cosine (to --min-lr over the run),
    /// step (StepLR: times --lr-gamma every --lr-step-epochs), plateau (ReduceLROnPlateau on
    /// --monitor, else the training loss).
    #[arg(long, value_enum, default_value = "constant")]
    lr_schedule: ScheduleKind,
    /// Linear learning-rate warmup over this many epochs.
    #[arg(long, default_value_t = 0)]
    warmup_epochs: u64,
    /// Final rate of cosine, floor of plateau.
    #[arg(long, default_value_t = 0.0)]
    min_lr: f64,
    #[arg(long, default_value_t = 10)]
    lr_step_epochs: u64,
    #[arg(long, default_value_t = 0.1)]
    lr_gamma: f64,
    #[arg(long, default_value_t = 0.1)]
    plateau_factor: f64,
    #[arg(long, default_value_t = 2)]
    plateau_patience: u64,
    /// Linear LR scaling: multiply --lr by (batch-size * grad-accum) / 256.
    #[arg(long)]
    scale_lr: bool,
    /// Clip gradients to this global L2 norm (clip_grad_norm_; on the summed gradients, so
    /// identical on every rank).
    #[arg(long)]
    clip_grad_norm: Option<f64>,
    /// Accumulate gradients over this many micro-steps of --batch-size per optimizer step.
    #[arg(long, default_value_t = 1)]
    grad_accum: usize,
    /// Data: synthetic (no files, no test split), mnist or fashion-mnist (IDX files, .gz or
    /// plain, train-* and t10k-*). Default: mnist with --data-dir, else synthetic.
    #[arg(long, value_enum)]
    dataset: Option<DatasetKind>,
    /// Directory with the IDX files; for fashion-mnist the default is
    /// /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist package).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Train on the first N training samples only.
    #[arg(long)]
    train_subset: Option<usize>,
    /// Validate on the first N test samples only.
    #[arg(long)]
    test_subset: Option<usize>,
    /// Size of the synthetic dataset.
    #[arg(long, default_value_t = 4096)]
    samples: usize,
    /// Validate on the test split every N epochs and after the last (default 1 when there is
    /// a test split; 0: never).
    #[arg(long)]
    validation_freq: Option<u64>,
    /// Samples per rank per forward pass in validation.
    #[arg(long, default_value_t = 1000)]
    eval_batch_size: usize,
    /// Stop when --monitor has not improved for N validated epochs; restores the best weights.
    #[arg(long)]
    early_stop_patience: Option<u64>,
    /// Improvement smaller than this does not count (early stopping).
    #[arg(long, default_value_t = 0.0)]
    min_delta: f64,
    /// Metric for early stopping, reduce-on-plateau and the best checkpoint.
    #[arg(long, value_enum, default_value = "val_loss")]
    monitor: Monitor,
    /// One CSV row per epoch (epoch, lr, loss, accuracy, val_loss, val_accuracy, seconds,
    /// samples/s), written by the master, flushed every epoch.
    #[arg(long)]
    metrics_csv: Option<PathBuf>,
    /// Seed for initial weights, synthetic data and shuffling.
    #[arg(long, default_value_t = trainer::shard::DEFAULT_SEED)]
    seed: u64,
    /// MLP hidden layer sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "512,256")]
    hidden: Vec<i64>,
    /// The master rank writes a checkpoint here after every epoch (safetensors + a manifest
    /// with SHA-256 hashes, atomically); checked for writability before the first step.
    #[arg(long)]
    checkpoint_dir: Option<PathBuf>,
    /// Keep this many latest checkpoints, plus the best by --monitor.
    #[arg(long, default_value_t = 2)]
    keep_checkpoints: usize,
    /// Continue from the checkpoint in --checkpoint-dir (read by rank 0, broadcast).
    #[arg(long, requires = "checkpoint_dir")]
    resume: bool,
    /// Fusion threshold in KiB; default: the launcher's TNT_FUSION_THRESHOLD_KB, else 32.
    #[arg(long)]
    fusion_threshold: Option<FusionThreshold>,
    /// Device: auto (a GPU when one is visible, else the CPU), cpu, cuda (rank r of a host
    /// takes GPU local_rank mod visible GPUs) or cuda:N.
    #[arg(long, default_value = "auto")]
    device: DeviceArg,
    /// Element type gradients are allreduced in: f32, or bf16 (half the bytes; converted on
    /// the device, summed in f32 inside the reduction, converted back).
    #[arg(long, value_enum, default_value = "f32")]
    grad_dtype: GradDtype,
    /// Mixed precision: forward and loss under autocast (bf16); master weights stay f32.
    #[arg(long, value_enum)]
    amp: Option<AmpArg>,
    /// Let cuDNN time each convolution's algorithms on first use and keep the fastest
    /// (PyTorch's `cudnn.benchmark`); GPU only, the first steps are slower.
    #[arg(long)]
    cudnn_benchmark: bool,
    /// Keep convolution weights and image batches channels-last (NHWC in memory, PyTorch's
    /// `memory_format=torch.channels_last`): faster convolutions on GPUs' tensor cores.
    #[arg(long)]
    channels_last: bool,
    /// Stage CPU gradients the way GPU gradients are (a flat buffer packed by the hooks,
    /// copied in and out): tests the GPU path's logic on machines without a GPU.
    #[arg(long, hide = true)]
    debug_device_staging: bool,
    /// Allreduce all gradients after backward instead of overlapping (for comparison).
    #[arg(long)]
    no_overlap: bool,
    /// Keep the buckets in reverse registration order (no rebuild after the first step).
    #[arg(long)]
    no_bucket_rebuild: bool,
    /// Step timings on the master rank (compute, exposed communication, optimizer): medians
    /// per epoch and over the run (stdout). On a GPU each step waits for the GPU at the end
    /// of backward and of the reduction, so the times are the GPU's.
    #[arg(long)]
    profile: bool,
    /// Stop after this many steps in total.
    #[arg(long)]
    max_steps: Option<u64>,
    /// Write per-step records (loss, weight checksum, hook trace) to `PATH.rank<r>`.
    #[arg(long)]
    record: Option<PathBuf>,
    /// libtorch intra-op threads per rank.
    #[arg(long, default_value_t = 1)]
    threads: i32,
    /// Hide the progress bar (it only shows when stderr is a terminal).
    #[arg(long)]
    no_progress: bool,
    /// A log line per step (stderr, master rank).
    #[arg(long)]
    verbose: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Test loss and accuracy of a checkpoint (data parallel under the launcher; the same
    /// result on any number of ranks).
    Evaluate(EvalArgs),
    /// Per-sample predicted class and probability for the test split, as CSV (master rank).
    Predict {
        #[command(flatten)]
        eval: EvalArgs,
        /// CSV to write: index,label,predicted,probability.
        #[arg(long)]
        output: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
struct EvalArgs {
    /// A --checkpoint-dir (its best checkpoint, else its latest) or one epoch-NNNN directory.
    #[arg(long)]
    checkpoint: PathBuf,
    /// Use the directory's latest checkpoint instead of the best.
    #[arg(long)]
    latest: bool,
    /// Default: the dataset the checkpoint was trained on.
    #[arg(long, value_enum)]
    dataset: Option<DatasetKind>,
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Only the first N test samples.
    #[arg(long)]
    test_subset: Option<usize>,
    /// Samples per rank per forward pass.
    #[arg(long, default_value_t = 1000)]
    batch_size: usize,
    /// libtorch intra-op threads per rank.
    #[arg(long, default_value_t = 1)]
    threads: i32,
    /// Accepted as in training (evaluation shows no progress bar).
    #[arg(long, hide = true)]
    no_progress: bool,
}

fn set_threads(threads: i32) -> trainer::Result<()> {
    if threads < 1 {
        return Err(trainer::Error::Config(
            "--threads must be at least 1".into(),
        ));
    }
    tch::set_num_threads(threads);
    Ok(())
}

/// `evaluate` and `predict`.
fn run_inference(args: &EvalArgs, output: Option<&PathBuf>) -> trainer::Result<()> {
    set_threads(args.threads)?;
    let comm = Comm::init()?;
    let which = if args.latest {
        Which::Latest
    } else {
        Which::Best
    };
    let restored = trainer::restore::restore(&comm, &args.checkpoint, which)?;
    let test = trainer::restore::test_split(
        &restored.manifest,
        args.dataset,
        args.data_dir.as_deref(),
        args.test_subset,
    )?;
    let model = restored.model.as_ref();
    match output {
        None => {
            let m = evaluate(&comm, model, &test, args.batch_size, tch::Device::Cpu)?;
            if comm.is_master() {
                println!(
                    "evaluate {} (epoch {}) on {} rank(s): {} test samples, loss {:.4} \
                     accuracy {:.2}%",
                    restored.dir.display(),
                    restored.manifest.epochs_done,
                    comm.size(),
                    m.samples,
                    m.loss,
                    100.0 * m.accuracy
                );
            }
        }
        Some(path) => {
            let preds = predict(&comm, model, &test, args.batch_size, tch::Device::Cpu)?;
            if comm.is_master() {
                write_predictions(path, &test, &preds)?;
                println!(
                    "predict {}: {} predictions written to {}",
                    restored.dir.display(),
                    preds.len(),
                    path.display()
                );
            }
        }
    }
    comm.barrier()
}

fn run(args: Args) -> trainer::Result<()> {
    match &args.command {
        Some(Command::Evaluate(eval)) => return run_inference(eval, None),
        Some(Command::Predict { eval, output }) => return run_inference(eval, Some(output)),
        None => {}
    }
    set_threads(args.threads)?;
    let fusion_threshold = match args.fusion_threshold {
        Some(t) => t,
        None => FusionThreshold::from_env()?,
    };
    let optimizer = match args.optimizer {
        OptimizerArg::Sgd => OptimizerKind::Sgd {
            momentum: args.momentum,
            weight_decay: args.weight_decay,
        },
        OptimizerArg::Adam => OptimizerKind::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: args.weight_decay,
        },
        OptimizerArg::Adamw => OptimizerKind::AdamW {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: args.weight_decay,
        },
    };
    let dataset = args.dataset.unwrap_or(if args.data_dir.is_some() {
        DatasetKind::Mnist
    } else {
        DatasetKind::Synthetic
    });
    let cfg = TrainConfig {
        model: args.model,
        mlp_hidden: args.hidden,
        batch_size: args.batch_size,
        epochs: args.epochs,
        lr: args.lr,
        optimizer,
        schedule: args.lr_schedule,
        warmup_epochs: args.warmup_epochs,
        min_lr: args.min_lr,
        lr_step_epochs: args.lr_step_epochs,
        lr_gamma: args.lr_gamma,
        plateau_factor: args.plateau_factor,
        plateau_patience: args.plateau_patience,
        scale_lr: args.scale_lr,
        clip_grad_norm: args.clip_grad_norm,
        grad_accum: args.grad_accum,
        dataset,
        data_dir: args.data_dir,
        train_subset: args.train_subset,
        test_subset: args.test_subset,
        samples: args.samples,
        validation_freq: args.validation_freq,
        eval_batch_size: args.eval_batch_size,
        early_stop_patience: args.early_stop_patience,
        min_delta: args.min_delta,
        monitor: args.monitor,
        metrics_csv: args.metrics_csv,
        verbose: args.verbose,
        seed: args.seed,
        checkpoint_dir: args.checkpoint_dir,
        keep_checkpoints: args.keep_checkpoints,
        resume: args.resume,
        ddp: DdpConfig {
            fusion_threshold,
            overlap: !args.no_overlap,
            rebuild_buckets: !args.no_bucket_rebuild,
            grad_dtype: args.grad_dtype,
            device_staging_on_cpu: args.debug_device_staging,
            time_device_work: args.profile,
        },
        device: args.device,
        amp_bf16: matches!(args.amp, Some(AmpArg::Bf16)),
        cudnn_benchmark: args.cudnn_benchmark,
        channels_last: args.channels_last,
        profile: args.profile,
        max_steps: args.max_steps,
        record: args.record,
        progress_bar: !args.no_progress,
    };
    let comm = Comm::init()?;
    let summary = train(&comm, &cfg)?;
    if comm.is_master() {
        println!(
            "done: {} steps on {} rank(s), last loss {:.4}, accuracy {:.2}%",
            summary.steps,
            comm.size(),
            summary.last_loss,
            100.0 * summary.last_accuracy
        );
        if let Some(m) = summary.last_validation() {
            println!(
                "test (epoch {}): {} samples, loss {:.4} accuracy {:.2}%",
                m.epoch,
                m.val_samples.unwrap_or(0),
                m.val_loss.unwrap_or(f64::NAN),
                100.0 * m.val_accuracy.unwrap_or(f64::NAN)
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // tnt_env::LOG: set per rank by the launcher from --log-level (warn by default
            // there and here), or by hand.
            tracing_subscriber::EnvFilter::try_from_env(tnt_env::LOG)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(gaspi::log::DEFAULT_LEVEL)),
        )
        // Log lines print above the progress bar instead of through it.
        .with_writer(trainer::progress::stderr_log_writer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("train: error: {e}");
            ExitCode::FAILURE
        }
    }
}
