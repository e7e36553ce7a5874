//! Small MNIST-layout IDX files with learnable content, for tests and examples that should not
//! need the real datasets: each class is a bright horizontal band at its own height, plus noise.

use std::path::Path;

use crate::data::{Split, IMAGE_SIDE, NUM_CLASSES};
use crate::error::Result;
use crate::idx::{write_idx, write_idx_gz};
use crate::shard::SplitMix64;

type WriteIdx = fn(&Path, &[usize], &[u8]) -> Result<()>;

/// Writes `split` with `n` samples into `dir` (gzip-compressed when `gz`, with `.gz` names).
/// Sample `i` has label `i % 10` shuffled by `seed`; the same arguments give the same bytes.
pub fn write_split(dir: &Path, split: Split, n: usize, gz: bool, seed: u64) -> Result<()> {
    let mut rng = SplitMix64::new(seed ^ if split == Split::Train { 1 } else { 2 });
    let mut images = Vec::with_capacity(n * IMAGE_SIDE * IMAGE_SIDE);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let class = rng.below(NUM_CLASSES as u64) as usize;
        labels.push(class as u8);
        for row in 0..IMAGE_SIDE {
            let band = row / 2 == class + 2;
            for _ in 0..IMAGE_SIDE {
                let noise = rng.below(96) as u8;
                images.push(if band { 160 + noise } else { noise });
            }
        }
    }
    let (images_name, labels_name) = split.file_names();
    let (write, suffix): (WriteIdx, &str) = if gz {
        (write_idx_gz, ".gz")
    } else {
        (write_idx, "")
    };
    write(
        &dir.join(format!("{images_name}{suffix}")),
        &[n, IMAGE_SIDE, IMAGE_SIDE],
        &images,
    )?;
    write(&dir.join(format!("{labels_name}{suffix}")), &[n], &labels)
}

/// Both splits: `train` and `test` samples.
pub fn write_dataset(dir: &Path, train: usize, test: usize, gz: bool, seed: u64) -> Result<()> {
    write_split(dir, Split::Train, train, gz, seed)?;
    write_split(dir, Split::Test, test, gz, seed)
}
