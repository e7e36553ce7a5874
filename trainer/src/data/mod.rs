//! Datasets: 28x28 one-channel images with labels 0..10, either synthetic (deterministic from a
//! seed, learnable) or MNIST read from its IDX files.

use std::path::{Path, PathBuf};

use tch::{Kind, Tensor};

use crate::error::{Error, Result};
use crate::shard::SplitMix64;

/// Image side and class count of every dataset here (MNIST's).
pub const IMAGE_SIDE: usize = 28;
pub const NUM_CLASSES: usize = 10;

/// MNIST training files, as published (uncompressed).
pub const MNIST_TRAIN_IMAGES: &str = "train-images-idx3-ubyte";
pub const MNIST_TRAIN_LABELS: &str = "train-labels-idx1-ubyte";

/// Images `[N, 1, 28, 28]` (f32, normalized) and labels `[N]` (i64).
#[derive(Debug)]
pub struct Dataset {
    images: Tensor,
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
        Self::from_parts(images, labels)
    }

    /// MNIST's training set from `dir` (the IDX files, uncompressed).
    pub fn mnist(dir: &Path) -> Result<Self> {
        let images_path = dir.join(MNIST_TRAIN_IMAGES);
        let labels_path = dir.join(MNIST_TRAIN_LABELS);
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
        if labels.dims.len() != 1 || labels.dims[0] != images.dims[0] {
            return Err(data_err(
                &labels_path,
                format!(
                    "expected {} labels, found dimensions {:?}",
                    images.dims[0], labels.dims
                ),
            ));
        }
        if let Some(bad) = labels.data.iter().find(|&&l| l as usize >= NUM_CLASSES) {
            return Err(data_err(
                &labels_path,
                format!("label {bad} is not in 0..10"),
            ));
        }
        let pixels = images
            .data
            .iter()
            .map(|&p| (f32::from(p) / 255.0 - 0.1307) / 0.3081)
            .collect();
        Self::from_parts(pixels, labels.data.iter().map(|&l| i64::from(l)).collect())
    }

    fn from_parts(images: Vec<f32>, labels: Vec<i64>) -> Result<Self> {
        let n = labels.len() as i64;
        let side = IMAGE_SIDE as i64;
        Ok(Dataset {
            images: Tensor::from_slice(&images).f_view([n, 1, side, side])?,
            labels: Tensor::from_slice(&labels),
        })
    }

    pub fn len(&self) -> usize {
        self.labels.size()[0] as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples at `indices`: (images, labels).
    pub fn batch(&self, indices: &[usize]) -> Result<(Tensor, Tensor)> {
        let idx: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
        let idx = Tensor::from_slice(&idx).to_kind(Kind::Int64);
        Ok((
            self.images.f_index_select(0, &idx)?,
            self.labels.f_index_select(0, &idx)?,
        ))
    }
}

fn data_err(path: &Path, message: String) -> Error {
    Error::Data {
        path: path.to_path_buf(),
        message,
    }
}

/// An unsigned-byte IDX array: its dimensions and data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Reads an IDX file of unsigned bytes (type code 0x08), as MNIST's files are.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse_idx(&bytes).map_err(|message| data_err(path, message))
}

/// Parses IDX bytes: `0 0 type ndims`, big-endian u32 dimensions, then the data.
pub fn parse_idx(bytes: &[u8]) -> std::result::Result<IdxArray, String> {
    let header = bytes.get(..4).ok_or("shorter than the 4-byte IDX header")?;
    if header[0] != 0 || header[1] != 0 {
        return Err(format!(
            "bad magic {:02x}{:02x}: not an IDX file",
            header[0], header[1]
        ));
    }
    if header[2] != 0x08 {
        return Err(format!(
            "element type 0x{:02x} is not supported (only unsigned bytes, 0x08)",
            header[2]
        ));
    }
    let ndims = usize::from(header[3]);
    let dims_end = 4 + 4 * ndims;
    let dim_bytes = bytes
        .get(4..dims_end)
        .ok_or_else(|| format!("truncated: the header announces {ndims} dimensions"))?;
    let dims: Vec<usize> = dim_bytes
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or("dimensions overflow")?;
    let data = &bytes[dims_end..];
    if data.len() != count {
        return Err(format!(
            "dimensions {dims:?} need {count} bytes of data, the file has {}",
            data.len()
        ));
    }
    Ok(IdxArray {
        dims,
        data: data.to_vec(),
    })
}

/// Writes an unsigned-byte IDX file (used by tests to make small MNIST-like files).
pub fn write_idx(path: &Path, dims: &[usize], data: &[u8]) -> Result<()> {
    let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
    for &d in dims {
        let d = u32::try_from(d)
            .map_err(|_| data_err(path, format!("dimension {d} does not fit in u32")))?;
        bytes.extend(d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).map_err(|e| Error::io(PathBuf::from(path), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idx_round_trip_and_errors() {
        let dir = std::env::temp_dir().join(format!("tnt-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let images: Vec<u8> = (0..3 * 28 * 28).map(|i| (i % 251) as u8).collect();
        write_idx(&dir.join(MNIST_TRAIN_IMAGES), &[3, 28, 28], &images).unwrap();
        write_idx(&dir.join(MNIST_TRAIN_LABELS), &[3], &[7, 0, 9]).unwrap();
        let ds = Dataset::mnist(&dir).unwrap();
        assert_eq!(ds.len(), 3);
        let (x, y) = ds.batch(&[2, 0]).unwrap();
        assert_eq!(x.size(), [2, 1, 28, 28]);
        assert_eq!(Vec::<i64>::try_from(&y).unwrap(), [9, 7]);
        let first = x.get(1).flatten(0, -1).double_value(&[1]);
        assert!((first - ((1.0 / 255.0 - 0.1307) / 0.3081)).abs() < 1e-5);

        write_idx(&dir.join(MNIST_TRAIN_LABELS), &[3], &[7, 10, 9]).unwrap();
        assert!(Dataset::mnist(&dir)
            .unwrap_err()
            .to_string()
            .contains("label 10"));
        write_idx(&dir.join(MNIST_TRAIN_LABELS), &[2], &[7, 1]).unwrap();
        assert!(Dataset::mnist(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parse_rejects_malformed_bytes() {
        assert!(parse_idx(&[0, 0]).is_err());
        assert!(parse_idx(&[1, 0, 8, 1, 0, 0, 0, 1, 5]).is_err());
        assert!(parse_idx(&[0, 0, 0x0d, 1, 0, 0, 0, 1, 5]).is_err());
        assert!(parse_idx(&[0, 0, 8, 1, 0, 0, 0, 2, 5]).is_err());
        assert_eq!(
            parse_idx(&[0, 0, 8, 1, 0, 0, 0, 1, 5]).unwrap(),
            IdxArray {
                dims: vec![1],
                data: vec![5]
            }
        );
    }

    #[test]
    fn synthetic_data_is_deterministic() {
        let a = Dataset::synthetic(16, 42).unwrap();
        let b = Dataset::synthetic(16, 42).unwrap();
        assert!(a.images.equal(&b.images) && a.labels.equal(&b.labels));
        assert!(Dataset::synthetic(0, 42).is_err());
    }
}
