//! SIGINT/SIGTERM/SIGHUP to `tarantella`: recorded here, acted on by the supervisor loop.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::error::{Error, Result};

static LAST: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only atomics: async-signal-safe.
    LAST.store(sig, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Installs the handlers.
pub fn install() -> Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to atomics, which is async-signal-safe, and it
        // replaces no handler that other code relies on.
        unsafe { sigaction(sig, &action) }.map_err(Error::Signals)?;
    }
    Ok(())
}

/// The last signal received and how many were received so far.
pub fn received() -> Option<(i32, usize)> {
    let n = COUNT.load(Ordering::SeqCst);
    (n > 0).then(|| (LAST.load(Ordering::SeqCst), n))
}
