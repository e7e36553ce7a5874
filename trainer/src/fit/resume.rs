//! `--resume`: continuing a run from the latest checkpoint in `--checkpoint-dir`: its weights,
//! optimizer state, LR schedule state, metrics history and position; or, when that run had
//! already finished, nothing to train.

use tch::nn;

use super::config::TrainConfig;
use super::summary::TrainSummary;
use crate::checkpoint::{self, model_spec, Which};
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::metrics::EpochLine;
use crate::optim::Optimizer;
use crate::schedule::Schedule;

/// Where a resumed run goes on from.
pub(super) enum Resumed {
    /// The checkpointed run had finished (all epochs, or early stopping): nothing to train.
    Finished,
    /// Train on from here.
    At {
        /// Epochs the checkpoint completed.
        epochs_done: u64,
        /// Optimizer steps taken so far.
        step: u64,
    },
}

/// Collective: loads the latest checkpoint of `cfg.checkpoint_dir` into `vs`, `opt` and
/// `schedule` and its history into `summary`, after checking it belongs to this model and
/// optimizer. A finished run's final metrics are printed (master) instead.
pub(super) fn resume(
    comm: &Comm,
    cfg: &TrainConfig,
    vs: &nn::VarStore,
    opt: &mut Optimizer,
    schedule: &mut Schedule,
    summary: &mut TrainSummary,
) -> Result<Resumed> {
    let root = cfg
        .checkpoint_dir
        .as_ref()
        .ok_or_else(|| Error::Config("--resume needs --checkpoint-dir".to_owned()))?;
    let (dir, manifest) = checkpoint::read_manifest(comm, root, Which::Latest)?;
    manifest.check_compatible(
        &dir,
        &model_spec(cfg.model, &cfg.mlp_hidden, vs),
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
        if comm.is_master() {
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
        return Ok(Resumed::Finished);
    }
    checkpoint::load_tensors(comm, &dir, &manifest, vs, Some(opt))?;
    schedule.plateau = manifest.plateau;
    tracing::info!(
        epochs_done = manifest.epochs_done,
        step = manifest.global_step,
        "resumed from {}",
        dir.display()
    );
    Ok(Resumed::At {
        epochs_done: manifest.epochs_done,
        step: manifest.global_step,
    })
}
