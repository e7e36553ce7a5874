//! Moving a collective forward, as its [`Driver`] says: the caller (in `test`/`wait`) or a
//! thread of the collective's own ([`DriverThread`]).
//!
//! Caller-driven collectives must not depend on the application waiting for them in the
//! same order on every rank: rank A may wait for X while rank B waits for Y, and each
//! needs the other to forward data of the collective it is not waiting for. So `test` and
//! `wait` on one collective also move every other active caller-driven collective of the
//! process forward (they are registered while a run is active), as an MPI progress engine
//! does. When nothing moves, `wait` sleeps on its own collective's next notification; while
//! other collectives are active it sleeps in short slices so that it gets back to them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use gaspi::Deadline;
use parking_lot::{Condvar, Mutex};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::options::Driver;

/// How often a driver thread blocked in a wait looks at its stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Longest sleep of a `wait` while other collectives are active (gaspi waits in ms).
const SHARED_SLICE: Duration = Duration::from_millis(1);

/// A caller-driven engine, shared between its collective and the registry of active ones.
type EngineRef = Arc<Mutex<Engine>>;

/// Active caller-driven collectives of this process.
static ACTIVE: Mutex<Vec<Weak<Mutex<Engine>>>> = Mutex::new(Vec::new());

/// Adds a caller-driven engine that has just started a run to [`ACTIVE`] (once), dropping
/// entries of collectives that are gone.
fn register(engine: &EngineRef) {
    let mut active = ACTIVE.lock();
    active.retain(|w| w.strong_count() > 0);
    if !active.iter().any(|w| w.as_ptr() == Arc::as_ptr(engine)) {
        active.push(Arc::downgrade(engine));
    }
}

/// Moves every other active collective forward without blocking. Returns whether any
/// advanced and whether any other is active. Their errors stay with them (reported by
/// their own `test`/`wait`).
fn poll_others(me: &EngineRef) -> (bool, bool) {
    let others: Vec<EngineRef> = {
        let mut active = ACTIVE.lock();
        active.retain(|w| {
            w.upgrade()
                .is_some_and(|e| e.try_lock().is_none_or(|e| e.is_active()))
        });
        active
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|e| !Arc::ptr_eq(e, me))
            .collect()
    };
    let mut advanced = false;
    for e in &others {
        // A collective locked by another thread is being driven there.
        if let Some(mut e) = e.try_lock() {
            let before = e.position();
            let _ = e.advance(Deadline::NOW);
            advanced |= e.position() != before;
        }
    }
    (advanced, !others.is_empty())
}

/// A collective's engine together with what drives it (the [`Driver`] chosen in its
/// options): the collective's `test`/`wait` go through this.
pub(crate) enum DrivenEngine {
    /// [`Driver::Caller`]: the engine, shared with the registry of active collectives so
    /// that other collectives' waits move it too.
    ByCaller(EngineRef),
    /// [`Driver::Thread`]: the engine lives on its thread.
    ByThread(DriverThread),
}

impl DrivenEngine {
    /// Puts `engine` under `driver` (starting its thread for [`Driver::Thread`]).
    pub fn new(engine: Engine, driver: Driver) -> Result<Self> {
        match driver {
            Driver::Thread => Ok(DrivenEngine::ByThread(DriverThread::spawn(engine)?)),
            Driver::Caller => Ok(DrivenEngine::ByCaller(Arc::new(Mutex::new(engine)))),
        }
    }

    /// Starts a run (fails while one is in flight or after a failure).
    pub fn start(&mut self) -> Result<()> {
        match self {
            DrivenEngine::ByCaller(e) => {
                e.lock().start()?;
                register(e);
                Ok(())
            }
            DrivenEngine::ByThread(t) => t.start(),
        }
    }

    /// `Ok(true)` when no run is in flight any more.
    pub fn advance(&mut self, deadline: Deadline) -> Result<bool> {
        match self {
            DrivenEngine::ByCaller(e) => drive(e, deadline),
            DrivenEngine::ByThread(t) => t.advance(deadline),
        }
    }

    /// True while a started run has not completed.
    pub fn is_active(&self) -> bool {
        match self {
            DrivenEngine::ByCaller(e) => e.lock().is_active(),
            DrivenEngine::ByThread(t) => t.is_active(),
        }
    }

    /// Why the collective failed, if it did.
    pub fn failure(&self) -> Option<Arc<Error>> {
        match self {
            DrivenEngine::ByCaller(e) => e.lock().failure(),
            DrivenEngine::ByThread(t) => t.shared.state.lock().failed.clone(),
        }
    }

    /// Runs completed so far.
    pub fn completed_runs(&self) -> u64 {
        match self {
            DrivenEngine::ByCaller(e) => e.lock().completed_runs(),
            DrivenEngine::ByThread(t) => t.shared.state.lock().completed,
        }
    }
}

/// The caller-driven wait: see the module docs.
fn drive(me: &EngineRef, deadline: Deadline) -> Result<bool> {
    loop {
        let before = me.lock().position();
        if me.lock().advance(Deadline::NOW)? {
            return Ok(true);
        }
        let (others_moved, others_active) = poll_others(me);
        let moved = others_moved || me.lock().position() != before;
        if deadline.expired() {
            return Ok(false);
        }
        if moved {
            continue;
        }
        if !others_active {
            // Alone: sleep until our own next event or the caller's deadline.
            return me.lock().advance(deadline);
        }
        let slice = deadline
            .remaining()
            .map_or(SHARED_SLICE, |left| left.min(SHARED_SLICE));
        if me.lock().advance(Deadline::after(slice))? {
            return Ok(true);
        }
    }
}

/// What a driver thread and its collective's calls share, under [`Shared::state`].
#[derive(Default)]
struct State {
    /// A run was started and the thread has not finished it.
    active: bool,
    /// Runs the thread completed.
    completed: u64,
    /// The failure of the last run, reported by every later call.
    failed: Option<Arc<Error>>,
}

/// The state of a driver thread's runs, with what wakes the thread and its waiters.
struct Shared {
    /// Runs started, completed and failed.
    state: Mutex<State>,
    /// Signalled when a run starts (for the thread), ends (for waiters), or on stop.
    changed: Condvar,
    /// Set when the collective is dropped: the thread gives up its run and exits.
    stop: AtomicBool,
}

/// The thread of a collective driven by [`Driver::Thread`]: it owns the engine and runs
/// each started run to its end; the collective's calls only look at the shared state and
/// sleep on it.
pub(crate) struct DriverThread {
    /// Shared with the thread.
    shared: Arc<Shared>,
    /// Joined on drop, after `stop` is set.
    handle: Option<JoinHandle<()>>,
}

impl DriverThread {
    /// Moves `engine` onto a new thread that waits for runs to start.
    fn spawn(mut engine: Engine) -> Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let sh = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("tnt-collective".into())
            .spawn(move || loop {
                {
                    let mut st = sh.state.lock();
                    while !st.active && !sh.stop.load(Ordering::Acquire) {
                        sh.changed.wait(&mut st);
                    }
                    if sh.stop.load(Ordering::Acquire) {
                        return;
                    }
                }
                let outcome = run_to_end(&mut engine, &sh.stop);
                let mut st = sh.state.lock();
                st.active = false;
                match outcome {
                    Ok(true) => st.completed += 1,
                    // Stopped: the collective is being dropped, nobody asks any more.
                    Ok(false) => {}
                    Err(Error::Failed(cause)) => st.failed = Some(cause),
                    Err(e) => st.failed = Some(Arc::new(e)),
                }
                sh.changed.notify_all();
            })
            .map_err(Error::DriverThread)?;
        Ok(DriverThread {
            shared,
            handle: Some(handle),
        })
    }

    /// Hands the thread a run to do.
    fn start(&mut self) -> Result<()> {
        let mut st = self.shared.state.lock();
        if let Some(cause) = &st.failed {
            return Err(Error::Failed(Arc::clone(cause)));
        }
        if st.active {
            return Err(Error::InFlight);
        }
        st.active = true;
        self.shared.changed.notify_all();
        Ok(())
    }

    /// Sleeps until the thread has finished the run or `deadline` passes; `Ok(true)` when
    /// no run is in flight.
    fn advance(&mut self, deadline: Deadline) -> Result<bool> {
        let mut st = self.shared.state.lock();
        loop {
            if let Some(cause) = &st.failed {
                return Err(Error::Failed(Arc::clone(cause)));
            }
            if !st.active {
                return Ok(true);
            }
            if deadline.expired() {
                return Ok(false);
            }
            match deadline.remaining() {
                None => self.shared.changed.wait(&mut st),
                Some(left) => {
                    if self.shared.changed.wait_for(&mut st, left).timed_out() && st.active {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// True while the thread has a run to finish.
    fn is_active(&self) -> bool {
        self.shared.state.lock().active
    }
}

/// The driver thread's work for one run: `Ok(true)` once it completed, `Ok(false)` if the
/// collective is being dropped first (`stop`).
fn run_to_end(engine: &mut Engine, stop: &AtomicBool) -> Result<bool> {
    engine.start()?;
    loop {
        if engine.advance(Deadline::after(STOP_POLL))? {
            return Ok(true);
        }
        if stop.load(Ordering::Acquire) {
            return Ok(false);
        }
    }
}

impl Drop for DriverThread {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let _st = self.shared.state.lock();
            self.shared.changed.notify_all();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
