//! `train`: data-parallel training of an example model. Run it under the launcher,
//! `tarantella -n 2 -- train --model lenet5`, or plainly for one rank.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use fusion::FusionThreshold;
use trainer::data::DatasetKind;
use trainer::fit::{train, TrainConfig};
use trainer::models::ModelKind;
use trainer::schedule::Schedule;
use trainer::{Comm, DdpConfig, OptimizerKind};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ScheduleArg {
    Constant,
    Cosine,
    Step,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OptimizerArg {
    Sgd,
    Adam,
}

/// Data-parallel training over GASPI (global-batch semantics: results do not depend on the
/// number of ranks).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
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
    /// Linear learning-rate warmup over this many epochs.
    #[arg(long, default_value_t = 0)]
    warmup_epochs: u64,
    /// The learning rate after warmup: constant, cosine decay to 0 over the run, or step
    /// decay (--lr-step-epochs, --lr-gamma).
    #[arg(long, value_enum, default_value = "constant")]
    lr_schedule: ScheduleArg,
    /// Step decay: multiply the rate by --lr-gamma every this many epochs.
    #[arg(long, default_value_t = 10)]
    lr_step_epochs: u64,
    /// Step decay factor.
    #[arg(long, default_value_t = 0.1)]
    lr_gamma: f64,
    /// Linear LR scaling: multiply --lr by batch-size / 256.
    #[arg(long)]
    scale_lr: bool,
    /// What to learn: MNIST-shaped synthetic data (no files), MNIST or Fashion-MNIST.
    #[arg(long, value_enum, default_value = "synthetic")]
    dataset: DatasetKind,
    /// Directory with the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
    /// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte; plain or .gz). Fashion-MNIST
    /// defaults to /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Train on the first N samples of the training split only (quick runs).
    #[arg(long, value_name = "N")]
    train_subset: Option<usize>,
    /// Evaluate on the test split every N epochs (default 1 when the dataset has one;
    /// 0 never), data-parallel over the ranks.
    #[arg(long, value_name = "N")]
    validation_freq: Option<u64>,
    /// The master writes one row per epoch here (epoch, lr, loss, accuracy, val_loss,
    /// val_accuracy, seconds, samples/s), flushed each epoch.
    #[arg(long, value_name = "PATH")]
    metrics_csv: Option<PathBuf>,
    /// Per-step progress lines also when stderr is not a terminal.
    #[arg(long)]
    verbose: bool,
    /// Size of the synthetic dataset.
    #[arg(long, default_value_t = 4096)]
    samples: usize,
    /// Seed for initial weights, synthetic data and shuffling.
    #[arg(long, default_value_t = trainer::shard::DEFAULT_SEED)]
    seed: u64,
    /// MLP hidden layer sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "512,256")]
    hidden: Vec<i64>,
    /// The master rank writes a checkpoint here after every epoch.
    #[arg(long)]
    checkpoint_dir: Option<PathBuf>,
    /// Continue from the checkpoint in --checkpoint-dir (read by rank 0, broadcast).
    #[arg(long, requires = "checkpoint_dir")]
    resume: bool,
    /// Fusion threshold in KiB; default: the launcher's TNT_FUSION_THRESHOLD_KB, else 32.
    #[arg(long)]
    fusion_threshold: Option<FusionThreshold>,
    /// Allreduce all gradients after backward instead of overlapping (for comparison).
    #[arg(long)]
    no_overlap: bool,
    /// Keep the buckets in reverse registration order (no rebuild after the first step).
    #[arg(long)]
    no_bucket_rebuild: bool,
    /// Per-step timings on the master rank (compute, exposed communication, optimizer; logged
    /// to stderr) and their medians at the end (stdout).
    #[arg(long)]
    profile: bool,
    /// Stop after this many steps in total.
    #[arg(long)]
    max_steps: Option<u64>,
    /// Write per-step records (loss, weight checksum, hook trace) to <PATH>.rank<r>.
    #[arg(long)]
    record: Option<PathBuf>,
    /// libtorch intra-op threads per rank.
    #[arg(long, default_value_t = 1)]
    threads: i32,
    /// Hide the progress bar.
    #[arg(long)]
    no_progress: bool,
}

fn run(args: Args) -> trainer::Result<()> {
    if args.threads < 1 {
        return Err(trainer::Error::Config(
            "--threads must be at least 1".into(),
        ));
    }
    tch::set_num_threads(args.threads);
    let fusion_threshold = match args.fusion_threshold {
        Some(t) => t,
        None => FusionThreshold::from_env()?,
    };
    let optimizer = match args.optimizer {
        OptimizerArg::Sgd => OptimizerKind::Sgd {
            momentum: args.momentum,
            weight_decay: 0.0,
        },
        OptimizerArg::Adam => OptimizerKind::ADAM,
    };
    let cfg = TrainConfig {
        model: args.model,
        mlp_hidden: args.hidden,
        batch_size: args.batch_size,
        epochs: args.epochs,
        lr: args.lr,
        optimizer,
        warmup_epochs: args.warmup_epochs,
        schedule: match args.lr_schedule {
            ScheduleArg::Constant => Schedule::Constant,
            ScheduleArg::Cosine => Schedule::Cosine,
            ScheduleArg::Step => {
                if args.lr_step_epochs == 0 || args.lr_gamma.is_nan() || args.lr_gamma <= 0.0 {
                    return Err(trainer::Error::Config(
                        "--lr-schedule step needs --lr-step-epochs >= 1 and --lr-gamma > 0".into(),
                    ));
                }
                Schedule::Step {
                    every: args.lr_step_epochs,
                    gamma: args.lr_gamma,
                }
            }
        },
        scale_lr: args.scale_lr,
        dataset: args.dataset,
        train_subset: args.train_subset,
        data_dir: args.data_dir,
        validation_freq: args.validation_freq,
        metrics_csv: args.metrics_csv,
        verbose: args.verbose,
        samples: args.samples,
        seed: args.seed,
        checkpoint_dir: args.checkpoint_dir,
        resume: args.resume,
        ddp: DdpConfig {
            fusion_threshold,
            overlap: !args.no_overlap,
            rebuild_buckets: !args.no_bucket_rebuild,
        },
        profile: args.profile,
        max_steps: args.max_steps,
        record: args.record,
        progress_bar: !args.no_progress,
    };
    let comm = Comm::init()?;
    let summary = train(&comm, &cfg)?;
    if comm.is_master() {
        print!(
            "done: {} steps on {} rank(s), last loss {:.4}, accuracy {:.2}%",
            summary.steps,
            comm.size(),
            summary.last_loss,
            100.0 * summary.last_accuracy
        );
        match summary.validation {
            Some(v) => println!(
                "; test loss {:.4}, test accuracy {:.2}% ({} samples)",
                v.loss,
                100.0 * v.accuracy,
                v.samples
            ),
            None => println!(),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TNT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
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
