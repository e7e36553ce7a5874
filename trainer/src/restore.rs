//! A trained model back from a checkpoint, with the test split it was trained for: what
//! `train evaluate` and `train predict` run on.

use std::path::{Path, PathBuf};

use tch::nn;

use crate::checkpoint::{self, model_spec, Which};
use crate::comm::Comm;
use crate::data::{self, Dataset, DatasetKind};
use crate::error::{Error, Result};
use crate::manifest::Manifest;

/// A model with a checkpoint's weights.
pub struct Restored {
    /// The model's variables, with the checkpoint's values.
    pub vs: nn::VarStore,
    /// The model, built over `vs`.
    pub model: Box<dyn nn::ModuleT>,
    /// The checkpoint directory used.
    pub dir: PathBuf,
    /// The checkpoint's manifest.
    pub manifest: Manifest,
}

/// Collective: rebuilds the checkpoint's model (kind and shapes from its manifest), verifies
/// the files and loads the weights on every rank.
pub fn restore(comm: &Comm, path: &Path, which: Which) -> Result<Restored> {
    let (dir, manifest) = checkpoint::read_manifest(comm, path, which)?;
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let model = manifest
        .model
        .kind
        .build(&vs.root(), &manifest.model.mlp_hidden)?;
    manifest.check_compatible(
        &dir,
        &model_spec(manifest.model.kind, &manifest.model.mlp_hidden, &vs),
        &manifest.optimizer,
    )?;
    checkpoint::load_tensors(comm, &dir, &manifest, &vs, None)?;
    Ok(Restored {
        vs,
        model,
        dir,
        manifest,
    })
}

/// The test split for a restored model: `dataset`/`data_dir` when given, else the ones the
/// checkpoint was trained on; the first `subset` samples when given.
pub fn test_split(
    manifest: &Manifest,
    dataset: Option<DatasetKind>,
    data_dir: Option<&Path>,
    subset: Option<usize>,
) -> Result<Dataset> {
    let kind = dataset.unwrap_or(manifest.dataset);
    let dir = data_dir.or(if dataset.is_none() {
        manifest.data_dir.as_deref()
    } else {
        None
    });
    let mut test = data::load(kind, dir, 1, manifest.seed)?
        .test
        .ok_or_else(|| {
            Error::Config(format!(
                "{kind:?} data has no test split; pass --dataset mnist or fashion-mnist"
            ))
        })?;
    if let Some(n) = subset {
        test.truncate(n);
    }
    Ok(test)
}
