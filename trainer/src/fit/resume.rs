//! `--resume`: continuing a run from the latest checkpoint in `--checkpoint-dir`: its weights,
//! optimizer state, LR schedule state, metrics history and position; or, when that run had
//! already finished, nothing to train.

use std::path::Path;

use tch::nn;

use super::config::TrainConfig;
use super::summary::TrainSummary;
use crate::callbacks::{EarlyStopping, EarlyStoppingState};
use crate::checkpoint::{self, model_spec, Which};
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::manifest::{Manifest, MANIFEST};
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

/// What a resumed run takes up from its checkpoint.
pub(super) struct State<'a> {
    pub vs: &'a nn::VarStore,
    pub opt: &'a mut Optimizer,
    pub schedule: &'a mut Schedule,
    /// This run's early stopping, when it has one.
    pub early_stop: Option<&'a mut EarlyStopping>,
    pub summary: &'a mut TrainSummary,
}

/// Collective: loads the latest checkpoint of `cfg.checkpoint_dir` into the weights, the
/// optimizer, the schedule and early stopping (its best epoch's weights from that epoch's
/// checkpoint) and its history into the summary, after checking it belongs to this model,
/// optimizer and run. A finished run's final metrics are printed (master) instead.
pub(super) fn resume(comm: &Comm, cfg: &TrainConfig, state: State<'_>) -> Result<Resumed> {
    let State {
        vs,
        opt,
        schedule,
        early_stop,
        summary,
    } = state;
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
    check_same_run(&dir, &manifest, cfg)?;
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
    // Early stopping's best weights are those of its best epoch's checkpoint: loaded first
    // when that is an earlier one, then the latest checkpoint over them.
    let mut best_is_latest = None;
    if let Some((es, state)) = early_stop.zip(manifest.early_stopping) {
        if state.best_epoch == manifest.epochs_done {
            best_is_latest = Some((es, state));
        } else {
            let best = root.join(checkpoint::epoch_name(state.best_epoch));
            let (best, best_manifest) = checkpoint::read_manifest(comm, &best, Which::Latest)?;
            checkpoint::load_tensors(comm, &best, &best_manifest, vs, None)?;
            take_up(comm, es, state, vs);
        }
    }
    checkpoint::load_tensors(comm, &dir, &manifest, vs, Some(opt))?;
    if let Some((es, state)) = best_is_latest {
        take_up(comm, es, state, vs);
    }
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

/// Early stopping takes up the checkpoint's `state`, `vs` holding its best weights.
fn take_up(comm: &Comm, es: &mut EarlyStopping, state: EarlyStoppingState, vs: &nn::VarStore) {
    if !es.resume(state, vs) && comm.is_master() {
        println!(
            "early stopping watched {} until the checkpoint and watches {} now: it starts \
             afresh",
            state.monitor.name(),
            es.monitor.name()
        );
    }
}

/// The settings that fix which samples each step sees (the dataset, the shuffling seed, the
/// global batch and the accumulation) must be those of the checkpoint's run: with others,
/// its step count would point at another place of the LR schedule and of the data.
fn check_same_run(dir: &Path, manifest: &Manifest, cfg: &TrainConfig) -> Result<()> {
    let differs = [
        (
            "--dataset",
            format!("{:?}", manifest.dataset),
            format!("{:?}", cfg.dataset),
        ),
        ("--seed", manifest.seed.to_string(), cfg.seed.to_string()),
        (
            "--batch-size",
            manifest.batch_size.to_string(),
            cfg.batch_size.to_string(),
        ),
        (
            "--grad-accum",
            manifest.grad_accum.to_string(),
            cfg.grad_accum.to_string(),
        ),
    ]
    .into_iter()
    .find(|(_, then, now)| then != now);
    match differs {
        None => Ok(()),
        Some((flag, then, now)) => Err(Error::checkpoint(
            &dir.join(MANIFEST),
            format!(
                "the checkpoint's run used {flag} {then}, this one asks for {now}: a resumed \
                 run keeps the dataset, seed, batch size and gradient accumulation of the run \
                 it continues"
            ),
        )),
    }
}
