//! Checkpoints: the master rank writes weights, optimizer state and progress; on resume the
//! master reads them and broadcasts everything, so other ranks need no access to the files.

use std::path::{Path, PathBuf};

use tch::{nn, Tensor};

use crate::comm::Comm;
use crate::ddp::{broadcast_tensors, broadcast_variables};
use crate::error::{Error, Result};
use crate::optim::Optimizer;

const WEIGHTS: &str = "weights.ot";
const OPTIMIZER: &str = "optimizer.ot";
const META: &str = "meta.txt";

/// Where training stands when a checkpoint is written (after a whole epoch).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    /// Epochs completed.
    pub epochs_done: u64,
    /// Optimizer steps completed.
    pub global_step: u64,
    /// Training loss and accuracy of the last completed epoch (0 in checkpoints written
    /// before they were recorded).
    pub loss: f64,
    pub accuracy: f64,
}

/// Collective: fails on every rank, before any training, when the master cannot write
/// checkpoints into `dir` (created if missing), so a run does not learn this after its first
/// epoch.
pub fn check_writable(comm: &Comm, dir: &Path) -> Result<()> {
    let mut ok = [0f64];
    let mut master_error = None;
    if comm.is_master() {
        let probe = dir.join(".tnt-write-probe");
        let attempt = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&probe, b"probe"))
            .and_then(|()| std::fs::remove_file(&probe));
        match attempt {
            Ok(()) => ok[0] = 1.0,
            Err(e) => {
                master_error = Some(ckpt_err(dir, format!("cannot write checkpoints here: {e}")))
            }
        }
    }
    comm.sum_f64(&mut ok)?;
    match master_error {
        Some(e) => Err(e),
        None if ok[0] != 1.0 => Err(ckpt_err(
            dir,
            "the master rank cannot write checkpoints here",
        )),
        None => Ok(()),
    }
}

fn ckpt_err(path: &Path, message: impl Into<String>) -> Error {
    Error::Checkpoint {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The weights file inside a checkpoint directory (for tools and tests).
pub fn weights_path(dir: &Path) -> PathBuf {
    dir.join(WEIGHTS)
}

/// Writes a checkpoint into `dir` (master rank only; other ranks return at once). Files are
/// written under temporary names and renamed, so a crash leaves the previous checkpoint.
pub fn save(
    comm: &Comm,
    dir: &Path,
    vs: &nn::VarStore,
    optimizer: &Optimizer,
    progress: Progress,
) -> Result<()> {
    if !comm.is_master() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let tmp = |name: &str| dir.join(format!(".{name}.tmp"));
    vs.save(tmp(WEIGHTS))?;
    let state = optimizer.state_tensors();
    if !state.is_empty() {
        Tensor::save_multi(&state, tmp(OPTIMIZER))?;
    }
    let meta = format!(
        "epochs_done={}\nglobal_step={}\noptimizer_steps={}\nloss={:e}\naccuracy={:e}\n",
        progress.epochs_done,
        progress.global_step,
        optimizer.steps(),
        progress.loss,
        progress.accuracy
    );
    std::fs::write(tmp(META), meta).map_err(|e| Error::io(tmp(META), e))?;
    let mut names = vec![WEIGHTS, META];
    if !state.is_empty() {
        names.push(OPTIMIZER);
    }
    for name in names {
        std::fs::rename(tmp(name), dir.join(name)).map_err(|e| Error::io(dir.join(name), e))?;
    }
    tracing::info!(dir = %dir.display(), epochs_done = progress.epochs_done, "checkpoint written");
    Ok(())
}

/// Collective: the master reads the checkpoint in `dir` into `vs` and `optimizer`, then every
/// rank receives it. Errors on every rank when the master has no readable checkpoint.
pub fn load(
    comm: &Comm,
    dir: &Path,
    vs: &mut nn::VarStore,
    optimizer: &mut Optimizer,
) -> Result<Progress> {
    // [ok, epochs_done, global_step, optimizer_steps, loss, accuracy], from the master.
    let mut header = [0f64; 6];
    let mut master_error = None;
    if comm.is_master() {
        match read_master(dir, vs, optimizer) {
            Ok((p, opt_steps)) => {
                header = [
                    1.0,
                    p.epochs_done as f64,
                    p.global_step as f64,
                    opt_steps as f64,
                    p.loss,
                    p.accuracy,
                ];
            }
            Err(e) => master_error = Some(e),
        }
    }
    comm.sum_f64(&mut header)?;
    if let Some(e) = master_error {
        return Err(e);
    }
    if header[0] != 1.0 {
        return Err(ckpt_err(
            dir,
            "the master rank could not read the checkpoint",
        ));
    }
    broadcast_variables(comm, vs)?;
    let state: Vec<Tensor> = optimizer
        .state_tensors()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    broadcast_tensors(comm, &state)?;
    optimizer.set_steps(header[3] as u64);
    Ok(Progress {
        epochs_done: header[1] as u64,
        global_step: header[2] as u64,
        loss: header[4],
        accuracy: header[5],
    })
}

fn read_master(
    dir: &Path,
    vs: &mut nn::VarStore,
    optimizer: &mut Optimizer,
) -> Result<(Progress, u64)> {
    let meta_path = dir.join(META);
    let text = std::fs::read_to_string(&meta_path).map_err(|e| Error::io(&meta_path, e))?;
    let field = |key: &str| -> Result<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .ok_or_else(|| ckpt_err(&meta_path, format!("no {key}")))?
            .trim()
            .parse()
            .map_err(|e| ckpt_err(&meta_path, format!("{key}: {e}")))
    };
    // Recorded since the metrics were added; absent in older checkpoints.
    let metric = |key: &str| -> Result<f64> {
        match text
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        {
            None => Ok(0.0),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|e| ckpt_err(&meta_path, format!("{key}: {e}"))),
        }
    };
    let progress = Progress {
        epochs_done: field("epochs_done")?,
        global_step: field("global_step")?,
        loss: metric("loss")?,
        accuracy: metric("accuracy")?,
    };
    let opt_steps = field("optimizer_steps")?;
    vs.load(dir.join(WEIGHTS))
        .map_err(|e| ckpt_err(&dir.join(WEIGHTS), e.to_string()))?;
    let opt_path = dir.join(OPTIMIZER);
    let saved = if opt_path.exists() {
        Tensor::load_multi(&opt_path).map_err(|e| ckpt_err(&opt_path, e.to_string()))?
    } else {
        Vec::new()
    };
    optimizer.load_state(&saved, opt_steps)?;
    Ok((progress, opt_steps))
}
