//! The futex calls that waiters on a segment's notifications sleep and wake with. The word
//! may live in a mapping shared with other processes, so the calls are the shared (not
//! `PRIVATE`) forms.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` holds `expected`, at most `max` (or until woken, or spuriously).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, max: Duration) {
    let ts = libc::timespec {
        tv_sec: max.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: max.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT (shared, not PRIVATE: the word may live in a mapping shared with
    // other processes) on a valid, aligned u32 with a valid timespec; spurious returns
    // (EAGAIN, EINTR, ETIMEDOUT) are fine because every caller re-checks its condition.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every thread (of any process) sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid, aligned u32; wakes all sleepers on it.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}
