//! Synthetic inputs for the full-size models (ImageNet-shaped images, token sequences), kept
//! on the training device as Tarantella's ResNet-50 benchmark does: a pool of random samples
//! made once from the seed, and sample i of the dataset is pool entry `i mod pool`, so a batch
//! is gathered on the device (no input pipeline, no host-to-device copy per step) and each
//! sample is the same on every rank whatever the number of ranks.

use tch::{Device, Tensor};

use crate::error::{Error, Result};
use crate::models::ModelInput;
use crate::shard::SplitMix64;

/// Distinct samples in the pool (a dataset of any length cycles through them).
const POOL: i64 = 32;

/// A synthetic dataset of `len` samples resident on one device.
#[derive(Debug)]
pub struct DeviceSynthetic {
    inputs: Tensor,
    labels: Tensor,
    len: usize,
}

impl DeviceSynthetic {
    /// `len` samples shaped for `input` on `device`, reproducible from `seed`.
    pub fn new(input: ModelInput, len: usize, seed: u64, device: Device) -> Result<Self> {
        if len == 0 {
            return Err(Error::Config(
                "the synthetic dataset needs at least one sample".into(),
            ));
        }
        // Made on the CPU from the seed with our own generator (the same on every rank and
        // device, and independent of libtorch's global RNG), then moved to the device once.
        let mut rng = SplitMix64::new(seed ^ 0x5eed_da7a);
        let (inputs, classes) = match input {
            ModelInput::Images {
                channels,
                side,
                classes,
            } => {
                let n = (POOL * channels * side * side) as usize;
                // Uniform on [-sqrt 3, sqrt 3): zero mean, unit variance, like normalized pixels.
                let values: Vec<f32> = (0..n)
                    .map(|_| (rng.next_f32() * 2.0 - 1.0) * 3f32.sqrt())
                    .collect();
                let t = Tensor::from_slice(&values).f_view([POOL, channels, side, side])?;
                (t, classes)
            }
            ModelInput::Tokens {
                seq_len,
                vocab,
                classes,
            } => {
                let ids: Vec<i64> = (0..POOL * seq_len)
                    .map(|_| rng.below(vocab as u64) as i64)
                    .collect();
                (Tensor::from_slice(&ids).f_view([POOL, seq_len])?, classes)
            }
            ModelInput::Mnist => {
                return Err(Error::Config(
                    "the MNIST-shaped models use --dataset synthetic|mnist|fashion-mnist".into(),
                ))
            }
        };
        let labels: Vec<i64> = (0..POOL)
            .map(|_| rng.below(classes as u64) as i64)
            .collect();
        let labels = Tensor::from_slice(&labels);
        Ok(DeviceSynthetic {
            inputs: inputs.f_to_device(device)?,
            labels: labels.f_to_device(device)?,
            len,
        })
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The samples at `indices`, gathered on the device.
    pub fn batch(&self, indices: &[usize]) -> Result<(Tensor, Tensor)> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.len) {
            return Err(Error::Config(format!(
                "sample index {bad} is out of range for a dataset of {}",
                self.len
            )));
        }
        let rows: Vec<i64> = indices.iter().map(|&i| i as i64 % POOL).collect();
        let rows = Tensor::from_slice(&rows).f_to_device(self.inputs.device())?;
        Ok((
            self.inputs.f_index_select(0, &rows)?,
            self.labels.f_index_select(0, &rows)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_depend_only_on_seed_and_index() {
        let input = ModelInput::Tokens {
            seq_len: 8,
            vocab: 100,
            classes: 2,
        };
        let a = DeviceSynthetic::new(input, 100, 7, Device::Cpu).unwrap();
        let b = DeviceSynthetic::new(input, 100, 7, Device::Cpu).unwrap();
        let (xa, ya) = a.batch(&[3, 70, 35]).unwrap();
        let (xb, yb) = b.batch(&[35, 3]).unwrap();
        assert_eq!(xa.size(), [3, 8]);
        assert!(xa.get(0).equal(&xb.get(1)) && ya.get(2).equal(&yb.get(0)));
        // 35 = 3 + 32: the pool cycles.
        assert!(xa.get(0).equal(&xa.get(2)));
        assert!(a.batch(&[100]).is_err());
        let images = ModelInput::Images {
            channels: 3,
            side: 16,
            classes: 1000,
        };
        let c = DeviceSynthetic::new(images, 10, 7, Device::Cpu).unwrap();
        assert_eq!(c.batch(&[0, 1]).unwrap().0.size(), [2, 3, 16, 16]);
        assert!(DeviceSynthetic::new(ModelInput::Mnist, 10, 7, Device::Cpu).is_err());
    }
}
