//! Page-locking the gradient staging memory (a range of a gaspi segment) for one GPU, through
//! the CUDA driver API loaded at run time (`cudarc`): copies between the GPU and a page-locked
//! range run asynchronously, by DMA, on a copy stream. Nothing here is linked against CUDA, so
//! the crate builds and runs without it; asking to page-lock without a driver is an error.

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use crate::error::{Error, Result};

fn driver_err(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Device(format!("{what}: {e:?}"))
}

/// Makes the primary context of GPU `index` (the one libtorch uses) current on this thread.
fn bind_primary_context(index: usize) -> Result<()> {
    // SAFETY: probing for the library only opens it.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Device(
            "the CUDA driver library (libcuda.so) is not installed".into(),
        ));
    }
    result::init().map_err(|e| driver_err("cuInit", e))?;
    let ordinal = i32::try_from(index).map_err(|_| Error::Device(format!("GPU {index}")))?;
    let dev = result::device::get(ordinal).map_err(|e| driver_err("cuDeviceGet", e))?;
    // SAFETY: `dev` came from `device::get`; the primary context is retained for the life of
    // the process (libtorch holds it too), so the current-context pointer stays valid.
    unsafe {
        let ctx = result::primary_ctx::retain(dev).map_err(|e| driver_err("retain", e))?;
        result::ctx::set_current(ctx).map_err(|e| driver_err("cuCtxSetCurrent", e))
    }
}

/// A page-locked host range; made pageable again on drop.
pub(crate) struct PageLocked {
    ptr: *mut c_void,
    device: usize,
}

// SAFETY: the value only remembers the address for the unregistration; it never reads or
// writes through it.
unsafe impl Send for PageLocked {}

impl PageLocked {
    /// Page-locks `bytes` at `ptr` for GPU `device` (and, being portable, every context).
    ///
    /// # Safety
    /// `ptr..ptr + bytes` must be mapped memory that stays mapped until the returned value
    /// has been dropped.
    pub unsafe fn new(ptr: *mut u8, bytes: usize, device: usize) -> Result<Self> {
        if bytes == 0 {
            return Err(Error::Device("cannot page-lock an empty range".into()));
        }
        bind_primary_context(device)?;
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE;
        // SAFETY: the caller guarantees the range is mapped for our lifetime.
        unsafe { sys::cuMemHostRegister_v2(ptr.cast(), bytes, flags) }
            .result()
            .map_err(|e| driver_err(&format!("page-locking {bytes} bytes"), e))?;
        Ok(PageLocked {
            ptr: ptr.cast(),
            device,
        })
    }
}

impl Drop for PageLocked {
    fn drop(&mut self) {
        let unregistered = bind_primary_context(self.device).and_then(|()| {
            // SAFETY: `ptr` was registered by `new` and is still mapped (its contract).
            unsafe { sys::cuMemHostUnregister(self.ptr) }
                .result()
                .map_err(|e| driver_err("cuMemHostUnregister", e))
        });
        if let Err(e) = unregistered {
            tracing::warn!("making a staging range pageable again: {e}");
        }
    }
}
