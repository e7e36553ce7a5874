//! Checkpoints that cannot lie. The master rank writes, after an epoch, a directory
//! `epoch-NNNN/` inside `--checkpoint-dir` with the weights and the optimizer state in
//! safetensors and a JSON [`Manifest`] (model, optimizer, progress, metrics, SHA-256 of each
//! file). The directory is staged under a temporary name, every file fsynced, then renamed;
//! `checkpoints.json` (which one is the latest and which the best by the monitored metric) is
//! replaced atomically after it. A crash at any point leaves the previous checkpoint intact and
//! resumable. The last K checkpoints and the best one are kept.
//!
//! Loading verifies the hashes and that the checkpoint belongs to this model and optimizer; the
//! master reads the files and broadcasts everything, so other ranks need no access to them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::{nn, Tensor};

use crate::comm::Comm;
use crate::ddp::{broadcast_tensors, broadcast_variables};
use crate::error::{Error, Result};
use crate::manifest::{fsync_dir, fsync_file, sha256_file, write_atomic, Manifest, ModelSpec};
use crate::metrics::Monitor;
use crate::models::ModelKind;
use crate::optim::Optimizer;

/// The file of a checkpoint directory that holds the model's variables, by name.
pub const WEIGHTS: &str = "weights.safetensors";
/// The file of a checkpoint directory that holds the optimizer's state tensors.
pub const OPTIMIZER: &str = "optimizer.safetensors";
/// The index of a checkpoint directory.
pub const INDEX: &str = "checkpoints.json";
/// Set (to anything) to abort the process after a checkpoint is staged and before it is
/// renamed into place: the crash test's fault injection.
pub const CRASH_BEFORE_RENAME_ENV: &str = "TNT_CHECKPOINT_CRASH_BEFORE_RENAME";

/// Which checkpoint of a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The last one written.
    Latest,
    /// The best by the monitored metric; the latest when none was ranked.
    Best,
}

/// `checkpoints.json`: which checkpoint of a directory is the latest and which the best.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Index {
    /// The latest checkpoint's directory name (`epoch-NNNN`).
    pub latest: Option<String>,
    /// The best checkpoint by the monitored metric, once one was validated.
    pub best: Option<Best>,
}

/// The best checkpoint of a directory and why it is the best.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Best {
    /// Its directory name (`epoch-NNNN`).
    pub name: String,
    /// The metric it is best by.
    pub monitor: Monitor,
    /// Its value of that metric.
    pub value: f64,
}

impl Index {
    /// Reads `dir`'s index: `None` when there is none, an error when it is corrupt.
    pub fn read(dir: &Path) -> Result<Option<Index>> {
        let path = dir.join(INDEX);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::checkpoint(&path, format!("the index is corrupt: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path, e)),
        }
    }
}

/// The model's description for a manifest: kind, shape settings, every variable's shape.
pub fn model_spec(kind: ModelKind, mlp_hidden: &[i64], vs: &nn::VarStore) -> ModelSpec {
    ModelSpec {
        kind,
        mlp_hidden: if kind == ModelKind::Mlp {
            mlp_hidden.to_vec()
        } else {
            Vec::new()
        },
        variables: vs
            .variables()
            .into_iter()
            .map(|(name, t)| (name, t.size()))
            .collect(),
    }
}

/// The checkpoint directory `path` names: itself when it holds a manifest, else the latest
/// (or best) one listed in its index.
pub fn resolve(path: &Path, which: Which) -> Result<PathBuf> {
    if path.join(crate::manifest::MANIFEST).is_file() {
        return Ok(path.to_path_buf());
    }
    let index = Index::read(path)?.ok_or_else(|| {
        Error::checkpoint(
            path,
            format!("no checkpoint here (neither {INDEX} nor a manifest)"),
        )
    })?;
    let name = match (which, &index.best, &index.latest) {
        (Which::Best, Some(best), _) => &best.name,
        (_, _, Some(latest)) => latest,
        _ => {
            return Err(Error::checkpoint(
                &path.join(INDEX),
                "the index lists no checkpoint",
            ))
        }
    };
    Ok(path.join(name))
}

/// Collective: fails on every rank unless the master can create files in `dir` (created when
/// missing), and, for a new run (not `resume`), unless `dir` holds no checkpoints yet: a new
/// run would replace them epoch by epoch. Run before the first step, so a bad path fails at
/// once.
pub fn check_writable(comm: &Comm, dir: &Path, resume: bool) -> Result<()> {
    let mut result = Ok(());
    if comm.is_master() {
        result = (|| {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            if !resume {
                refuse_earlier_run(dir)?;
            }
            let probe = dir.join(format!(".write-test-{}", std::process::id()));
            std::fs::write(&probe, b"ok").map_err(|e| {
                Error::checkpoint(
                    dir,
                    format!("the checkpoint directory is not writable: {e}"),
                )
            })?;
            std::fs::remove_file(&probe).map_err(|e| Error::io(&probe, e))
        })();
    }
    agree(comm, result, dir, "cannot write checkpoints to")
}

/// An error when `dir` holds the checkpoints of an earlier run.
fn refuse_earlier_run(dir: &Path) -> Result<()> {
    let latest = match Index::read(dir)?.and_then(|index| index.latest) {
        Some(latest) => Some(latest),
        None => epochs_in(dir)?.pop().map(|(_, name)| name),
    };
    match latest {
        None => Ok(()),
        Some(latest) => Err(Error::checkpoint(
            dir,
            format!(
                "holds the checkpoints of an earlier run (latest: {latest}); pass --resume to \
                 continue that run, or choose another --checkpoint-dir (a new run here would \
                 replace them)"
            ),
        )),
    }
}

/// Every rank learns whether the master's `result` was Ok; the master returns its own error.
fn agree(comm: &Comm, result: Result<()>, dir: &Path, what: &str) -> Result<()> {
    let mut ok = [if result.is_ok() { 1.0 } else { 0.0 }];
    if !comm.is_master() {
        ok[0] = 0.0;
    }
    comm.sum_f64(&mut ok)?;
    result?;
    if ok[0] != 1.0 {
        return Err(Error::checkpoint(
            dir,
            format!("the master rank {what} this checkpoint (see its error)"),
        ));
    }
    Ok(())
}

pub(crate) fn epoch_name(epoch: u64) -> String {
    format!("epoch-{epoch:04}")
}

/// Collective: the master writes the checkpoint of `manifest.epochs_done` into `root`,
/// updates the index (best by `monitor`'s value in the last epoch's metrics) and keeps the
/// `keep` latest plus the best (and the early-stopping best the manifest names). When the
/// master fails, every rank returns an error.
pub fn save(
    comm: &Comm,
    root: &Path,
    keep: usize,
    monitor: Monitor,
    vs: &nn::VarStore,
    optimizer: &Optimizer,
    manifest: Manifest,
) -> Result<()> {
    let mut result = Ok(());
    if comm.is_master() {
        result = write(root, keep, monitor, vs, optimizer, manifest);
    }
    agree(comm, result, root, "could not write")
}

fn write(
    root: &Path,
    keep: usize,
    monitor: Monitor,
    vs: &nn::VarStore,
    optimizer: &Optimizer,
    mut manifest: Manifest,
) -> Result<()> {
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    remove_stale_staging(root)?;
    let name = epoch_name(manifest.epochs_done);
    let stage = root.join(format!(".tmp-{name}"));
    std::fs::create_dir_all(&stage).map_err(|e| Error::io(&stage, e))?;
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    // safetensors serializes host memory: GPU tensors are copied to the CPU first.
    Tensor::write_safetensors(&on_cpu(vars)?, stage.join(WEIGHTS))?;
    Tensor::write_safetensors(&on_cpu(optimizer.state_tensors())?, stage.join(OPTIMIZER))?;
    let mut files = BTreeMap::new();
    for file in [WEIGHTS, OPTIMIZER] {
        let path = stage.join(file);
        fsync_file(&path)?;
        files.insert(file.to_owned(), sha256_file(&path)?);
    }
    manifest.files = files;
    manifest.write(&stage)?;
    fsync_dir(&stage)?;
    if std::env::var_os(CRASH_BEFORE_RENAME_ENV).is_some() {
        eprintln!("checkpoint: {CRASH_BEFORE_RENAME_ENV} is set: aborting before the rename");
        std::process::abort();
    }
    let target = root.join(&name);
    if target.exists() {
        // A re-run of this epoch (resumed from an older checkpoint): replace it.
        std::fs::remove_dir_all(&target).map_err(|e| Error::io(&target, e))?;
    }
    std::fs::rename(&stage, &target).map_err(|e| Error::io(&target, e))?;
    fsync_dir(root)?;

    let mut index = Index::read(root)?.unwrap_or_default();
    index.latest = Some(name.clone());
    let value = manifest.metrics.last().and_then(|m| monitor.value(m));
    if let Some(value) = value {
        let better = match &index.best {
            Some(best) if best.monitor == monitor && root.join(&best.name).is_dir() => {
                monitor.improves(value, best.value, 0.0)
            }
            _ => true,
        };
        if better {
            index.best = Some(Best {
                name: name.clone(),
                monitor,
                value,
            });
        }
    }
    let json = serde_json::to_vec_pretty(&index)
        .map_err(|e| Error::checkpoint(&root.join(INDEX), e.to_string()))?;
    write_atomic(&root.join(INDEX), &json)?;
    let early_stopping_best = manifest
        .early_stopping
        .map(|state| epoch_name(state.best_epoch));
    prune(
        root,
        manifest.epochs_done,
        keep.max(1),
        &index,
        early_stopping_best.as_deref(),
    )?;
    tracing::info!(dir = %target.display(), "checkpoint written");
    Ok(())
}

fn list_dirs(root: &Path, prefix: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
        let entry = entry.map_err(|e| Error::io(root, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && entry.path().is_dir() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn remove_stale_staging(root: &Path) -> Result<()> {
    for name in list_dirs(root, ".tmp-epoch-")? {
        let path = root.join(name);
        std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

/// The checkpoint directories of `root` (`epoch-N`, whatever N's width) by epoch, in order.
fn epochs_in(root: &Path) -> Result<Vec<(u64, String)>> {
    let mut epochs: Vec<(u64, String)> = list_dirs(root, "epoch-")?
        .into_iter()
        .filter_map(|name| Some((name["epoch-".len()..].parse().ok()?, name)))
        .collect();
    epochs.sort();
    Ok(epochs)
}

/// Keeps the `keep` latest checkpoints up to epoch `current` (the one just written among
/// them), the best, and `also_keep`. Checkpoints of later epochs (left by an earlier
/// timeline) are left alone: this run replaces them when it gets there.
fn prune(
    root: &Path,
    current: u64,
    keep: usize,
    index: &Index,
    also_keep: Option<&str>,
) -> Result<()> {
    let epochs: Vec<String> = epochs_in(root)?
        .into_iter()
        .filter(|&(epoch, _)| epoch <= current)
        .map(|(_, name)| name)
        .collect();
    let cut = epochs.len().saturating_sub(keep);
    for name in &epochs[..cut] {
        let best = index.best.as_ref().is_some_and(|b| &b.name == name);
        if best || also_keep == Some(name.as_str()) {
            continue;
        }
        let path = root.join(name);
        std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

/// Collective: the master resolves `path` and reads and verifies its manifest; every rank
/// gets the directory and the manifest. Errors on every rank when the master fails.
pub fn read_manifest(comm: &Comm, path: &Path, which: Which) -> Result<(PathBuf, Manifest)> {
    let mut local = None;
    let mut bytes = Vec::new();
    let mut master_result = Ok(());
    if comm.is_master() {
        master_result = (|| {
            let dir = resolve(path, which)?;
            let manifest = Manifest::read_verified(&dir)?;
            bytes = serde_json::to_vec(&(&dir, &manifest))
                .map_err(|e| Error::checkpoint(&dir, e.to_string()))?;
            local = Some((dir, manifest));
            Ok(())
        })();
    }
    let mut header = [0f64; 1];
    header[0] = bytes.len() as f64;
    agree(comm, master_result, path, "could not read")?;
    comm.sum_f64(&mut header)?;
    if let Some(found) = local {
        if comm.size() > 1 {
            let mut values: Vec<f32> = bytes.iter().map(|&b| f32::from(b)).collect();
            comm.broadcast_f32(&mut values)?;
        }
        return Ok(found);
    }
    let mut values = vec![0f32; header[0] as usize];
    comm.broadcast_f32(&mut values)?;
    let bytes: Vec<u8> = values.iter().map(|&v| v as u8).collect();
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::checkpoint(path, format!("the manifest broadcast is corrupt: {e}")))
}

/// Collective: the master loads `dir`'s weights into `vs` (and the optimizer state into
/// `optimizer`, when given), checking names, shapes and finiteness; then every rank receives
/// them. Call [`Manifest::check_compatible`] first.
pub fn load_tensors(
    comm: &Comm,
    dir: &Path,
    manifest: &Manifest,
    vs: &nn::VarStore,
    optimizer: Option<&mut Optimizer>,
) -> Result<()> {
    let mut result = Ok(());
    let mut optimizer = optimizer;
    if comm.is_master() {
        result = (|| {
            let path = dir.join(WEIGHTS);
            let saved: BTreeMap<String, Tensor> = Tensor::read_safetensors(&path)
                .map_err(|e| Error::checkpoint(&path, e.to_string()))?
                .into_iter()
                .collect();
            for (name, var) in vs.variables() {
                let value = saved
                    .get(&name)
                    .ok_or_else(|| Error::checkpoint(&path, format!("no tensor {name}")))?;
                if value.size() != var.size() {
                    return Err(Error::checkpoint(
                        &path,
                        format!(
                            "{name} has shape {:?}, the model needs {:?}",
                            value.size(),
                            var.size()
                        ),
                    ));
                }
                let finite = value.f_isfinite()?.f_all()?.f_int64_value(&[])? == 1;
                if !finite {
                    return Err(Error::checkpoint(
                        &path,
                        format!("{name} holds NaN or infinity"),
                    ));
                }
                tch::no_grad(|| var.shallow_clone().f_copy_(value))?;
            }
            if let Some(opt) = optimizer.as_deref_mut() {
                let path = dir.join(OPTIMIZER);
                let state = Tensor::read_safetensors(&path)
                    .map_err(|e| Error::checkpoint(&path, e.to_string()))?;
                opt.load_state(&state, manifest.optimizer_steps)
                    .map_err(|e| Error::checkpoint(&path, e.to_string()))?;
            }
            Ok(())
        })();
    }
    agree(comm, result, dir, "could not load")?;
    broadcast_variables(comm, vs)?;
    if let Some(opt) = optimizer {
        let state: Vec<Tensor> = opt.state_tensors().into_iter().map(|(_, t)| t).collect();
        broadcast_tensors(comm, &state)?;
        opt.set_steps(manifest.optimizer_steps);
    }
    Ok(())
}

fn on_cpu(named: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>> {
    named
        .into_iter()
        // Row-major: safetensors stores the logical order (channels-last weights are not).
        .map(|(name, t)| Ok((name, t.f_to_device(tch::Device::Cpu)?.f_contiguous()?)))
        .collect()
}

/// The weights of the latest checkpoint in `root` by name (for tools and tests).
pub fn read_latest_weights(root: &Path) -> Result<BTreeMap<String, Tensor>> {
    let dir = resolve(root, Which::Latest)?;
    let path = dir.join(WEIGHTS);
    Ok(Tensor::read_safetensors(&path)
        .map_err(|e| Error::checkpoint(&path, e.to_string()))?
        .into_iter()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(name: &str, epochs: &[u64]) -> PathBuf {
        let root = std::env::temp_dir().join(format!("tnt-prune-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for &e in epochs {
            std::fs::create_dir_all(root.join(epoch_name(e))).unwrap();
        }
        root
    }

    fn left(root: &Path) -> Vec<u64> {
        epochs_in(root)
            .unwrap()
            .into_iter()
            .map(|(e, _)| e)
            .collect()
    }

    #[test]
    fn pruning_goes_by_epoch_number_past_four_digits() {
        let root = dir_with("digits", &[9998, 9999, 10000]);
        prune(&root, 10000, 2, &Index::default(), None).unwrap();
        assert_eq!(left(&root), [9999, 10000]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn pruning_keeps_the_best_and_leaves_later_epochs_alone() {
        let root = dir_with("keep", &[1, 2, 3, 4, 5, 6]);
        let index = Index {
            latest: Some(epoch_name(4)),
            best: Some(Best {
                name: epoch_name(1),
                monitor: Monitor::ValLoss,
                value: 0.5,
            }),
        };
        // Epoch 4 just written over an earlier timeline's 5 and 6; early stopping's best is 2.
        prune(&root, 4, 1, &index, Some(&epoch_name(2))).unwrap();
        assert_eq!(left(&root), [1, 2, 4, 5, 6]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
