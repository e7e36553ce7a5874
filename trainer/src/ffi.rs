//! Calls into the C++ hook shim (`csrc/hooks.cpp`); with `stream` (device streams, events,
//! copies), `multi_tensor` (lists of tensors), `pinned` (page-locking) and `staging` (tensors
//! over segment memory), the crate's only `unsafe` code.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use tch::Tensor;

use crate::error::{Error, Result};

/// Called by the shim from the autograd engine's thread: (opaque state, parameter index).
type ReadyFn = extern "C" fn(*mut c_void, usize);
/// Called by the shim once at the end of a backward pass.
type DoneFn = extern "C" fn(*mut c_void);

/// What the hooks call into. Runs on the autograd engine's thread, so it must be `Sync`; a
/// panic is caught by the trampoline and reported through [`HookTarget::hook_panicked`].
pub(crate) trait HookTarget: Send + Sync + 'static {
    /// Parameter `index`'s gradient has been accumulated.
    fn param_ready(&self, index: usize);
    /// The backward pass that called `param_ready` ended.
    fn backward_done(&self);
    /// A callback panicked (a bug); the step must fail instead of hanging.
    fn hook_panicked(&self);
}

extern "C" fn ready_trampoline<T: HookTarget>(state: *mut c_void, index: usize) {
    // SAFETY: `state` is `Arc::as_ptr` of a `T` that the owner of the hooks keeps alive until
    // it has cleared every hook (see `set_post_acc_grad_hook`).
    let target = unsafe { &*(state as *const T) };
    if catch_unwind(AssertUnwindSafe(|| target.param_ready(index))).is_err() {
        let _ = catch_unwind(AssertUnwindSafe(|| target.hook_panicked()));
    }
}

extern "C" fn done_trampoline<T: HookTarget>(state: *mut c_void) {
    // SAFETY: as in `ready_trampoline`; the callback runs within the backward pass, while the
    // hooks (and so the target) are alive.
    let target = unsafe { &*(state as *const T) };
    if catch_unwind(AssertUnwindSafe(|| target.backward_done())).is_err() {
        let _ = catch_unwind(AssertUnwindSafe(|| target.hook_panicked()));
    }
}

extern "C" {
    fn tnt_free_error(error: *mut c_char);
    fn tnt_set_post_acc_grad_hook(
        tensor: *mut c_void,
        f: ReadyFn,
        state: *mut c_void,
        index: usize,
        error: *mut *mut c_char,
    ) -> i32;
    fn tnt_clear_post_acc_grad_hook(tensor: *mut c_void, error: *mut *mut c_char) -> i32;
    fn tnt_queue_end_of_backward(f: DoneFn, state: *mut c_void, error: *mut *mut c_char) -> i32;
}

/// Turns the hook shim's (status, heap message) into a `Result`, freeing the message.
fn check(status: i32, error: *mut c_char) -> Result<()> {
    shim_result(status, error).map_err(Error::Hook)
}

/// Turns any shim call's (status, heap message) into the message, freeing it.
pub(crate) fn shim_result(status: i32, error: *mut c_char) -> std::result::Result<(), String> {
    if status == 0 {
        return Ok(());
    }
    let message = if error.is_null() {
        "unknown error (no message)".to_owned()
    } else {
        // SAFETY: a non-null `error` is a NUL-terminated string malloc'ed by the shim and
        // owned by us until `tnt_free_error`.
        let text = unsafe { CStr::from_ptr(error) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: freed exactly once, with the shim's allocator.
        unsafe { tnt_free_error(error) };
        text
    };
    Err(message)
}

/// Installs a post-accumulate-grad hook on `param` that calls `target.param_ready(index)` after
/// its gradient has been accumulated in each backward pass. Replaces any previous such hook.
///
/// The caller must keep `target` alive (hold a clone of the `Arc`) until it has removed the
/// hook with [`clear_post_acc_grad_hook`].
pub(crate) fn set_post_acc_grad_hook<T: HookTarget>(
    param: &Tensor,
    target: &Arc<T>,
    index: usize,
) -> Result<()> {
    let f: ReadyFn = ready_trampoline::<T>;
    let state = Arc::as_ptr(target) as *mut c_void;
    let mut error = std::ptr::null_mut();
    // SAFETY: `as_ptr` is the live `torch::Tensor*` owned by `param`, which outlives this call;
    // the shim only reads it and catches every C++ exception.
    let status = unsafe {
        tnt_set_post_acc_grad_hook(param.as_ptr() as *mut c_void, f, state, index, &mut error)
    };
    check(status, error)
}

/// Removes the post-accumulate-grad hook of `param` (no-op when it has none).
pub(crate) fn clear_post_acc_grad_hook(param: &Tensor) -> Result<()> {
    let mut error = std::ptr::null_mut();
    // SAFETY: as in `set_post_acc_grad_hook`.
    let status = unsafe { tnt_clear_post_acc_grad_hook(param.as_ptr() as *mut c_void, &mut error) };
    check(status, error)
}

/// Queues `target.backward_done()` to run when the current backward pass ends. Only valid while
/// the autograd engine runs a backward pass (call it from a hook); otherwise an error.
pub(crate) fn queue_end_of_backward<T: HookTarget>(target: &T) -> Result<()> {
    let f: DoneFn = done_trampoline::<T>;
    let state = target as *const T as *mut c_void;
    let mut error = std::ptr::null_mut();
    // SAFETY: the shim copies (f, state) into a closure and catches every C++ exception; the
    // callback runs inside this backward pass, while the hooks keep `target` alive.
    let status = unsafe { tnt_queue_end_of_backward(f, state, &mut error) };
    check(status, error)
}
