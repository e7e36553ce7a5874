//! Which device a rank trains on: `--device auto|cpu|cuda|cuda:N`.
//!
//! Under the launcher every rank sees the GPUs its environment exposes (`CUDA_VISIBLE_DEVICES`
//! is inherited, not rewritten per rank), and rank r of a host takes `cuda:(local_rank mod
//! visible GPUs)`, so several ranks may share one GPU. `auto` falls back to the CPU when there
//! is no GPU; an explicit `cuda` without one is an error.

use std::fmt;
use std::str::FromStr;

use tch::Device;

use crate::error::{Error, Result};

/// What the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceArg {
    /// CUDA when a GPU is visible, else the CPU.
    #[default]
    Auto,
    /// The CPU, even when a GPU is visible.
    Cpu,
    /// A GPU: the given index, or `local_rank mod visible GPUs`.
    Cuda(Option<usize>),
}

impl FromStr for DeviceArg {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(DeviceArg::Auto),
            "cpu" => Ok(DeviceArg::Cpu),
            "cuda" | "gpu" => Ok(DeviceArg::Cuda(None)),
            _ => match s.strip_prefix("cuda:") {
                Some(n) => n
                    .parse()
                    .map(|n| DeviceArg::Cuda(Some(n)))
                    .map_err(|_| format!("`{s}`: the device index after `cuda:` must be a number")),
                None => Err(format!("`{s}`: expected auto, cpu, cuda or cuda:N")),
            },
        }
    }
}

impl fmt::Display for DeviceArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceArg::Auto => f.write_str("auto"),
            DeviceArg::Cpu => f.write_str("cpu"),
            DeviceArg::Cuda(None) => f.write_str("cuda"),
            DeviceArg::Cuda(Some(n)) => write!(f, "cuda:{n}"),
        }
    }
}

/// The device a rank uses and, for a GPU, how many ranks of its host share it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The device the rank trains on.
    pub device: Device,
    /// Ranks of this host on the same GPU (1 on the CPU).
    pub ranks_sharing: usize,
}

/// Resolves `arg` for the rank `local_rank` of `local_ranks` on a host with `visible_gpus`
/// GPUs. Pure, so the mapping is tested without GPUs.
pub fn place(
    arg: DeviceArg,
    local_rank: usize,
    local_ranks: usize,
    visible_gpus: usize,
) -> Result<Placement> {
    let on_gpu = |index: usize| {
        // Ranks r with r mod g == index share GPU `index`.
        let sharing = (0..local_ranks.max(1))
            .filter(|r| r % visible_gpus == index)
            .count()
            .max(1);
        Placement {
            device: Device::Cuda(index),
            ranks_sharing: sharing,
        }
    };
    match arg {
        DeviceArg::Cpu => Ok(Placement {
            device: Device::Cpu,
            ranks_sharing: 1,
        }),
        DeviceArg::Auto if visible_gpus == 0 => Ok(Placement {
            device: Device::Cpu,
            ranks_sharing: 1,
        }),
        DeviceArg::Auto | DeviceArg::Cuda(None) if visible_gpus > 0 => {
            Ok(on_gpu(local_rank % visible_gpus))
        }
        DeviceArg::Cuda(Some(n)) if n < visible_gpus => Ok(Placement {
            device: Device::Cuda(n),
            ranks_sharing: 1,
        }),
        DeviceArg::Cuda(Some(n)) if visible_gpus > 0 => Err(Error::Device(format!(
            "--device cuda:{n}: this process sees {visible_gpus} GPU(s) (cuda:0..cuda:{}); \
             CUDA_VISIBLE_DEVICES={}",
            visible_gpus - 1,
            std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "(unset)".into())
        ))),
        DeviceArg::Cuda(_) | DeviceArg::Auto => Err(Error::Device(format!(
            "--device {arg}: no CUDA GPU is available to this process ({}); use --device cpu \
             or auto",
            no_gpu_reason()
        ))),
    }
}

/// Why libtorch sees no GPU, as far as we can tell.
fn no_gpu_reason() -> String {
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) if v.trim().is_empty() => {
            "CUDA_VISIBLE_DEVICES is empty (tarantella --no-gpu sets that)".into()
        }
        _ if !std::path::Path::new("/proc/driver/nvidia").exists() => {
            "no NVIDIA driver on this host".into()
        }
        _ => "libtorch found no usable CUDA device".into(),
    }
}

/// Resolves `arg` for this process (`local_rank` of `local_ranks` on its host) against the
/// GPUs libtorch sees.
pub fn select(arg: DeviceArg, local_rank: usize, local_ranks: usize) -> Result<Placement> {
    let visible = if arg == DeviceArg::Cpu {
        0
    } else {
        tch::Cuda::device_count().max(0) as usize
    };
    place(arg, local_rank, local_ranks, visible)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!("auto".parse(), Ok(DeviceArg::Auto));
        assert_eq!("cpu".parse(), Ok(DeviceArg::Cpu));
        assert_eq!("cuda".parse(), Ok(DeviceArg::Cuda(None)));
        assert_eq!("cuda:3".parse(), Ok(DeviceArg::Cuda(Some(3))));
        assert!("cuda:x".parse::<DeviceArg>().is_err());
        assert!("tpu".parse::<DeviceArg>().is_err());
        for s in ["auto", "cpu", "cuda", "cuda:2"] {
            assert_eq!(s.parse::<DeviceArg>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn ranks_take_local_rank_mod_visible_gpus() {
        let p = |r, n, g| place(DeviceArg::Auto, r, n, g).unwrap();
        assert_eq!(p(0, 4, 2).device, Device::Cuda(0));
        assert_eq!(p(1, 4, 2).device, Device::Cuda(1));
        assert_eq!(p(2, 4, 2).device, Device::Cuda(0));
        assert_eq!(p(3, 4, 2).ranks_sharing, 2);
        assert_eq!(p(2, 3, 2).ranks_sharing, 2);
        assert_eq!(p(1, 3, 2).ranks_sharing, 1);
        assert_eq!(p(1, 2, 1).device, Device::Cuda(0));
        assert_eq!(p(1, 2, 1).ranks_sharing, 2);
        assert_eq!(p(0, 1, 8).ranks_sharing, 1);
    }

    #[test]
    fn auto_falls_back_to_cpu_and_explicit_cuda_fails_without_gpus() {
        assert_eq!(place(DeviceArg::Auto, 1, 2, 0).unwrap().device, Device::Cpu);
        assert_eq!(place(DeviceArg::Cpu, 1, 2, 4).unwrap().device, Device::Cpu);
        let e = place(DeviceArg::Cuda(None), 0, 1, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no CUDA GPU"), "{e}");
        let e = place(DeviceArg::Cuda(Some(2)), 0, 1, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cuda:0..cuda:1"), "{e}");
        assert_eq!(
            place(DeviceArg::Cuda(Some(1)), 0, 1, 2).unwrap().device,
            Device::Cuda(1)
        );
    }
}
