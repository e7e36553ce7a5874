//! SIGINT/SIGTERM/SIGHUP to `tarantella`: recorded here (by `signal-hook`), acted on by the
//! supervisor loop.
//!
//! The handlers are `signal-hook`'s: they only note the signal for [`received`], which the
//! supervisor calls every few milliseconds, so a signal arriving while another of its kind
//! is still unread counts once; a signal after the supervisor has looked (a second Ctrl-C
//! during the teardown) always counts.

use std::sync::{Mutex, PoisonError};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::{Error, Result};

/// The registered signals and what [`received`] has read of them so far.
struct Seen {
    signals: Signals,
    last: i32,
    count: usize,
}

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

/// Installs the handlers (once per process; later calls keep the first ones and what they
/// recorded).
pub fn install() -> Result<()> {
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    if seen.is_none() {
        // SIGHUP ignored when we start stays ignored: `nohup tarantella ...` keeps running
        // when the login ends. SIGINT is handled even when ignored (as mpirun does): a
        // shell starts a script's background jobs with SIGINT ignored, and `kill -INT` must
        // still stop the job.
        let handled = [SIGINT, SIGTERM, SIGHUP]
            .into_iter()
            .filter(|&s| s != SIGHUP || !ignored(s));
        let signals = Signals::new(handled).map_err(Error::Signals)?;
        *seen = Some(Seen {
            signals,
            last: 0,
            count: 0,
        });
    }
    Ok(())
}

/// Whether `sig`'s disposition is "ignore" (inherited from whoever started us).
fn ignored(sig: i32) -> bool {
    // SAFETY: an all-zero sigaction is a valid out-parameter; with a null new action,
    // sigaction only reads the current disposition into it.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `sig` is a valid signal number and `old` is writable.
    let rc = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
    rc == 0 && old.sa_sigaction == libc::SIG_IGN
}

/// The last signal received and how many were received so far; `None` before the first
/// (or before [`install`]).
pub fn received() -> Option<(i32, usize)> {
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = seen.as_mut()?;
    for sig in seen.signals.pending() {
        seen.last = sig;
        seen.count += 1;
    }
    (seen.count > 0).then_some((seen.last, seen.count))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test that owns this process's signals: it raises SIGHUP to itself, which
    /// without the handlers would end the test run.
    #[test]
    fn raised_signals_are_recorded_and_counted() {
        install().unwrap();
        install().unwrap();
        let before = received().map_or(0, |(_, n)| n);
        signal_hook::low_level::raise(SIGHUP).unwrap();
        let (sig, n) = received().expect("SIGHUP was recorded");
        assert_eq!((sig, n), (SIGHUP, before + 1));
        // Read once, it stays: the count only grows.
        assert_eq!(received(), Some((SIGHUP, before + 1)));
        signal_hook::low_level::raise(SIGHUP).unwrap();
        assert_eq!(received(), Some((SIGHUP, before + 2)));
    }
}
