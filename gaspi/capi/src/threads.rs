//! `GASPI_Threads.h`: GPI-2's helpers for multi-threaded GASPI programs (deprecated there,
//! still used by real codes), with GPI-2's semantics:
//!
//! - `gaspi_threads_init_user(n)` (or `gaspi_threads_init(&n)`, with n = the cores this
//!   process may run on) sets the size of the pool; it starts no thread;
//! - every thread of the pool, the caller included, calls `gaspi_threads_register(&tid)`
//!   and gets the next id (the first caller 0);
//! - `gaspi_threads_run(f, arg)` starts one (detached) thread running `f(arg)`;
//! - `gaspi_threads_sync()` is a barrier of the pool's threads; `gaspi_threads_sync_all(g,
//!   timeout)` is the same with one `gaspi_barrier(g, timeout)` of the ranks in the middle,
//!   whose result every thread returns;
//! - `gaspi_threads_term()` ends the pool.
//!
//! Unlike GPI-2, whose barriers spin, waiting threads sleep on a condition variable, so a
//! pool larger than the cores (or ranks sharing a host) do not burn them.

use std::cell::Cell;
use std::ffi::c_void;

use parking_lot::{Condvar, Mutex};
use rt::{Error, Result};

use crate::gaspi_api;
use crate::types::*;

/// The pool: its size, the next id, and the barrier state.
struct Pool {
    total: i32,
    next_id: i32,
    /// Threads in the barrier now.
    arrived: i32,
    /// Completed barriers (waiters leave when it changes).
    generation: u64,
    /// What the last barrier's leader returned (code and message when it failed).
    result: std::result::Result<(), (i32, String)>,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);
static RELEASED: Condvar = Condvar::new();

thread_local! {
    /// This thread's id in the pool (-1: not registered) and the pool's size then.
    static ME: Cell<(gaspi_int, gaspi_int)> = const { Cell::new((-1, -1)) };
}

fn not_initialized() -> Error {
    Error::ThreadPoolNotInitialized
}

/// The cores this process may run on.
fn cores() -> Result<gaspi_int> {
    std::thread::available_parallelism()
        .map(|n| n.get() as gaspi_int)
        .map_err(|source| Error::System {
            call: "counting the cores",
            source,
        })
}

/// Waits until every thread of the pool has arrived; the last to arrive runs `leader`
/// (with the others waiting) and every thread returns its result.
fn barrier(leader: impl FnOnce() -> Result<()>) -> Result<()> {
    let mut guard = POOL.lock();
    let pool = guard.as_mut().ok_or_else(not_initialized)?;
    pool.arrived += 1;
    if pool.arrived >= pool.total {
        let r = leader();
        pool.result = r
            .as_ref()
            .map(|_| ())
            .map_err(|e| (e.code(), e.to_string()));
        pool.arrived = 0;
        pool.generation += 1;
        RELEASED.notify_all();
        return r;
    }
    let generation = pool.generation;
    loop {
        RELEASED.wait(&mut guard);
        match guard.as_ref() {
            Some(p) if p.generation != generation => {
                return match &p.result {
                    Ok(()) => Ok(()),
                    Err((rt::error::code::TIMEOUT, _)) => Err(Error::Timeout),
                    Err((code, why)) => Err(Error::RanksBarrier {
                        code: *code,
                        reason: why.clone(),
                    }),
                }
            }
            Some(_) => {}
            // The pool ended while we waited.
            None => return Err(not_initialized()),
        }
    }
}

/// Starts a pool of `n` threads.
fn init_pool(n: u32) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidNumber(
            "gaspi_threads: a pool of 0 threads".into(),
        ));
    }
    let mut pool = POOL.lock();
    if pool.is_some() {
        return Err(Error::ThreadPoolInitialized);
    }
    *pool = Some(Pool {
        total: n.min(1024) as i32,
        next_id: 0,
        arrived: 0,
        generation: 0,
        result: Ok(()),
    });
    Ok(())
}

/// The function `gaspi_threads_run` starts a thread with: `void *(*)(void *)`.
#[allow(non_camel_case_types)]
pub type gaspi_thread_fn = Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>;

/// A raw pointer handed to the thread `gaspi_threads_run` starts.
struct Arg(*mut c_void);
// SAFETY: the pointer is only passed back to the caller's own function, on the thread it
// asked for; what it points to and its sharing are the caller's contract, as in GPI-2.
unsafe impl Send for Arg {}

gaspi_api! { THREADS_API;
    /// `gaspi_threads_get_tid`: this thread's id in the pool.
    fn gaspi_threads_get_tid(tid: *mut gaspi_int) {
        crate::ffi::need(tid, "tid")?;
        if POOL.lock().is_none() {
            return Err(not_initialized());
        }
        crate::ffi::out(tid, "tid", ME.with(|m| m.get().0))
    }

    /// `gaspi_threads_get_total`: the size of the pool.
    fn gaspi_threads_get_total(num: *mut gaspi_int) {
        crate::ffi::need(num, "num")?;
        let total = POOL.lock().as_ref().map(|p| p.total).ok_or_else(not_initialized)?;
        crate::ffi::out(num, "num", total)
    }

    /// `gaspi_threads_get_num_cores`: the cores this process may run on.
    fn gaspi_threads_get_num_cores(cores_out: *mut gaspi_int) {
        crate::ffi::out(cores_out, "cores", cores()?)
    }

    /// `gaspi_threads_init`: a pool of one thread per core; their number in `num`.
    fn gaspi_threads_init(num: *mut gaspi_int) {
        crate::ffi::need(num, "num")?;
        let n = cores()?;
        init_pool(n as u32)?;
        crate::ffi::out(num, "num", n)
    }

    /// `gaspi_threads_init_user`: a pool of `use_nr_of_threads` threads (at most 1024).
    fn gaspi_threads_init_user(use_nr_of_threads: gaspi_uint) {
        init_pool(use_nr_of_threads)
    }

    /// `gaspi_threads_term`: ends the pool (threads waiting in a barrier return).
    fn gaspi_threads_term() {
        *POOL.lock() = None;
        RELEASED.notify_all();
        Ok(())
    }

    /// `gaspi_threads_run`: starts a thread that runs `function(arg)`.
    fn gaspi_threads_run(function: gaspi_thread_fn, arg: *mut c_void) {
        let f = function.ok_or(Error::NullPointer("function"))?;
        if POOL.lock().is_none() {
            return Err(not_initialized());
        }
        let arg = Arg(arg);
        std::thread::Builder::new()
            .name("gaspi-thread".into())
            .spawn(move || {
                let arg = arg;
                // SAFETY: the caller's function with the prototype it declared, called with
                // the argument it gave (GPI-2's contract).
                unsafe { f(arg.0) };
            })
            .map(|_| ())
            .map_err(|source| Error::System {
                call: "starting a thread",
                source,
            })
    }

    /// `gaspi_threads_register`: the next id of the pool for this thread.
    fn gaspi_threads_register(tid: *mut gaspi_int) {
        crate::ffi::need(tid, "tid")?;
        let (id, total) = {
            let mut pool = POOL.lock();
            let p = pool.as_mut().ok_or_else(not_initialized)?;
            let id = p.next_id;
            p.next_id += 1;
            (id, p.total)
        };
        ME.with(|m| m.set((id, total)));
        crate::ffi::out(tid, "tid", id)
    }

    /// `gaspi_threads_sync_all`: a barrier of the pool's threads with one
    /// `gaspi_barrier(g, timeout_ms)` of the ranks in it; every thread returns its result.
    fn gaspi_threads_sync_all(g: gaspi_group_t, timeout_ms: gaspi_timeout_t) {
        barrier(|| crate::ffi::with_ctx(|c| c.barrier(rt::Group(g), rt::Timeout(timeout_ms))))
    }
}

/// `gaspi_threads_sync`: a barrier of the pool's threads.
#[export_name = "pgaspi_threads_sync"]
pub extern "C" fn gaspi_threads_sync() {
    if let Err(e) = barrier(|| Ok(())) {
        crate::ffi::set_last_error(&format!("gaspi_threads_sync: {e}"));
    }
}
crate::weak_alias!(gaspi_threads_sync);
