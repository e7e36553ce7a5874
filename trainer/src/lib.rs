//! Data-parallel training of libtorch (tch) models over GASPI: Tarantella's model in Rust.
//!
//! - [`DataParallel`] wraps a model's [`tch::nn::VarStore`]: it broadcasts rank 0's initial
//!   weights, installs a post-accumulate-grad hook on every parameter (through a small C++
//!   shim, as PyTorch DDP's reducer does), packs gradients into buckets with [`fusion`], and
//!   starts each bucket's allreduce on a communication thread as soon as the bucket is
//!   complete, while backward continues. `backward` returns when every rank holds the summed
//!   gradients.
//! - Global-batch semantics: the user gives the **global** batch size B; rank r of p gets
//!   `B / p` samples (+1 for `r < B % p`, see [`shard`]) of the same shuffled order on every
//!   rank, and the loss is the sum over local samples divided by B ([`global_batch_loss`]).
//!   With SUM allreduce this is exactly the gradient of the global batch's mean loss, so p ranks
//!   train like one, up to float summation order.
//! - libtorch runs with one intra-op thread per rank by default (the `train` binary calls
//!   `tch::set_num_threads(1)`; `--threads` changes it): ranks on one host would otherwise
//!   oversubscribe the cores.
//!
//! ```
//! use tch::nn::{self, ModuleT};
//! use trainer::{global_batch_loss, Comm, DataParallel, DdpConfig, Optimizer, OptimizerKind};
//!
//! # fn main() -> trainer::Result<()> {
//! let comm = Comm::init()?; // the job from `tarantella -n N -- prog`, or one rank
//! tch::manual_seed(42);
//! let vs = nn::VarStore::new(tch::Device::Cpu);
//! let model = nn::seq_t().add(nn::linear(vs.root() / "fc", 4, 2, Default::default()));
//! let mut ddp = DataParallel::new(&comm, &vs, DdpConfig::default())?; // broadcasts weights
//! let mut opt = Optimizer::new(OptimizerKind::sgd(), ddp.params(), 0.1)?;
//!
//! let global_batch = 8;
//! let range = trainer::shard::micro_batch_range(global_batch, comm.size(), comm.rank())?;
//! let x = tch::Tensor::randn([range.len() as i64, 4], (tch::Kind::Float, tch::Device::Cpu));
//! let y = tch::Tensor::zeros([range.len() as i64], (tch::Kind::Int64, tch::Device::Cpu));
//! ddp.zero_grad();
//! let (loss, _local_sum) = global_batch_loss(&model.forward_t(&x, true), &y, global_batch)?;
//! ddp.backward(&loss)?; // allreduces overlap with backward
//! opt.step()?;
//! # Ok(()) }
//! ```

pub mod callbacks;
pub mod checkpoint;
mod clock;
mod comm;
pub mod data;
mod ddp;
pub mod device;
mod error;
pub mod evaluate;
mod ffi;
pub mod fit;
mod grad_dtype;
mod hooks;
pub mod idx;
pub mod manifest;
pub mod memory_format;
pub mod metrics;
pub mod models;
mod multi_tensor;
pub mod optim;
mod pinned;
pub mod profile;
pub mod progress;
mod reducer;
pub mod restore;
pub mod schedule;
pub mod shard;
mod staging;
mod stream;
pub mod synthetic;
pub mod testdata;

pub use clock::now_ns;
pub use comm::{Comm, DEFAULT_COMM_TIMEOUT};
pub use ddp::{broadcast_tensors, broadcast_variables, weights_checksum, DataParallel, DdpConfig};
pub use error::{Error, HookFailure, HookFailures, Result};
pub use grad_dtype::GradDtype;
pub use hooks::StepTrace;
pub use optim::{Optimizer, OptimizerKind};

/// Cross-entropy of `logits` `[n, classes]` against `labels` `[n]` as the global-batch loss:
/// the **sum** over the `n` local samples divided by `global_batch`. Returns the loss tensor
/// (to call backward on) and the local sum, detached, for metrics: it stays on the logits'
/// device until read, so that reading it does not make the host wait for the GPU's forward
/// before backward is queued.
pub fn global_batch_loss(
    logits: &tch::Tensor,
    labels: &tch::Tensor,
    global_batch: usize,
) -> Result<(tch::Tensor, tch::Tensor)> {
    if global_batch == 0 {
        return Err(Error::Config(
            "the global batch size must be positive".into(),
        ));
    }
    let sum = logits.f_log_softmax(-1, tch::Kind::Float)?.f_nll_loss(
        labels,
        None::<tch::Tensor>,
        tch::Reduction::Sum,
        -100,
    )?;
    let local_sum = sum.f_detach()?;
    Ok((sum / global_batch as f64, local_sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_batch_loss_is_the_local_sum_over_the_global_batch() {
        let logits = tch::Tensor::from_slice(&[0.0f32, 0.0, 0.0, 0.0]).view([2, 2]);
        let labels = tch::Tensor::from_slice(&[0i64, 1]);
        let (loss, sum) = global_batch_loss(&logits, &labels, 8).unwrap();
        let ln2 = std::f64::consts::LN_2;
        assert!((sum.double_value(&[]) - 2.0 * ln2).abs() < 1e-6);
        assert!((loss.double_value(&[]) - 2.0 * ln2 / 8.0).abs() < 1e-6);
        assert!(global_batch_loss(&logits, &labels, 0).is_err());
    }
}
