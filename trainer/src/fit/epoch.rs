//! The end of an epoch, in the order `train` takes the steps: validation on the test split,
//! the epoch's report (the master's line, with `--profile` its step timings),
//! reduce-on-plateau, early stopping and the checkpoint. Every decision uses metrics
//! aggregated over the ranks, so all ranks take the same one.

use tch::nn::{self, ModuleT};
use tch::Device;

use super::config::TrainConfig;
use super::summary::TrainSummary;
use crate::callbacks::EarlyStopping;
use crate::checkpoint::{self, model_spec};
use crate::comm::Comm;
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::evaluate::{evaluate, EvalMetrics};
use crate::manifest::{Manifest, FORMAT};
use crate::metrics::{EpochLine, EpochMetrics, Monitor};
use crate::optim::Optimizer;
use crate::profile::{ProfileSummary, StepTimes};
use crate::schedule::Schedule;

/// How far a run got when its checkpoint is written.
pub(super) struct Position {
    /// Epochs completed.
    pub epochs_done: u64,
    /// Optimizer steps taken.
    pub step: u64,
    /// The run ends here (all epochs done, or early stopping).
    pub finished: bool,
}

/// What the end of an epoch works with: the run's settings and its model.
pub(super) struct EpochEnd<'a> {
    /// The job.
    pub(super) comm: &'a Comm,
    /// The run's settings.
    pub(super) cfg: &'a TrainConfig,
    /// The model's variables (checkpointed; early stopping restores them).
    pub(super) vs: &'a nn::VarStore,
    /// The model (validated).
    pub(super) model: &'a dyn ModuleT,
    /// Where the model lives.
    pub(super) device: Device,
}

impl EpochEnd<'_> {
    /// Collective: the model's loss and accuracy on `test`; an error when the loss is not
    /// finite (the last good checkpoint stays).
    pub(super) fn validate(&self, test: &Dataset, step: u64) -> Result<EvalMetrics> {
        let cfg = self.cfg;
        let val = evaluate(
            self.comm,
            self.model,
            test,
            cfg.eval_batch_size,
            self.device,
        )?;
        if !val.loss.is_finite() {
            return Err(Error::Step {
                step,
                message: format!(
                    "the validation loss is not finite ({}); the last good checkpoint stays",
                    val.loss
                ),
            });
        }
        Ok(val)
    }

    /// The master prints the epoch's line and, with `--profile`, the medians of its steps'
    /// `times`.
    pub(super) fn report(&self, metrics: &EpochMetrics, times: &[StepTimes]) {
        if !self.comm.is_master() {
            return;
        }
        let epochs = self.cfg.epochs;
        println!("{}", EpochLine { metrics, epochs });
        if self.cfg.profile {
            if let Some(p) = ProfileSummary::from_steps(times, 2) {
                println!("  {p}");
            }
        }
    }

    /// Reduce-on-plateau looks at the monitored metric, or the training loss in epochs that
    /// were not validated.
    pub(super) fn update_plateau(&self, schedule: &mut Schedule, metrics: &EpochMetrics) {
        let monitor = self.cfg.monitor;
        let plateau_metric = monitor.value(metrics).unwrap_or(metrics.loss);
        let watched = if metrics.val_loss.is_some() {
            monitor
        } else {
            Monitor::ValLoss
        };
        if let Some(lr) = schedule.end_epoch(watched, plateau_metric) {
            if self.comm.is_master() {
                println!("  reduce-on-plateau: learning rate now {lr:.3e}");
            }
        }
    }

    /// Early stopping after the epoch of `metrics`: true when the run stops here, with the
    /// best epoch's weights restored and `summary.early_stopped` set.
    pub(super) fn early_stop(
        &self,
        es: &mut EarlyStopping,
        metrics: &EpochMetrics,
        summary: &mut TrainSummary,
    ) -> Result<bool> {
        if !es.end_epoch(metrics, self.vs)? {
            return Ok(false);
        }
        es.restore_best(self.vs)?;
        let (best, best_epoch) = es.best().unwrap_or((f64::NAN, 0));
        summary.early_stopped = Some((metrics.epoch, best_epoch));
        if self.comm.is_master() {
            println!(
                "early stopping after epoch {}: {} did not improve for {} validated epochs; \
                 restored the weights of epoch {best_epoch} ({} {best:.4})",
                metrics.epoch,
                es.monitor.name(),
                es.patience,
                es.monitor.name()
            );
        }
        Ok(true)
    }

    /// With `--checkpoint-dir`, the master writes the checkpoint of the run at `at`.
    pub(super) fn checkpoint(
        &self,
        at: Position,
        opt: &Optimizer,
        schedule: &Schedule,
        early_stop: Option<&EarlyStopping>,
        summary: &TrainSummary,
    ) -> Result<()> {
        let Position {
            epochs_done,
            step,
            finished,
        } = at;
        let cfg = self.cfg;
        let Some(root) = &cfg.checkpoint_dir else {
            return Ok(());
        };
        let manifest = Manifest {
            format: FORMAT,
            model: model_spec(cfg.model, &cfg.mlp_hidden, self.vs),
            optimizer: cfg.optimizer,
            schedule: schedule.config,
            plateau: schedule.plateau,
            dataset: cfg.dataset,
            data_dir: cfg.data_dir.clone(),
            seed: cfg.seed,
            batch_size: cfg.batch_size,
            grad_accum: cfg.grad_accum,
            epochs: cfg.epochs,
            epochs_done,
            global_step: step,
            optimizer_steps: opt.steps(),
            finished,
            early_stopped: summary.early_stopped,
            early_stopping: early_stop.and_then(EarlyStopping::state),
            metrics: summary.history.clone(),
            files: Default::default(),
        };
        checkpoint::save(
            self.comm,
            root,
            cfg.keep_checkpoints,
            cfg.monitor,
            self.vs,
            opt,
            manifest,
        )
    }
}
