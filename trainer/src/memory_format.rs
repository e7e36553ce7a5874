//! Channels-last ("NHWC") memory format for convolutional models (`train --channels-last`,
//! PyTorch's `model.to(memory_format=torch.channels_last)`).
//!
//! An image tensor keeps its logical shape `[N, C, H, W]`; only its strides change, so that the
//! channels of one pixel lie next to each other. cuDNN's tensor-core convolutions work in that
//! layout: on NCHW tensors they transpose in and out around every convolution. A convolution
//! whose weight is channels-last computes in that format, and autograd gives each parameter a
//! gradient with the parameter's strides, so converting the model's 4-D weights once is enough.
//!
//! The gradient buckets copy each gradient into its range of the flat buffer in the gradient's
//! own memory order (`dense_view`), so channels-last gradients travel without a transposing
//! copy; the range's contents are then a permutation of the NCHW order, the same on every rank.
//!
//! ```
//! use tch::{Device, Kind, Tensor};
//! let x = Tensor::arange(24, (Kind::Float, Device::Cpu)).view([1, 2, 3, 4]);
//! let nhwc = trainer::memory_format::channels_last(&x)?;
//! assert_eq!(nhwc.size(), x.size());
//! assert_eq!(nhwc.stride(), [24, 1, 8, 2]);
//! assert!(nhwc.equal(&x));
//! # Ok::<(), trainer::Error>(())
//! ```

use tch::{nn, Tensor};

use crate::error::Result;

/// `t` in channels-last layout when it is 4-D (same shape and values: a copy, or `t` itself
/// where it already is, as for one channel or a 1x1 kernel, whose strides fit both layouts),
/// else a shallow clone.
pub fn channels_last(t: &Tensor) -> Result<Tensor> {
    if t.dim() != 4 {
        return Ok(t.shallow_clone());
    }
    // NHWC-contiguous storage seen as NCHW: exactly the strides of libtorch's
    // `contiguous(MemoryFormat::ChannelsLast)`, which tch does not expose.
    Ok(t.f_permute([0, 2, 3, 1])?
        .f_contiguous()?
        .f_permute([0, 3, 1, 2])?)
}

/// Converts every 4-D variable of `vs` (convolution weights) to channels-last in place, so
/// that every handle to them, the optimizer's included, sees the new layout. Call it before
/// the optimizer and the data-parallel wrapper are made (their state is created like the
/// parameters). Returns how many were converted.
pub fn convert_variables(vs: &nn::VarStore) -> Result<usize> {
    let mut converted = 0;
    for (_, mut var) in vs.variables() {
        if var.dim() == 4 {
            let nhwc = channels_last(&var)?;
            tch::no_grad(|| var.f_set_data(&nhwc))?;
            converted += 1;
        }
    }
    Ok(converted)
}

/// Whether a tensor of `size` and `stride` covers its elements exactly once in a block of
/// `numel` elements (dense and non-overlapping, in whatever dimension order).
fn is_dense(size: &[i64], stride: &[i64]) -> bool {
    let mut dims: Vec<(i64, i64)> = size
        .iter()
        .zip(stride)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (s, n))
        .collect();
    dims.sort_unstable();
    let mut expected = 1;
    for (s, n) in dims {
        if s != expected {
            return false;
        }
        expected *= n;
    }
    true
}

/// `range` (1-D, `like.numel()` elements) seen with `like`'s shape and, when `like` is dense,
/// its strides: a copy between the two then moves the elements in memory order. For any other
/// `like` (not produced by autograd for dense parameters) the view is row-major; the copy is
/// still right, only slower.
pub(crate) fn dense_view(range: &Tensor, like: &Tensor) -> Result<Tensor> {
    let (size, stride) = (like.size(), like.stride());
    if like.is_contiguous() || !is_dense(&size, &stride) {
        return Ok(range.f_view(size.as_slice())?);
    }
    Ok(range.f_as_strided(size.as_slice(), stride.as_slice(), None)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn density_is_read_from_strides_in_any_order() {
        assert!(is_dense(&[2, 3, 4, 5], &[60, 20, 5, 1]));
        assert!(is_dense(&[2, 3, 4, 5], &[60, 1, 15, 3]));
        assert!(
            is_dense(&[8, 3, 1, 1], &[3, 1, 3, 3]),
            "size-1 dims are ignored"
        );
        assert!(!is_dense(&[2, 3], &[6, 1]), "gaps");
        assert!(!is_dense(&[2, 3], &[1, 1]), "overlap");
        assert!(!is_dense(&[4], &[2]), "a strided slice");
    }

    #[test]
    fn a_dense_view_moves_channels_last_gradients_in_memory_order() -> Result<()> {
        let g = Tensor::randn([2, 3, 4, 5], (Kind::Float, Device::Cpu));
        let nhwc = channels_last(&g)?;
        assert_eq!(nhwc.stride(), [60, 1, 15, 3]);
        let flat = Tensor::zeros([200], (Kind::Float, Device::Cpu));
        let mut range = dense_view(&flat.narrow(0, 40, 120), &nhwc)?;
        tch::no_grad(|| range.f_copy_(&nhwc))?;
        // In memory order: the flat range holds the NHWC storage as it is.
        let expected = g.permute([0, 2, 3, 1]).contiguous().view([-1]);
        assert!(flat.narrow(0, 40, 120).equal(&expected));
        assert_eq!(
            flat.narrow(0, 0, 40).count_nonzero(None).int64_value(&[]),
            0
        );
        // And back: the same view gives the logical values again.
        let mut back = channels_last(&Tensor::zeros_like(&g))?;
        let range = dense_view(&flat.narrow(0, 40, 120), &back)?;
        tch::no_grad(|| back.f_copy_(&range))?;
        assert!(back.equal(&g));
        Ok(())
    }

    #[test]
    fn converted_variables_keep_their_values_and_train() -> Result<()> {
        let vs = nn::VarStore::new(Device::Cpu);
        let conv = nn::conv2d(vs.root() / "c", 3, 4, 3, Default::default());
        let lin = nn::linear(vs.root() / "l", 4, 2, Default::default());
        let before = conv.ws.copy();
        assert_eq!(convert_variables(&vs)?, 1, "only the 4-D weight");
        assert!(conv.ws.equal(&before));
        assert_eq!(conv.ws.stride(), [27, 1, 9, 3]);
        assert_eq!(lin.ws.stride(), [4, 1]);
        let x = Tensor::randn([2, 3, 5, 5], (Kind::Float, Device::Cpu));
        let y = x.apply(&conv).mean_dim(&[2i64, 3][..], false, Kind::Float);
        y.apply(&lin).sum(Kind::Float).backward();
        assert_eq!(
            conv.ws.grad().stride(),
            conv.ws.stride(),
            "the gradient's layout"
        );
        Ok(())
    }
}
