//! CUDA streams and events, and autocast, through the C++ shim (`csrc/streams.cpp`, libtorch's
//! device-generic c10 API). One of the crate's few `unsafe` modules (see `ffi`): every
//! handle here is owned, freed once on drop, and used only through these wrappers.

use std::ffi::{c_char, c_int, c_void};

use tch::Kind;

use crate::error::{Error, Result};
use crate::ffi::shim_result;

fn check(status: c_int, error: *mut c_char) -> Result<()> {
    shim_result(status, error).map_err(Error::Device)
}

extern "C" {
    fn tnt_set_device(index: c_int, error: *mut *mut c_char) -> c_int;
    fn tnt_stream_from_pool(index: c_int, out: *mut *mut c_void, error: *mut *mut c_char) -> c_int;
    fn tnt_stream_current(index: c_int, out: *mut *mut c_void, error: *mut *mut c_char) -> c_int;
    fn tnt_stream_free(stream: *mut c_void);
    fn tnt_stream_exchange(
        stream: *mut c_void,
        previous: *mut *mut c_void,
        error: *mut *mut c_char,
    ) -> c_int;
    fn tnt_stream_synchronize(stream: *mut c_void, error: *mut *mut c_char) -> c_int;
    fn tnt_event_new(out: *mut *mut c_void, error: *mut *mut c_char) -> c_int;
    fn tnt_event_free(event: *mut c_void);
    fn tnt_event_record(event: *mut c_void, stream: *mut c_void, error: *mut *mut c_char) -> c_int;
    fn tnt_event_block(event: *mut c_void, stream: *mut c_void, error: *mut *mut c_char) -> c_int;
    fn tnt_event_query(event: *mut c_void, done: *mut c_int, error: *mut *mut c_char) -> c_int;
    fn tnt_record_tensor_stream(
        tensor: *mut c_void,
        stream: *mut c_void,
        error: *mut *mut c_char,
    ) -> c_int;
    fn tnt_cuda_allocated_bytes(index: c_int, out: *mut i64, error: *mut *mut c_char) -> c_int;
    fn tnt_copy_async(dst: *mut c_void, src: *mut c_void, error: *mut *mut c_char) -> c_int;
    fn tnt_autocast_enter(
        device: c_int,
        dtype: c_int,
        prev_enabled: *mut c_int,
        prev_dtype: *mut c_int,
        error: *mut *mut c_char,
    ) -> c_int;
    fn tnt_autocast_exit(
        device: c_int,
        prev_enabled: c_int,
        prev_dtype: c_int,
        error: *mut *mut c_char,
    ) -> c_int;
}

fn device_index(index: usize) -> Result<c_int> {
    c_int::try_from(index)
        .map_err(|_| Error::Config(format!("CUDA device {index} is out of range")))
}

/// Makes `device` the calling thread's current CUDA device (nothing for the CPU). Call it on
/// every thread that works with a rank's GPU, before anything else: c10 restores a thread's
/// previous device after its event and stream calls, and a thread that never chose one would
/// get device 0, creating a context there in every rank of the host.
pub(crate) fn set_current_device(device: tch::Device) -> Result<()> {
    let tch::Device::Cuda(index) = device else {
        return Ok(());
    };
    let mut error = std::ptr::null_mut();
    // SAFETY: a plain value in; the shim catches every exception.
    let status = unsafe { tnt_set_device(device_index(index)?, &mut error) };
    check(status, error)
}

/// A CUDA stream of one device.
pub(crate) struct Stream {
    handle: *mut c_void,
}

// SAFETY: a `c10::Stream` is a plain value (device, id); the shim copies it on every use and
// libtorch's stream calls are thread-safe.
unsafe impl Send for Stream {}
// SAFETY: as above; no call mutates the handle.
unsafe impl Sync for Stream {}

impl Stream {
    fn from_shim(f: impl FnOnce(*mut *mut c_void, *mut *mut c_char) -> c_int) -> Result<Self> {
        let (mut handle, mut error) = (std::ptr::null_mut(), std::ptr::null_mut());
        let status = f(&mut handle, &mut error);
        check(status, error)?;
        Ok(Stream { handle })
    }

    /// A side stream of device `index` from libtorch's pool.
    pub fn from_pool(index: usize) -> Result<Self> {
        let i = device_index(index)?;
        // SAFETY: the shim writes a new heap handle or an error string, and catches every C++
        // exception (no CUDA device: an error).
        Self::from_shim(|out, err| unsafe { tnt_stream_from_pool(i, out, err) })
    }

    /// The stream that work on device `index` goes to now, on the calling thread.
    pub fn current(index: usize) -> Result<Self> {
        let i = device_index(index)?;
        // SAFETY: as in `from_pool`.
        Self::from_shim(|out, err| unsafe { tnt_stream_current(i, out, err) })
    }

    /// Makes this stream current on the calling thread until the guard is dropped.
    pub fn make_current(&self) -> Result<StreamGuard> {
        // SAFETY: `self.handle` is a live handle; the shim returns the previous stream as a new
        // handle that the guard owns.
        let previous =
            Self::from_shim(|out, err| unsafe { tnt_stream_exchange(self.handle, out, err) })?;
        Ok(StreamGuard { previous })
    }

    /// Blocks until everything queued on this stream has completed.
    pub fn synchronize(&self) -> Result<()> {
        let mut error = std::ptr::null_mut();
        // SAFETY: `self.handle` is a live handle; the shim catches every exception.
        let status = unsafe { tnt_stream_synchronize(self.handle, &mut error) };
        check(status, error)
    }

    /// Tells the caching allocator that `tensor`'s memory is used on this stream.
    pub fn record_tensor(&self, tensor: &tch::Tensor) -> Result<()> {
        let mut error = std::ptr::null_mut();
        // SAFETY: `as_ptr` is the live `at::Tensor*` of `tensor`; both handles outlive the call.
        let status = unsafe {
            tnt_record_tensor_stream(tensor.as_ptr() as *mut c_void, self.handle, &mut error)
        };
        check(status, error)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the handle came from the shim and is freed exactly once.
        unsafe { tnt_stream_free(self.handle) }
    }
}

/// Restores the previously current stream on drop.
pub(crate) struct StreamGuard {
    previous: Stream,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let (mut replaced, mut error) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `previous` is a live handle; the returned handle is freed right away.
        let status =
            unsafe { tnt_stream_exchange(self.previous.handle, &mut replaced, &mut error) };
        match check(status, error) {
            // SAFETY: a new handle from the shim, freed once.
            Ok(()) => unsafe { tnt_stream_free(replaced) },
            Err(e) => tracing::error!("restoring the current CUDA stream: {e}"),
        }
    }
}

/// A CUDA event: marks a point in a stream's work.
pub(crate) struct Event {
    handle: *mut c_void,
}

// SAFETY: `c10::Event` may be recorded, queried and waited on from any thread (CUDA events
// are); the trainer never uses one event from two threads at once (the reducer's phases
// hand it over through a channel).
unsafe impl Send for Event {}

impl Event {
    pub fn new() -> Result<Self> {
        let (mut handle, mut error) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: the shim writes a new heap handle or an error string.
        let status = unsafe { tnt_event_new(&mut handle, &mut error) };
        check(status, error)?;
        Ok(Event { handle })
    }

    /// Completes when the work queued on `stream` so far has completed.
    pub fn record(&mut self, stream: &Stream) -> Result<()> {
        let mut error = std::ptr::null_mut();
        // SAFETY: both handles are live; the shim catches every exception.
        let status = unsafe { tnt_event_record(self.handle, stream.handle, &mut error) };
        check(status, error)
    }

    /// Work queued on `stream` from now on waits for this event (the host does not wait).
    pub fn block(&self, stream: &Stream) -> Result<()> {
        let mut error = std::ptr::null_mut();
        // SAFETY: as in `record`.
        let status = unsafe { tnt_event_block(self.handle, stream.handle, &mut error) };
        check(status, error)
    }

    /// True once the recorded work has completed (or when nothing was recorded).
    pub fn is_done(&self) -> Result<bool> {
        let (mut done, mut error) = (0, std::ptr::null_mut());
        // SAFETY: as in `record`.
        let status = unsafe { tnt_event_query(self.handle, &mut done, &mut error) };
        check(status, error)?;
        Ok(done != 0)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the handle came from the shim and is freed exactly once.
        unsafe { tnt_event_free(self.handle) }
    }
}

/// Bytes of GPU memory libtorch's caching allocator has handed out on `device` (0 on the
/// CPU): what a leak would make grow from step to step.
pub(crate) fn device_allocated_bytes(device: tch::Device) -> Result<u64> {
    let tch::Device::Cuda(index) = device else {
        return Ok(0);
    };
    let (mut bytes, mut error) = (0i64, std::ptr::null_mut());
    // SAFETY: plain values in and out; the shim catches every exception.
    let status = unsafe { tnt_cuda_allocated_bytes(device_index(index)?, &mut bytes, &mut error) };
    check(status, error)?;
    Ok(bytes.max(0) as u64)
}

/// `dst.copy_(src, non_blocking=true)`, converting the dtype: on the current stream of a GPU
/// without the host waiting for it (when the host side is page-locked); a plain copy on the
/// CPU. Shapes must have the same number of elements.
pub(crate) fn copy_async(dst: &tch::Tensor, src: &tch::Tensor) -> Result<()> {
    let mut error = std::ptr::null_mut();
    // SAFETY: both are live `at::Tensor*`; the shim catches every exception (shape mismatch).
    let status = unsafe {
        tnt_copy_async(
            dst.as_ptr() as *mut c_void,
            src.as_ptr() as *mut c_void,
            &mut error,
        )
    };
    check(status, error)
}

/// Autocast (mixed precision) for one device type while alive: forward passes run their
/// matrix products and convolutions in `dtype`, the weights stay f32.
pub(crate) struct Autocast {
    device: c_int,
    prev_enabled: c_int,
    prev_dtype: c_int,
}

impl Autocast {
    pub fn enter(device: tch::Device, dtype: Kind) -> Result<Self> {
        let device = match device {
            tch::Device::Cpu => 0,
            tch::Device::Cuda(_) => 1,
            other => return Err(Error::Config(format!("no autocast on {other:?}"))),
        };
        let code = match dtype {
            Kind::BFloat16 => 15,
            Kind::Half => 5,
            other => return Err(Error::Config(format!("no autocast to {other:?}"))),
        };
        let (mut prev_enabled, mut prev_dtype, mut error) = (0, 0, std::ptr::null_mut());
        // SAFETY: plain values in and out; the shim catches every exception.
        let status = unsafe {
            tnt_autocast_enter(device, code, &mut prev_enabled, &mut prev_dtype, &mut error)
        };
        check(status, error)?;
        Ok(Autocast {
            device,
            prev_enabled,
            prev_dtype,
        })
    }
}

impl Drop for Autocast {
    fn drop(&mut self) {
        let mut error = std::ptr::null_mut();
        // SAFETY: plain values; restores what `enter` saw.
        let status = unsafe {
            tnt_autocast_exit(self.device, self.prev_enabled, self.prev_dtype, &mut error)
        };
        if let Err(e) = check(status, error) {
            tracing::error!("leaving autocast: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_autocast_runs_matmuls_in_bf16_and_restores() {
        let a = tch::Tensor::ones([4, 4], (Kind::Float, tch::Device::Cpu));
        {
            let _amp = Autocast::enter(tch::Device::Cpu, Kind::BFloat16).unwrap();
            assert_eq!(a.matmul(&a).kind(), Kind::BFloat16);
        }
        assert_eq!(a.matmul(&a).kind(), Kind::Float);
    }

    #[test]
    fn cuda_calls_fail_cleanly_without_a_gpu() {
        if tch::Cuda::is_available() {
            eprintln!("skipped: a CUDA device is present");
            return;
        }
        assert!(Stream::from_pool(0).is_err());
        assert!(Stream::current(0).is_err());
    }
}
