//! The data a run trains and validates on: the MNIST-shaped datasets on the host
//! ([`Dataset`], decoded per batch) or the full-size models' synthetic samples resident on the
//! device ([`DeviceSynthetic`]), drawn from through one [`TrainSamples`].

use tch::{Device, Tensor};

use super::config::TrainConfig;
use crate::data::{self, Dataset, DatasetKind, Splits};
use crate::error::{Error, Result};
use crate::models::ModelInput;
use crate::synthetic::DeviceSynthetic;

/// The training samples a run draws batches from: decoded from files or generated on the
/// host ([`Dataset`]), or resident on the device ([`DeviceSynthetic`]).
#[derive(Clone, Copy, Debug)]
pub enum TrainSamples<'a> {
    /// Samples on the host, turned into tensors per batch.
    Host(&'a Dataset),
    /// Samples on the training device, gathered there per batch.
    Device(&'a DeviceSynthetic),
}

impl TrainSamples<'_> {
    /// The number of samples.
    pub fn len(&self) -> usize {
        match self {
            TrainSamples::Host(d) => d.len(),
            TrainSamples::Device(d) => d.len(),
        }
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples at `indices` as `(inputs, labels)` on `device`.
    pub fn batch(&self, indices: &[usize], device: Device) -> Result<(Tensor, Tensor)> {
        let (x, y) = match self {
            TrainSamples::Host(d) => d.batch(indices)?,
            TrainSamples::Device(d) => d.batch(indices)?,
        };
        Ok((x.f_to_device(device)?, y.f_to_device(device)?))
    }
}

/// What a run loaded, as its model's input asks.
pub(super) enum RunData {
    /// The MNIST-shaped datasets: a training split and, for the IDX files, a test split.
    Host(Splits),
    /// Synthetic samples for the full-size models, on the device; no test split.
    Device(DeviceSynthetic),
}

impl RunData {
    /// Loads (or generates) the data `cfg` asks for, cut to `--train-subset` and
    /// `--test-subset`.
    pub(super) fn load(cfg: &TrainConfig, device: Device) -> Result<Self> {
        match cfg.model.input() {
            ModelInput::Mnist => {
                let mut splits =
                    data::load(cfg.dataset, cfg.data_dir.as_deref(), cfg.samples, cfg.seed)?;
                if let Some(n) = cfg.train_subset {
                    splits.train.truncate(n);
                }
                if let (Some(n), Some(test)) = (cfg.test_subset, splits.test.as_mut()) {
                    test.truncate(n);
                }
                Ok(RunData::Host(splits))
            }
            input if cfg.dataset == DatasetKind::Synthetic => Ok(RunData::Device(
                DeviceSynthetic::new(input, cfg.samples, cfg.seed, device)?,
            )),
            _ => Err(Error::Config(format!(
                "--model {:?} trains on synthetic data on the device (--dataset synthetic); \
                 the MNIST-shaped datasets fit the small models",
                cfg.model
            ))),
        }
    }

    /// The training samples.
    pub(super) fn train(&self) -> TrainSamples<'_> {
        match self {
            RunData::Host(splits) => TrainSamples::Host(&splits.train),
            RunData::Device(samples) => TrainSamples::Device(samples),
        }
    }

    /// The test split, when the data has one.
    pub(super) fn test(&self) -> Option<&Dataset> {
        match self {
            RunData::Host(splits) => splits.test.as_ref(),
            RunData::Device(_) => None,
        }
    }
}
