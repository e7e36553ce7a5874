//! The shared-memory files this process created and has not unlinked yet, kept where a
//! signal handler can reach them: on SIGTERM and SIGHUP (what `kill`, a batch system, or
//! the launcher's parent-death signal sends) they are unlinked before the process dies, so
//! a rank ended that way leaves nothing in `/dev/shm`. An exit handler (`atexit`) does the
//! same for a process that ends with `exit` or returns from `main` without `term` (a GPI-2
//! program that never calls `gaspi_proc_term`, a Rust one that calls
//! `std::process::exit`, neither of which runs the runtime's destructors).
//!
//! # The handler
//!
//! The first file this process creates installs, once per process, an action for SIGTERM
//! and for SIGHUP through `signal-hook` (which chains to a handler the application installed
//! before). The action:
//!
//! 1. unlinks every path in [`SLOTS`] with `unlink(2)`;
//! 2. when the signal's disposition was the default one before the action was installed,
//!    restores the default disposition and re-raises the signal
//!    (`signal_hook::low_level::emulate_default_handler`), so the process dies of the same
//!    signal as it would have and its exit status (and the launcher's report of it) is
//!    unchanged. When the application had a handler of its own, that handler decides what
//!    happens next (`signal-hook` runs it first). When the signal was ignored, no action is
//!    installed and it stays ignored.
//!
//! The action stays installed for the life of the process: `signal-hook` cannot give the
//! disposition back (unregistering leaves its own handler in place, which would then ignore
//! SIGTERM), so instead the table empties as files are unlinked (at `segment_delete` and
//! `term`), and an action over an empty table only does step 2, which is what the default
//! disposition would have done.
//!
//! # Why the action is async-signal-safe
//!
//! It reads [`ACTIVE`], [`OWNER`] and [`SLOTS`] with atomic operations (lock-free on every
//! platform this runs on), calls `getpid(2)` and `unlink(2)`, and then `sigaction`, `sigprocmask`, `raise` and
//! `abort` (in `emulate_default_handler`): all async-signal-safe. It allocates nothing,
//! takes no lock, and never reads `/dev/shm` (a directory listing would need `opendir`,
//! which allocates, and one made in advance would be stale; unlinking by the job's prefix
//! would also be wrong for another process's files).
//!
//! Each slot holds a pointer to a NUL-terminated path this process owns, or null. A path is
//! allocated and written before it is published with a compare-and-swap (SeqCst), so a
//! handler that loads a non-null pointer sees the whole string. The one hazard is the
//! memory behind a pointer: a thread that unpublishes a path ([`OwnedFile::unlink`]) swaps
//! its slot to null and then frees the string only once [`ACTIVE`] (the number of handlers
//! between their first and last look at the slots) reads zero. All four accesses are
//! SeqCst, so a handler that loaded the pointer before the swap had raised [`ACTIVE`] before
//! it, and the freeing thread waits until that handler is done with the string; a handler
//! that starts later loads null. The wait cannot deadlock: the handler never waits for
//! anything, and when it interrupts the very thread that waits, it runs to completion
//! before that thread looks at [`ACTIVE`] again.
//!
//! A path is published before its file is created and unpublished after the file is
//! removed, so there is no moment when the file exists untracked. A handler that unlinks a
//! path whose file is not there (yet, or any more) gets `ENOENT`, which is harmless; the
//! names carry the job's nonce and this rank, so they are never another process's files.
//!
//! A child forked from the process inherits the action and the table; the action unlinks
//! only in the process that published the paths (it compares `getpid()`, also
//! async-signal-safe, with the one recorded at [`OwnedFile::track`]), so a signalled child
//! leaves its parent's files alone, and so does a child that calls `exit` (which runs the
//! inherited exit handler).
//!
//! The table has [`CAPACITY`] slots (user and internal segments, the fake verbs device's
//! files); a file beyond that is still unlinked as usual, only not by the signal action
//! (`tarantella --cleanup` remains for it, and for SIGKILL).

use std::ffi::{c_char, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Paths the signal action can hold at once.
pub(crate) const CAPACITY: usize = 1024;

/// The published paths: each a `CString::into_raw` pointer, or null.
static SLOTS: [AtomicPtr<c_char>; CAPACITY] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; CAPACITY];

/// Signal actions currently reading [`SLOTS`].
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// The process that published the paths: a child forked from it inherits the action and the
/// table, and must not unlink its parent's files when it is signalled.
static OWNER: AtomicI32 = AtomicI32::new(0);

static INSTALL: Once = Once::new();

/// The signals whose action unlinks the table: what ends a process politely.
const SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGHUP];

/// A shared-memory file this process creates and owns: published to the signal action from
/// [`track`](Self::track) (before the file is created) until [`unlink`](Self::unlink)
/// (or the drop) has removed it.
pub(crate) struct OwnedFile {
    path: PathBuf,
    /// Its slot in [`SLOTS`], when it got one.
    slot: Option<usize>,
    /// The published string while the file is owned; null once unlinked.
    name: AtomicPtr<c_char>,
}

impl OwnedFile {
    /// Publishes `path` to the signal action (installing the action the first time); call
    /// it before creating the file.
    pub fn track(path: &Path) -> OwnedFile {
        INSTALL.call_once(install);
        OWNER.store(std::process::id() as i32, Ordering::SeqCst);
        let name = match CString::new(path.as_os_str().as_bytes()) {
            Ok(c) => c.into_raw(),
            Err(_) => std::ptr::null_mut(), // a path with a NUL byte cannot be created either
        };
        let slot = (!name.is_null()).then(|| claim(name)).flatten();
        if slot.is_none() && !name.is_null() {
            tracing::warn!(
                path = %path.display(),
                "more than {CAPACITY} shared-memory files: this one is not unlinked on SIGTERM"
            );
        }
        OwnedFile {
            path: path.to_path_buf(),
            slot,
            name: AtomicPtr::new(name),
        }
    }

    /// Removes the file, then unpublishes it; later calls do nothing.
    pub fn unlink(&self) {
        self.untrack(true);
    }

    /// Unpublishes the path without removing the file: it turned out not to be this
    /// value's (another one created it first). Later calls and the drop do nothing.
    pub fn disown(&self) {
        self.untrack(false);
    }

    fn untrack(&self, remove: bool) {
        let name = self.name.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if name.is_null() {
            return;
        }
        if remove {
            let _ = std::fs::remove_file(&self.path);
        }
        if let Some(i) = self.slot {
            // Only this value ever stored `name` there.
            let _ = SLOTS[i].compare_exchange(
                name,
                std::ptr::null_mut(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
            while ACTIVE.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
        // SAFETY: `name` came from `CString::into_raw` in `track`; the swap above made this
        // the only call that frees it, and no signal action can still be reading it (the
        // slot is null and every action that loaded it before has finished, see the module
        // docs).
        drop(unsafe { CString::from_raw(name) });
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OwnedFile {
    fn drop(&mut self) {
        self.unlink();
    }
}

/// Publishes `name` in a free slot.
fn claim(name: *mut c_char) -> Option<usize> {
    SLOTS.iter().position(|s| {
        s.compare_exchange(
            std::ptr::null_mut(),
            name,
            Ordering::SeqCst,
            Ordering::Relaxed,
        )
        .is_ok()
    })
}

/// The paths published now (for tests).
#[cfg(test)]
fn published() -> Vec<PathBuf> {
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    let paths = SLOTS
        .iter()
        .map(|s| s.load(Ordering::SeqCst))
        .filter(|p| !p.is_null())
        // SAFETY: read as the signal action reads, under ACTIVE (module docs).
        .map(|p| unsafe { std::ffi::CStr::from_ptr(p) })
        .map(|c| PathBuf::from(std::ffi::OsStr::from_bytes(c.to_bytes())))
        .collect();
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    paths
}

/// Installs the action for each of [`SIGNALS`] whose disposition is not "ignore", and the
/// exit handler.
fn install() {
    // SAFETY: `on_exit` is a plain `extern "C" fn()` that stays valid for the life of the
    // process (or of this library: glibc runs a shared object's handlers at its unload).
    if unsafe { libc::atexit(on_exit) } != 0 {
        tracing::warn!("cannot install the shared-memory cleanup at exit");
    }
    for sig in SIGNALS {
        let Some(default) = disposition_is_default(sig) else {
            continue;
        };
        // SAFETY: the action only does async-signal-safe things (see the module docs):
        // atomic loads and stores, `unlink`, and `emulate_default_handler`.
        let registered =
            unsafe { signal_hook::low_level::register(sig, move || on_signal(sig, default)) };
        if let Err(e) = registered {
            tracing::warn!(
                signal = sig,
                "cannot install the shared-memory cleanup: {e}"
            );
        }
    }
}

/// `Some(true)` when `sig` has its default disposition, `Some(false)` when a handler is
/// installed, `None` when it is ignored (or cannot be read).
fn disposition_is_default(sig: libc::c_int) -> Option<bool> {
    // SAFETY: an all-zero `sigaction` is a valid value to be overwritten.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return None;
    }
    match old.sa_sigaction {
        libc::SIG_IGN => None,
        libc::SIG_DFL => Some(true),
        _ => Some(false),
    }
}

/// The signal action: unlink every published path, then die as the default disposition
/// would have made the process die.
fn on_signal(sig: libc::c_int, default: bool) {
    unlink_published();
    if default {
        let _ = signal_hook::low_level::emulate_default_handler(sig);
    }
}

/// The exit handler (`exit(3)`, a return from `main`): a process that ends without `term`
/// leaves no file behind either.
extern "C" fn on_exit() {
    unlink_published();
}

/// Unlinks every published path, in the process that published them only: for a process
/// about to end without running its destructors (the signal action, the exit handler,
/// `proc_kill`'s target before it SIGKILLs itself). The table keeps the paths: the owners'
/// later unlinks find nothing to remove.
pub(crate) fn unlink_published() {
    // SAFETY: getpid has no preconditions (and is async-signal-safe).
    let owner = unsafe { libc::getpid() } == OWNER.load(Ordering::SeqCst);
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    for slot in SLOTS.iter().filter(|_| owner) {
        let p = slot.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: a published pointer is a NUL-terminated string that stays allocated
            // while ACTIVE is non-zero (module docs).
            unsafe { libc::unlink(p) };
        }
    }
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_published_from_track_until_unlink() {
        let path = std::env::temp_dir().join(format!("tnt-owned-{}", std::process::id()));
        let owned = OwnedFile::track(&path);
        std::fs::write(&path, b"x").unwrap();
        assert!(published().contains(&path));
        owned.unlink();
        assert!(!path.exists());
        assert!(!published().contains(&path));
        owned.unlink();
        drop(owned);
        let again = OwnedFile::track(&path);
        std::fs::write(&path, b"y").unwrap();
        drop(again);
        assert!(!path.exists());
        assert!(!published().contains(&path));
    }
}
