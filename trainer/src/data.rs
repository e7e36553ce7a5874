//! Datasets: 28x28 one-channel images with labels 0..10: synthetic (deterministic from a seed,
//! learnable; for benchmarks and tests that need no files), MNIST or Fashion-MNIST read from
//! their IDX files (`.gz` as published, or plain), with both splits.
//!
//! Samples stay as the file's bytes; a batch decodes (normalizes to f32) only the samples it
//! asks for, so a rank turns into tensors only its own part of each global batch.

use std::path::{Path, PathBuf};

use tch::Tensor;

use crate::error::{Error, Result};
use crate::idx::read_idx;
use crate::shard::SplitMix64;

/// Image side (in pixels) of every dataset here (MNIST's).
pub const IMAGE_SIDE: usize = 28;
/// Class count of every dataset here (MNIST's).
pub const NUM_CLASSES: usize = 10;
const PIXELS: usize = IMAGE_SIDE * IMAGE_SIDE;

/// Where Debian's `dataset-fashion-mnist` package installs the real Fashion-MNIST files.
pub const FASHION_MNIST_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// Which data `train --dataset` uses.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetKind {
    /// Class prototypes plus noise, generated from the seed; no test split.
    Synthetic,
    /// MNIST's IDX files from `--data-dir`.
    Mnist,
    /// Fashion-MNIST's IDX files from `--data-dir`, else from `FASHION_MNIST_DIR`.
    FashionMnist,
}

impl DatasetKind {
    /// Per-pixel mean and standard deviation (of the training split, on [0, 1]).
    fn normalization(self) -> (f32, f32) {
        match self {
            DatasetKind::FashionMnist => (0.2860, 0.3530),
            _ => (0.1307, 0.3081),
        }
    }
}

/// The two splits of the IDX datasets, by their file-name prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// The training split (`train-*`).
    Train,
    /// The test split (`t10k-*`).
    Test,
}

impl Split {
    fn prefix(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "t10k",
        }
    }

    /// The published names of the images and labels files (without `.gz`).
    pub fn file_names(self) -> (String, String) {
        let p = self.prefix();
        (
            format!("{p}-images-idx3-ubyte"),
            format!("{p}-labels-idx1-ubyte"),
        )
    }
}

/// Pixel storage: the file's bytes (decoded per batch) or already-float synthetic images.
#[derive(Debug)]
enum Pixels {
    Bytes { data: Vec<u8>, mean: f32, std: f32 },
    Float(Vec<f32>),
}

/// Images (decoded per batch to `[n, 1, 28, 28]` f32, normalized) and labels (`[n]` i64).
#[derive(Debug)]
pub struct Dataset {
    pixels: Pixels,
    labels: Vec<u8>,
}

/// A training split and, for the IDX datasets, the test split.
#[derive(Debug)]
pub struct Splits {
    /// What the model trains on.
    pub train: Dataset,
    /// What it is validated on; `None` for the synthetic data.
    pub test: Option<Dataset>,
}

/// Loads `kind` (from `dir` where given). `samples` and `seed` shape the synthetic data.
pub fn load(kind: DatasetKind, dir: Option<&Path>, samples: usize, seed: u64) -> Result<Splits> {
    let dir: PathBuf = match (kind, dir) {
        (DatasetKind::Synthetic, _) => {
            return Ok(Splits {
                train: Dataset::synthetic(samples, seed)?,
                test: None,
            })
        }
        (_, Some(dir)) => dir.to_path_buf(),
        (DatasetKind::Mnist, None) => {
            return Err(Error::Config(
                "--dataset mnist needs --data-dir DIR with train-images-idx3-ubyte.gz, \
                 train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and \
                 t10k-labels-idx1-ubyte.gz (from http://yann.lecun.com/exdb/mnist/; plain \
                 files work too)"
                    .into(),
            ))
        }
        (DatasetKind::FashionMnist, None) => {
            let dir = PathBuf::from(FASHION_MNIST_DIR);
            if find_file(&dir, &Split::Train.file_names().0).is_none() {
                return Err(Error::Config(format!(
                    "Fashion-MNIST is not installed in {FASHION_MNIST_DIR}: install it with \
                     `sudo apt-get install dataset-fashion-mnist` (Debian), or download the \
                     four *-ubyte.gz files from https://github.com/zalandoresearch/fashion-mnist \
                     and pass --data-dir DIR"
                )));
            }
            dir
        }
    };
    let (mean, std) = kind.normalization();
    let train = Dataset::from_idx(&dir, Split::Train, mean, std)?;
    let test = Dataset::from_idx(&dir, Split::Test, mean, std)?;
    Ok(Splits {
        train,
        test: Some(test),
    })
}

/// `dir/name.gz` when it exists, else `dir/name` when it exists.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(format!("{name}.gz")), dir.join(name)]
        .into_iter()
        .find(|p| p.is_file())
}

fn require_file(dir: &Path, name: &str, split: Split) -> Result<PathBuf> {
    find_file(dir, name).ok_or_else(|| {
        Error::data(
            &dir.join(format!("{name}.gz")),
            format!(
                "missing {} split: neither {name}.gz nor {name} exists in {}",
                match split {
                    Split::Train => "training",
                    Split::Test => "test",
                },
                dir.display()
            ),
        )
    })
}

impl Dataset {
    /// `len` samples: each class has a fixed random prototype image; a sample is its class's
    /// prototype plus noise, so models can learn it. Same `seed`, same data, on every rank.
    pub fn synthetic(len: usize, seed: u64) -> Result<Self> {
        if len == 0 {
            return Err(Error::Config(
                "the synthetic dataset needs at least one sample".into(),
            ));
        }
        let mut rng = SplitMix64::new(seed.wrapping_add(0x5eed));
        let prototypes: Vec<f32> = (0..NUM_CLASSES * PIXELS).map(|_| rng.next_f32()).collect();
        let mut images = Vec::with_capacity(len * PIXELS);
        let mut labels = Vec::with_capacity(len);
        for _ in 0..len {
            let class = rng.below(NUM_CLASSES as u64) as usize;
            labels.push(class as u8);
            let proto = &prototypes[class * PIXELS..(class + 1) * PIXELS];
            images.extend(proto.iter().map(|p| 0.2 * p + 0.8 * rng.next_f32() - 0.5));
        }
        Ok(Dataset {
            pixels: Pixels::Float(images),
            labels,
        })
    }

    /// One split of an MNIST-layout dataset in `dir`, normalized with `mean` and `std`.
    pub fn from_idx(dir: &Path, split: Split, mean: f32, std: f32) -> Result<Self> {
        let (images_name, labels_name) = split.file_names();
        let images_path = require_file(dir, &images_name, split)?;
        let labels_path = require_file(dir, &labels_name, split)?;
        let images = read_idx(&images_path)?;
        if images.dims.len() != 3 || images.dims[1] != IMAGE_SIDE || images.dims[2] != IMAGE_SIDE {
            return Err(Error::data(
                &images_path,
                format!(
                    "expected N x 28 x 28 images, found dimensions {:?}",
                    images.dims
                ),
            ));
        }
        if images.dims[0] == 0 {
            return Err(Error::data(&images_path, "the file holds no images"));
        }
        let labels = read_idx(&labels_path)?;
        if labels.dims.len() != 1 || labels.dims[0] != images.dims[0] {
            return Err(Error::data(
                &labels_path,
                format!(
                    "expected {} labels (one per image in {}), found dimensions {:?}",
                    images.dims[0],
                    images_path.display(),
                    labels.dims
                ),
            ));
        }
        if let Some((i, bad)) = labels
            .data
            .iter()
            .enumerate()
            .find(|(_, &l)| usize::from(l) >= NUM_CLASSES)
        {
            return Err(Error::data(
                &labels_path,
                format!("label {bad} of sample {i} is not in 0..10"),
            ));
        }
        Ok(Dataset {
            pixels: Pixels::Bytes {
                data: images.data,
                mean,
                std,
            },
            labels: labels.data,
        })
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Keeps only the first `n` samples (for quick runs on a subset).
    pub fn truncate(&mut self, n: usize) {
        self.labels.truncate(n);
        match &mut self.pixels {
            Pixels::Bytes { data, .. } => data.truncate(n * PIXELS),
            Pixels::Float(data) => data.truncate(n * PIXELS),
        }
    }

    /// The label of sample `i`.
    pub fn label(&self, i: usize) -> Option<u8> {
        self.labels.get(i).copied()
    }

    /// The samples at `indices`, decoded: (images `[n, 1, 28, 28]` f32, labels `[n]` i64).
    pub fn batch(&self, indices: &[usize]) -> Result<(Tensor, Tensor)> {
        let n = self.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::Config(format!(
                "sample index {bad} is out of range for a dataset of {n}"
            )));
        }
        let mut images = Vec::with_capacity(indices.len() * PIXELS);
        match &self.pixels {
            Pixels::Bytes { data, mean, std } => {
                let (scale, shift) = (1.0 / (255.0 * std), mean / std);
                for &i in indices {
                    let px = &data[i * PIXELS..(i + 1) * PIXELS];
                    images.extend(px.iter().map(|&p| f32::from(p) * scale - shift));
                }
            }
            Pixels::Float(data) => {
                for &i in indices {
                    images.extend_from_slice(&data[i * PIXELS..(i + 1) * PIXELS]);
                }
            }
        }
        let labels: Vec<i64> = indices.iter().map(|&i| i64::from(self.labels[i])).collect();
        let side = IMAGE_SIDE as i64;
        Ok((
            Tensor::from_slice(&images).f_view([indices.len() as i64, 1, side, side])?,
            Tensor::from_slice(&labels),
        ))
    }
}

#[cfg(test)]
mod tests;
