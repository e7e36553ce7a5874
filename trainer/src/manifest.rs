//! A checkpoint's JSON manifest (what was saved, for which model and optimizer, how far the
//! run got, its metrics, and the SHA-256 of every file), and the file-system primitives that
//! make checkpoint writes atomic: write, fsync, rename, fsync the directory.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::callbacks::EarlyStoppingState;
use crate::data::DatasetKind;
use crate::error::{Error, Result};
use crate::metrics::EpochMetrics;
use crate::models::ModelKind;
use crate::optim::OptimizerKind;
use crate::schedule::{PlateauState, ScheduleConfig};

/// Version of the manifest layout.
pub const FORMAT: u32 = 1;
/// The manifest's file name in a checkpoint directory.
pub const MANIFEST: &str = "manifest.json";

/// The model a checkpoint belongs to: kind, shape settings and every variable's shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Which model.
    pub kind: ModelKind,
    /// The MLP's hidden layer sizes (empty for the other models).
    pub mlp_hidden: Vec<i64>,
    /// Variable name to shape, for every variable of the `VarStore`.
    pub variables: BTreeMap<String, Vec<i64>>,
}

/// Everything a checkpoint records besides the tensors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The layout version ([`FORMAT`]).
    pub format: u32,
    /// The model the weights belong to.
    pub model: ModelSpec,
    /// The optimizer the state belongs to.
    pub optimizer: OptimizerKind,
    /// The run's LR schedule.
    pub schedule: ScheduleConfig,
    /// Reduce-on-plateau's state at the checkpoint.
    pub plateau: PlateauState,
    /// The data the run trained on.
    pub dataset: DatasetKind,
    /// Where its files were.
    pub data_dir: Option<PathBuf>,
    /// The run's seed (shuffling, synthetic data).
    pub seed: u64,
    /// The global batch size.
    pub batch_size: usize,
    /// Micro-steps per optimizer step.
    pub grad_accum: usize,
    /// Epochs the run was asked for.
    pub epochs: u64,
    /// Epochs completed at this checkpoint.
    pub epochs_done: u64,
    /// Optimizer steps of the training loop so far.
    pub global_step: u64,
    /// Updates the optimizer applied so far (Adam's bias correction depends on it).
    pub optimizer_steps: u64,
    /// The run ended here (all epochs done, or early stopping).
    pub finished: bool,
    /// Early stopping ended the run: (after epoch, best epoch).
    pub early_stopped: Option<(u64, u64)>,
    /// Early stopping's watch so far (absent in checkpoints written before it was recorded,
    /// and in runs without early stopping).
    #[serde(default)]
    pub early_stopping: Option<EarlyStoppingState>,
    /// Every epoch so far.
    pub metrics: Vec<EpochMetrics>,
    /// File name to lower-case hex SHA-256.
    pub files: BTreeMap<String, String>,
}

/// Lower-case hex SHA-256 of a file's content.
pub fn sha256_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let digest = Sha256::digest(&bytes);
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Flushes a file's content to disk.
pub fn fsync_file(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(path, e))
}

/// Flushes a directory's entries (renames, creations) to disk.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsync, rename, fsync of
/// the directory. A crash leaves either the old file or the new one, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    fsync_dir(dir)
}

impl Manifest {
    /// Writes `dir/manifest.json` (fsynced).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST);
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::checkpoint(&path, format!("cannot encode the manifest: {e}")))?;
        std::fs::write(&path, json).map_err(|e| Error::io(&path, e))?;
        fsync_file(&path)
    }

    /// Reads `dir/manifest.json` and checks every listed file against its SHA-256.
    pub fn read_verified(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read(&path).map_err(|e| {
            Error::checkpoint(
                &path,
                format!(
                    "cannot read the manifest ({e}); is {} a checkpoint?",
                    dir.display()
                ),
            )
        })?;
        let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| {
            Error::checkpoint(&path, format!("the manifest is corrupt or truncated: {e}"))
        })?;
        if manifest.format != FORMAT {
            return Err(Error::checkpoint(
                &path,
                format!(
                    "manifest format {} is not the supported {FORMAT}",
                    manifest.format
                ),
            ));
        }
        for (name, expected) in &manifest.files {
            let file = dir.join(name);
            let actual = sha256_file(&file).map_err(|e| Error::checkpoint(&file, e.to_string()))?;
            if &actual != expected {
                return Err(Error::checkpoint(
                    &file,
                    format!(
                        "SHA-256 {actual} does not match the manifest's {expected}: the file is \
                         corrupted or was changed after it was written; refusing to load it"
                    ),
                ));
            }
        }
        Ok(manifest)
    }

    /// Checks that this checkpoint fits `model` and `optimizer`; the error says what differs.
    pub fn check_compatible(
        &self,
        dir: &Path,
        model: &ModelSpec,
        optimizer: &OptimizerKind,
    ) -> Result<()> {
        let path = dir.join(MANIFEST);
        if self.model.kind != model.kind || self.model.mlp_hidden != model.mlp_hidden {
            return Err(Error::checkpoint(
                &path,
                format!(
                    "the checkpoint is for model {:?} (hidden {:?}), this run builds {:?} \
                     (hidden {:?})",
                    self.model.kind, self.model.mlp_hidden, model.kind, model.mlp_hidden
                ),
            ));
        }
        if self.model.variables != model.variables {
            let differing = model
                .variables
                .iter()
                .find(|(name, shape)| self.model.variables.get(*name) != Some(*shape))
                .map(|(name, shape)| {
                    format!(
                        "{name}: {shape:?} here, {:?} in the checkpoint",
                        self.model.variables.get(name)
                    )
                })
                .unwrap_or_else(|| "the checkpoint has extra variables".to_owned());
            return Err(Error::checkpoint(
                &path,
                format!("the model's variables differ ({differing})"),
            ));
        }
        if &self.optimizer != optimizer {
            return Err(Error::checkpoint(
                &path,
                format!(
                    "the checkpoint was written with optimizer {:?}, this run uses {:?}",
                    self.optimizer, optimizer
                ),
            ));
        }
        Ok(())
    }
}
