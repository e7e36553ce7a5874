//! Datasets: 28x28 one-channel images with labels 0..10: synthetic (deterministic from a
//! seed, learnable), or MNIST / Fashion-MNIST read from their IDX files (plain or `.gz`,
//! both splits).
//!
//! Real images stay as the bytes the file held; a batch is gathered and converted to
//! normalized `f32` when it is taken, so a rank holds the decompressed file once and only
//! its current batch as floats (60,000 images are 47 MB as bytes, 188 MB as floats).

mod idx;

use std::fmt;
use std::path::{Path, PathBuf};

use tch::{Kind, Tensor};

use self::idx::data_err;
pub use self::idx::{locate, parse_idx, read_idx, write_idx, IdxArray};
use crate::error::{Error, Result};
use crate::shard::SplitMix64;

/// Image side and class count of every dataset here (MNIST's).
pub const IMAGE_SIDE: usize = 28;
pub const NUM_CLASSES: usize = 10;

/// MNIST's (and Fashion-MNIST's) file names, as published (each also found with `.gz`).
pub const MNIST_TRAIN_IMAGES: &str = "train-images-idx3-ubyte";
pub const MNIST_TRAIN_LABELS: &str = "train-labels-idx1-ubyte";
pub const MNIST_TEST_IMAGES: &str = "t10k-images-idx3-ubyte";
pub const MNIST_TEST_LABELS: &str = "t10k-labels-idx1-ubyte";

/// Where Debian's `dataset-fashion-mnist` package installs the real files.
pub const FASHION_MNIST_SYSTEM_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// Which data a run learns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DatasetKind {
    /// Class prototypes plus noise, made from the seed (no files).
    Synthetic,
    Mnist,
    FashionMnist,
}

impl DatasetKind {
    /// Pixel mean and standard deviation of the training split (on `[0, 1]` pixels).
    fn normalization(self) -> (f32, f32) {
        match self {
            DatasetKind::Mnist => (0.1307, 0.3081),
            DatasetKind::FashionMnist => (0.2860, 0.3530),
            DatasetKind::Synthetic => (0.0, 1.0),
        }
    }

    /// The directory of the files: the one given, else the system's copy where there is one.
    pub fn resolve_dir(self, dir: Option<&Path>) -> Result<PathBuf> {
        match (self, dir) {
            (_, Some(d)) => Ok(d.to_path_buf()),
            (DatasetKind::FashionMnist, None) => Ok(PathBuf::from(FASHION_MNIST_SYSTEM_DIR)),
            (DatasetKind::Mnist, None) => Err(Error::Config(
                "--dataset mnist needs --data-dir DIR with MNIST's IDX files \
                 (train-images-idx3-ubyte[.gz] and the three others)"
                    .into(),
            )),
            (DatasetKind::Synthetic, None) => {
                Err(Error::Config("the synthetic dataset has no files".into()))
            }
        }
    }
}

impl fmt::Display for DatasetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DatasetKind::Synthetic => "synthetic",
            DatasetKind::Mnist => "MNIST",
            DatasetKind::FashionMnist => "Fashion-MNIST",
        })
    }
}

/// The training or the test split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Test,
}

impl Split {
    fn files(self) -> (&'static str, &'static str) {
        match self {
            Split::Train => (MNIST_TRAIN_IMAGES, MNIST_TRAIN_LABELS),
            Split::Test => (MNIST_TEST_IMAGES, MNIST_TEST_LABELS),
        }
    }
}

/// How images are stored.
#[derive(Debug)]
enum Pixels {
    /// `[N, 1, 28, 28]` bytes, normalized per batch with `(x / 255 - mean) / std`.
    Bytes { images: Tensor, mean: f32, std: f32 },
    /// `[N, 1, 28, 28]` floats, ready.
    Float(Tensor),
}

/// Images and labels `[N]` (i64).
#[derive(Debug)]
pub struct Dataset {
    pixels: Pixels,
    labels: Tensor,
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
        let pixels = IMAGE_SIDE * IMAGE_SIDE;
        let mut rng = SplitMix64::new(seed.wrapping_add(0x5eed));
        let prototypes: Vec<f32> = (0..NUM_CLASSES * pixels).map(|_| rng.next_f32()).collect();
        let mut images = Vec::with_capacity(len * pixels);
        let mut labels = Vec::with_capacity(len);
        for _ in 0..len {
            let class = rng.below(NUM_CLASSES as u64) as usize;
            labels.push(class as i64);
            let proto = &prototypes[class * pixels..(class + 1) * pixels];
            images.extend(proto.iter().map(|p| 0.2 * p + 0.8 * rng.next_f32() - 0.5));
        }
        let n = len as i64;
        let side = IMAGE_SIDE as i64;
        Ok(Dataset {
            pixels: Pixels::Float(Tensor::from_slice(&images).f_view([n, 1, side, side])?),
            labels: Tensor::from_slice(&labels),
        })
    }

    /// MNIST's training split from `dir` (kept for callers of the earlier API).
    pub fn mnist(dir: &Path) -> Result<Self> {
        Self::idx(DatasetKind::Mnist, dir, Split::Train)
    }

    /// A split of MNIST or Fashion-MNIST from the IDX files in `dir` (plain or `.gz`).
    pub fn idx(kind: DatasetKind, dir: &Path, split: Split) -> Result<Self> {
        let (images_name, labels_name) = split.files();
        let find = |name: &str| locate(dir, name).ok_or_else(|| missing(kind, dir, name, split));
        let images_path = find(images_name)?;
        let labels_path = find(labels_name)?;
        let images = read_idx(&images_path)?;
        let labels = read_idx(&labels_path)?;
        if images.dims.len() != 3 || images.dims[1] != IMAGE_SIDE || images.dims[2] != IMAGE_SIDE {
            return Err(data_err(
                &images_path,
                format!(
                    "expected N x 28 x 28 images, found dimensions {:?}",
                    images.dims
                ),
            ));
        }
        if images.dims[0] == 0 {
            return Err(data_err(&images_path, "holds no images".into()));
        }
        if labels.dims.len() != 1 || labels.dims[0] != images.dims[0] {
            return Err(data_err(
                &labels_path,
                format!(
                    "expected {} labels (one per image of {}), found dimensions {:?}",
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
            .find(|(_, &l)| l as usize >= NUM_CLASSES)
        {
            return Err(data_err(
                &labels_path,
                format!("label {bad} of sample {i} is not in 0..10"),
            ));
        }
        let (mean, std) = kind.normalization();
        let n = images.dims[0] as i64;
        let side = IMAGE_SIDE as i64;
        Ok(Dataset {
            pixels: Pixels::Bytes {
                images: Tensor::from_slice(&images.data).f_view([n, 1, side, side])?,
                mean,
                std,
            },
            labels: Tensor::from_slice(&labels.data).to_kind(Kind::Int64),
        })
    }

    /// The first `n` samples (all when there are fewer): a subset for quick runs and tests.
    pub fn truncated(self, n: usize) -> Result<Self> {
        let n = n.min(self.len()) as i64;
        if n == 0 {
            return Err(Error::Config("a subset of 0 samples".into()));
        }
        let pixels = match self.pixels {
            Pixels::Float(t) => Pixels::Float(t.f_narrow(0, 0, n)?),
            Pixels::Bytes { images, mean, std } => Pixels::Bytes {
                images: images.f_narrow(0, 0, n)?,
                mean,
                std,
            },
        };
        Ok(Dataset {
            pixels,
            labels: self.labels.f_narrow(0, 0, n)?,
        })
    }

    pub fn len(&self) -> usize {
        self.labels.size()[0] as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples at `indices`: (images `[B, 1, 28, 28]` f32, labels `[B]` i64).
    pub fn batch(&self, indices: &[usize]) -> Result<(Tensor, Tensor)> {
        let idx: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
        let idx = Tensor::from_slice(&idx);
        let images = match &self.pixels {
            Pixels::Float(t) => t.f_index_select(0, &idx)?,
            Pixels::Bytes { images, mean, std } => {
                let x = images.f_index_select(0, &idx)?.f_to_kind(Kind::Float)?;
                ((x / 255.0) - f64::from(*mean)) / f64::from(*std)
            }
        };
        Ok((images, self.labels.f_index_select(0, &idx)?))
    }

    /// The samples `range` in order (evaluation and prediction take contiguous shares).
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<(Tensor, Tensor)> {
        let indices: Vec<usize> = range.collect();
        self.batch(&indices)
    }
}

/// The error for a missing file, saying how to get the data.
fn missing(kind: DatasetKind, dir: &Path, name: &str, split: Split) -> Error {
    let what = match split {
        Split::Train => "training split",
        Split::Test => "test split",
    };
    let how = match kind {
        DatasetKind::FashionMnist => {
            " (Debian: `apt-get install dataset-fashion-mnist` installs it in \
             /usr/share/datasets/fashion-mnist; or download the four files from \
             Fashion-MNIST's site and pass --data-dir)"
        }
        _ => " (pass --data-dir with the four IDX files, plain or .gz)",
    };
    Error::Data {
        path: dir.join(name),
        message: format!("missing: the {kind} {what} is not there, nor {name}.gz{how}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tnt-data-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A small MNIST-like split in `dir` (`n` images), gzipped or plain.
    fn write_split(dir: &Path, split: Split, n: usize, gz: bool) {
        let (i, l) = split.files();
        let ext = if gz { ".gz" } else { "" };
        let images: Vec<u8> = (0..n * 28 * 28).map(|k| (k % 251) as u8).collect();
        let labels: Vec<u8> = (0..n).map(|k| (k * 7 % 10) as u8).collect();
        write_idx(&dir.join(format!("{i}{ext}")), &[n, 28, 28], &images).unwrap();
        write_idx(&dir.join(format!("{l}{ext}")), &[n], &labels).unwrap();
    }

    #[test]
    fn both_splits_plain_and_gzipped() {
        let dir = scratch("splits");
        write_split(&dir, Split::Train, 5, true);
        write_split(&dir, Split::Test, 3, false);
        let train = Dataset::idx(DatasetKind::FashionMnist, &dir, Split::Train).unwrap();
        let test = Dataset::idx(DatasetKind::FashionMnist, &dir, Split::Test).unwrap();
        assert_eq!((train.len(), test.len()), (5, 3));
        let (x, y) = test.batch(&[2, 0]).unwrap();
        assert_eq!(x.size(), [2, 1, 28, 28]);
        assert_eq!(x.kind(), Kind::Float);
        assert_eq!(Vec::<i64>::try_from(&y).unwrap(), [4, 0]);
        // Pixel 1 of image 0 is the byte 1, normalized with Fashion-MNIST's statistics.
        let v = x.get(1).flatten(0, -1).double_value(&[1]);
        assert!((v - ((1.0 / 255.0 - 0.2860) / 0.3530)).abs() < 1e-5, "{v}");
        let (s, _) = test.slice(1..3).unwrap();
        assert_eq!(s.size(), [2, 1, 28, 28]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn malformed_or_missing_files_name_the_file() {
        let dir = scratch("bad");
        write_split(&dir, Split::Train, 3, false);
        let err = |k| Dataset::idx(k, &dir, Split::Train).unwrap_err().to_string();
        // A label out of range.
        write_idx(&dir.join(MNIST_TRAIN_LABELS), &[3], &[7, 10, 9]).unwrap();
        let e = err(DatasetKind::Mnist);
        assert!(
            e.contains(MNIST_TRAIN_LABELS) && e.contains("label 10"),
            "{e}"
        );
        // Fewer labels than images.
        write_idx(&dir.join(MNIST_TRAIN_LABELS), &[2], &[7, 1]).unwrap();
        let e = err(DatasetKind::Mnist);
        assert!(e.contains("expected 3 labels"), "{e}");
        // Wrong image dimensions.
        write_idx(&dir.join(MNIST_TRAIN_LABELS), &[3], &[7, 1, 2]).unwrap();
        write_idx(
            &dir.join(MNIST_TRAIN_IMAGES),
            &[3, 28, 27],
            &[0; 3 * 28 * 27],
        )
        .unwrap();
        let e = err(DatasetKind::Mnist);
        assert!(
            e.contains(MNIST_TRAIN_IMAGES) && e.contains("28 x 28"),
            "{e}"
        );
        // Wrong magic, truncated.
        std::fs::write(dir.join(MNIST_TRAIN_IMAGES), b"\x01\x02\x08\x03").unwrap();
        assert!(err(DatasetKind::Mnist).contains("bad magic"));
        write_split(&dir, Split::Train, 3, false);
        let full = std::fs::read(dir.join(MNIST_TRAIN_IMAGES)).unwrap();
        std::fs::write(dir.join(MNIST_TRAIN_IMAGES), &full[..full.len() - 10]).unwrap();
        let e = err(DatasetKind::Mnist);
        assert!(
            e.contains(MNIST_TRAIN_IMAGES) && e.contains("truncated"),
            "{e}"
        );
        // No test split, with the way to get one.
        let e = Dataset::idx(DatasetKind::FashionMnist, &dir, Split::Test)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(MNIST_TEST_IMAGES) && e.contains("test split") && e.contains("apt-get"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn synthetic_data_is_deterministic() {
        let a = Dataset::synthetic(16, 42).unwrap();
        let b = Dataset::synthetic(16, 42).unwrap();
        let (xa, ya) = a.slice(0..16).unwrap();
        let (xb, yb) = b.slice(0..16).unwrap();
        assert!(xa.equal(&xb) && ya.equal(&yb));
        assert!(Dataset::synthetic(0, 42).is_err());
    }
}
