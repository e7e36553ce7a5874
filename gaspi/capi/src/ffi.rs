//! The boundary: the process-wide context, the panic guard and the few raw-pointer helpers
//! every exported function uses. All `unsafe` pointer access of the crate goes through the
//! helpers here.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rt::error::code;
use rt::{Context, Error, Result};

use crate::types::{gaspi_return_t, gaspi_timeout_t};

/// The context between `gaspi_proc_init` and `gaspi_proc_term`. A call takes a reference
/// (briefly holding the lock) and runs without the lock, so `gaspi_proc_term` never waits
/// for a call blocked on another thread: it empties the slot and terminates the context,
/// which ends such calls with `GASPI_ERROR`; their reference keeps the memory alive until
/// they have returned. Calls that start after term find the slot empty (`GASPI_ERR_NOINIT`).
static CONTEXT: RwLock<Option<Arc<Context>>> = RwLock::new(None);

thread_local! {
    /// Message of the last failed call on this thread (`tnt_gaspi_last_error`).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs `f`, turning its result into a return code and a panic into `GASPI_ERROR`.
pub(crate) fn guard(name: &str, f: impl FnOnce() -> Result<()>) -> gaspi_return_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => code::SUCCESS,
        Ok(Err(e)) => {
            let rc = e.code();
            if rc != code::TIMEOUT {
                set_last_error(&format!("{name}: {e}"));
                tracing::debug!("{name}: {e} (code {rc})");
            }
            rc
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("{name}: internal error: {what}"));
            code::ERROR
        }
    }
}

pub(crate) fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
}

/// The last error message of this thread; valid until the thread's next failed call.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// Runs `f` with the context, or fails with `GASPI_ERR_NOINIT`.
pub(crate) fn with_ctx<T>(f: impl FnOnce(&Context) -> Result<T>) -> Result<T> {
    let ctx = CONTEXT.read().clone().ok_or(Error::NotInitialized)?;
    f(&ctx)
}

/// Whether a context is installed.
pub(crate) fn is_initialized() -> bool {
    CONTEXT.read().is_some()
}

/// Serializes `install`s; held while a context is made.
static INSTALLING: Mutex<()> = Mutex::new(());

/// Installs a context made by `make` unless one exists (`GASPI_ERR_INITED`). `CONTEXT` is
/// not held while `make` runs (it may wait for the other ranks for seconds): other threads'
/// calls meanwhile find no context and fail with `GASPI_ERR_NOINIT` at once, as in GPI-2.
pub(crate) fn install(make: impl FnOnce() -> Result<Context>) -> Result<()> {
    let _one_at_a_time = INSTALLING.lock();
    if CONTEXT.read().is_some() {
        return Err(Error::AlreadyInitialized);
    }
    let ctx = Arc::new(make()?);
    *CONTEXT.write() = Some(ctx);
    Ok(())
}

/// Removes and terminates the context; calls blocked in it on other threads return
/// `GASPI_ERROR` (see [`CONTEXT`]).
pub(crate) fn uninstall(timeout: gaspi_timeout_t) -> Result<()> {
    let ctx = CONTEXT.write().take().ok_or(Error::NotInitialized)?;
    ctx.terminate(rt::Timeout(timeout))
}

/// Stores `v` through the output pointer `p`.
pub(crate) fn out<T>(p: *mut T, what: &'static str, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Error::NullPointer(what));
    }
    // SAFETY: `p` is non-null and, by the contract of the exported function, points to a
    // writable `T`; `write_unaligned` makes no alignment assumption on caller memory.
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// Checks the output pointer `p` before a call with side effects, so that a null pointer
/// fails before anything happens.
pub(crate) fn need<T>(p: *const T, what: &'static str) -> Result<()> {
    if p.is_null() {
        return Err(Error::NullPointer(what));
    }
    Ok(())
}

/// The `n` elements at `p` as a vector (list arguments of the list operations).
pub(crate) fn read_array<T: Copy>(p: *const T, n: usize, what: &'static str) -> Result<Vec<T>> {
    need(p, what)?;
    // SAFETY: `p` is non-null and, by the contract of the exported function, points to `n`
    // readable elements; they are copied out element by element without alignment
    // assumptions.
    Ok((0..n)
        .map(|i| unsafe { p.add(i).read_unaligned() })
        .collect())
}

/// Writes `vals` to the array at `p` (which holds at least `vals.len()` elements).
pub(crate) fn write_array<T: Copy>(p: *mut T, vals: &[T], what: &'static str) -> Result<()> {
    need(p, what)?;
    for (i, v) in vals.iter().enumerate() {
        // SAFETY: `p` is non-null and, by the contract of the exported function, has room
        // for `vals.len()` elements.
        unsafe { p.add(i).write_unaligned(*v) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: `last_error_ptr` points to this thread's NUL-terminated message.
        unsafe { CStr::from_ptr(last_error_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_gaspi_error() {
        let rc = guard("gaspi_test", || panic!("boom"));
        assert_eq!(rc, code::ERROR);
        assert!(
            last().contains("gaspi_test: internal error: boom"),
            "{}",
            last()
        );
    }

    #[test]
    fn errors_map_to_codes_and_messages() {
        assert_eq!(guard("f", || Ok(())), code::SUCCESS);
        assert_eq!(guard("f", || Err(Error::Timeout)), code::TIMEOUT);
        let rc = guard("gaspi_g", || out(std::ptr::null_mut::<u8>(), "rank", 1));
        assert_eq!(rc, code::ERR_NULLPTR);
        assert!(
            last().contains("gaspi_g: null pointer passed for rank"),
            "{}",
            last()
        );
        assert_eq!(guard("h", || with_ctx(|_| Ok(()))), code::ERR_NOINIT);
    }

    /// While a context is being made (init waits for the other ranks), another thread's
    /// call finds none and fails at once, as in GPI-2, instead of waiting for the init.
    #[test]
    fn calls_during_an_init_fail_at_once() {
        let made = install(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(with_ctx(|_| Ok(())).err());
            });
            let seen = rx.recv_timeout(std::time::Duration::from_secs(10));
            assert!(
                matches!(seen, Ok(Some(Error::NotInitialized))),
                "the other thread's call: {seen:?}"
            );
            Err(Error::Config("no context in this test".into()))
        });
        assert!(matches!(made, Err(Error::Config(_))));
        assert!(!is_initialized());
    }
}
