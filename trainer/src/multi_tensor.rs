//! Multi-tensor operations through the C++ shim (`csrc/multi_tensor.cpp`, libtorch's
//! `_foreach_*` ops): one call for a list of tensors, a few kernel launches on a GPU instead of
//! one or more per tensor. Used where a step touches every parameter: the optimizer updates (SGD,
//! Adam, AdamW) and the packing and unpacking of gradient buckets.

use std::ffi::{c_char, c_int, c_void};

use tch::Tensor;

use crate::error::{Error, Result};
use crate::ffi::shim_result;

extern "C" {
    fn tnt_foreach_copy(
        dst: *const *mut c_void,
        src: *const *mut c_void,
        n: usize,
        error: *mut *mut c_char,
    ) -> c_int;
    fn tnt_sgd_step(
        params: *const *mut c_void,
        grads: *const *mut c_void,
        momenta: *const *mut c_void,
        n: usize,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
        error: *mut *mut c_char,
    ) -> c_int;
    fn tnt_adam_step(
        params: *const *mut c_void,
        grads: *const *mut c_void,
        exp_avgs: *const *mut c_void,
        exp_avg_sqs: *const *mut c_void,
        n: usize,
        update: *const AdamUpdate,
        error: *mut *mut c_char,
    ) -> c_int;
}

/// One Adam or AdamW update (the shim's `TntAdamUpdate`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamUpdate {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// The update's number, from 1 (bias correction).
    pub step: f64,
    /// 0: Adam, weight decay as L2 in the gradient; 1: AdamW, decoupled weight decay.
    pub decoupled: c_int,
}

fn handles(tensors: &[Tensor]) -> Vec<*mut c_void> {
    tensors.iter().map(|t| t.as_ptr() as *mut c_void).collect()
}

fn libtorch_error(message: String) -> Error {
    Error::Torch(tch::TchError::Torch(message))
}

/// Runs one shim call with its error out-parameter and turns a failure into a libtorch error.
fn shim_call(call: impl FnOnce(*mut *mut c_char) -> c_int) -> Result<()> {
    let mut error = std::ptr::null_mut();
    let status = call(&mut error);
    shim_result(status, error).map_err(libtorch_error)
}

fn check_lengths(what: &str, a: usize, b: usize) -> Result<()> {
    if a == b {
        return Ok(());
    }
    Err(libtorch_error(format!(
        "{what}: lists of {a} and {b} tensors (must be equal)"
    )))
}

/// `dst[i].copy_(src[i], non_blocking = true)` for every `i`, converting dtypes, on the
/// current stream; element counts and shapes must match pairwise.
pub(crate) fn foreach_copy(dst: &[Tensor], src: &[Tensor]) -> Result<()> {
    check_lengths("copying tensors", dst.len(), src.len())?;
    if dst.is_empty() {
        return Ok(());
    }
    let (d, s) = (handles(dst), handles(src));
    // SAFETY: `d` and `s` hold `dst.len()` live `at::Tensor*` each (the slices outlive the
    // call); the shim catches every exception (mismatched shapes or devices).
    shim_call(|error| unsafe { tnt_foreach_copy(d.as_ptr(), s.as_ptr(), d.len(), error) })
}

/// The SGD update of `params` from `grads` (PyTorch's formula, see `csrc/multi_tensor.cpp`);
/// `momenta` holds one buffer per parameter when `momentum != 0`.
pub(crate) fn sgd_step(
    params: &[Tensor],
    grads: &[Tensor],
    momenta: &[Tensor],
    lr: f64,
    momentum: f64,
    weight_decay: f64,
) -> Result<()> {
    check_lengths("SGD gradients", params.len(), grads.len())?;
    if momentum != 0.0 {
        check_lengths("SGD momentum buffers", params.len(), momenta.len())?;
    }
    if params.is_empty() {
        return Ok(());
    }
    let (p, g, m) = (handles(params), handles(grads), handles(momenta));
    // SAFETY: as in `foreach_copy`; `m` is read only when momentum is non-zero, and then holds
    // as many handles as `p` (checked above).
    shim_call(|error| unsafe {
        tnt_sgd_step(
            p.as_ptr(),
            g.as_ptr(),
            m.as_ptr(),
            p.len(),
            lr,
            momentum,
            weight_decay,
            error,
        )
    })
}

/// The Adam or AdamW update of `params` from `grads` (PyTorch's formula without amsgrad, see
/// `csrc/multi_tensor.cpp`), with one first- and second-moment buffer per parameter.
pub(crate) fn adam_step(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    update: &AdamUpdate,
) -> Result<()> {
    check_lengths("Adam gradients", params.len(), grads.len())?;
    check_lengths("Adam first moments", params.len(), exp_avgs.len())?;
    check_lengths("Adam second moments", params.len(), exp_avg_sqs.len())?;
    if params.is_empty() {
        return Ok(());
    }
    let (p, g) = (handles(params), handles(grads));
    let (m, v) = (handles(exp_avgs), handles(exp_avg_sqs));
    // SAFETY: as in `foreach_copy`, four lists of `p.len()` handles (checked above); `update`
    // is a live `#[repr(C)]` value of the shim's layout, read during the call only.
    shim_call(|error| unsafe {
        tnt_adam_step(
            p.as_ptr(),
            g.as_ptr(),
            m.as_ptr(),
            v.as_ptr(),
            p.len(),
            update,
            error,
        )
    })
}
