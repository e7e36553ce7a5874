//! What a training run is asked to do ([`TrainConfig`], filled by the `train` binary from its
//! command line) and the settings `train` derives from it before the first step.

use std::path::PathBuf;

use crate::data::DatasetKind;
use crate::ddp::DdpConfig;
use crate::device::DeviceArg;
use crate::error::{Error, Result};
use crate::metrics::Monitor;
use crate::models::ModelKind;
use crate::optim::OptimizerKind;
use crate::schedule::{ScheduleConfig, ScheduleKind};

/// Reference batch size of the linear LR scaling rule (Goyal et al.): `lr * B / 256`.
pub const LR_SCALING_REFERENCE_BATCH: usize = 256;

/// Everything a training run needs; the `train` binary fills it from its command line.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// The model to build and train.
    pub model: ModelKind,
    /// Hidden layer sizes of the MLP.
    pub mlp_hidden: Vec<i64>,
    /// Global batch size (over all ranks) of one forward/backward micro-step.
    pub batch_size: usize,
    /// Epochs to train (in total, counting those of a resumed run).
    pub epochs: u64,
    /// Peak learning rate, before linear scaling (`scale_lr`).
    pub lr: f64,
    /// The update rule and its hyper-parameters.
    pub optimizer: OptimizerKind,
    /// The learning-rate schedule after the warmup.
    pub schedule: ScheduleKind,
    /// Linear LR warmup from ~0 to the full rate over this many epochs.
    pub warmup_epochs: u64,
    /// Cosine's final rate and reduce-on-plateau's floor.
    pub min_lr: f64,
    /// Step decay: times `lr_gamma` every `lr_step_epochs` epochs.
    pub lr_step_epochs: u64,
    /// Step decay's factor.
    pub lr_gamma: f64,
    /// Reduce-on-plateau: times `plateau_factor` after `plateau_patience` bad epochs.
    pub plateau_factor: f64,
    /// Reduce-on-plateau: epochs without improvement before the rate is reduced.
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
    /// Validate on only the first N test samples; `None`: all.
    pub test_subset: Option<usize>,
    /// Size of the synthetic dataset.
    pub samples: usize,
    /// Seed of the initial weights, the synthetic data and the shuffling.
    pub seed: u64,
    /// Validate every N epochs (and after the last); `None`: every epoch when there is a test
    /// split; 0: never.
    pub validation_freq: Option<u64>,
    /// Samples per rank per forward pass during validation.
    pub eval_batch_size: usize,
    /// Early stopping after this many validated epochs without improvement of `monitor`.
    pub early_stop_patience: Option<u64>,
    /// Early stopping: an improvement smaller than this does not count.
    pub min_delta: f64,
    /// The metric early stopping, reduce-on-plateau and the best checkpoint follow.
    pub monitor: Monitor,
    /// Where the master writes a checkpoint after every epoch; `None`: no checkpoints.
    pub checkpoint_dir: Option<PathBuf>,
    /// Keep this many latest checkpoints (plus the best by `monitor`).
    pub keep_checkpoints: usize,
    /// Continue from the checkpoint in `checkpoint_dir`.
    pub resume: bool,
    /// Gradient fusion and overlap of the data-parallel wrapper.
    pub ddp: DdpConfig,
    /// `--device`: where the model, its gradients and the batches live.
    pub device: DeviceArg,
    /// Mixed precision: forward and loss under autocast to bf16 (weights stay f32).
    pub amp_bf16: bool,
    /// cuDNN times the candidate algorithms of each convolution shape on its first use and
    /// keeps the fastest (`torch.backends.cudnn.benchmark`; TensorFlow, under Keras, does
    /// this by default). On a GPU only; the first steps are slower.
    pub cudnn_benchmark: bool,
    /// Convolution weights and image batches in channels-last layout
    /// ([`memory_format`](crate::memory_format)), as cuDNN's tensor cores want them.
    pub channels_last: bool,
    /// Time every step and print medians (compute, exposed communication, optimizer).
    pub profile: bool,
    /// Stop after this many optimizer steps in total (for tests and benchmarks).
    pub max_steps: Option<u64>,
    /// Per-rank step records (`<path>.rank<r>`): loss, accuracy, weight checksum, hook trace.
    pub record: Option<PathBuf>,
    /// One CSV row per epoch, written by the master.
    pub metrics_csv: Option<PathBuf>,
    /// Show the master's progress bar (when stderr is a terminal).
    pub progress_bar: bool,
    /// A log line per step.
    pub verbose: bool,
}

impl TrainConfig {
    /// The LR schedule of a run with `steps_per_epoch` optimizer steps per epoch, after the
    /// linear scaling rule when `scale_lr` is set.
    pub(super) fn schedule_config(&self, steps_per_epoch: u64) -> ScheduleConfig {
        let mut base_lr = self.lr;
        if self.scale_lr {
            base_lr *=
                (self.batch_size * self.grad_accum) as f64 / LR_SCALING_REFERENCE_BATCH as f64;
        }
        ScheduleConfig {
            kind: self.schedule,
            base_lr,
            warmup_steps: self.warmup_epochs * steps_per_epoch,
            total_steps: self.epochs * steps_per_epoch,
            steps_per_epoch,
            min_lr: self.min_lr,
            step_epochs: self.lr_step_epochs,
            gamma: self.lr_gamma,
            plateau_factor: self.plateau_factor,
            plateau_patience: self.plateau_patience,
        }
    }

    /// Checks that one optimizer step's samples (`batch_size * grad_accum`) fit in a training
    /// set of `train_len` samples.
    pub(super) fn check_batch_size(&self, train_len: usize) -> Result<()> {
        if self.batch_size == 0 || self.batch_size * self.grad_accum > train_len {
            return Err(Error::Config(format!(
                "global batch size {} (times --grad-accum {}) must be in 1..={train_len} (the \
                 training set size)",
                self.batch_size, self.grad_accum
            )));
        }
        Ok(())
    }

    /// `validation_freq` as the run applies it, given whether it has a test split: every how
    /// many epochs it validates (`None`: never); an error when early stopping would have
    /// nothing to monitor.
    pub(super) fn resolved_validation_freq(&self, has_test_split: bool) -> Result<Option<u64>> {
        let every = match (self.validation_freq, has_test_split) {
            (Some(0), _) | (_, false) => None,
            (Some(n), true) => Some(n),
            (None, true) => Some(1),
        };
        if self.early_stop_patience.is_some() && every.is_none() {
            return Err(Error::Config(
                "early stopping monitors validation metrics: it needs a test split (--dataset \
                 mnist or fashion-mnist) and --validation-freq >= 1"
                    .into(),
            ));
        }
        Ok(every)
    }
}
