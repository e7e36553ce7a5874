//! The queues collectives post on when their options name none: a small pool per context,
//! apart from the application's queues, from which each run takes a queue of its own.
//!
//! Why apart from the application's: a queue's `wait` waits for everything posted on it
//! and takes the report of any failed request on it, whoever posted it. On a queue shared
//! with the application, an application thread's `wait` would wait for the collectives'
//! writes and could take their failure reports, and the collectives' flushes would wait for
//! the application's writes.
//!
//! Why one per run rather than one for all collectives: two collectives in flight at once
//! (fusion buckets, or collectives of different groups) would have the same problem with
//! each other. One's flush would wait for the other's writes to a slow or stopped peer for
//! as long as that peer takes, and could take the other's failure report, failing a run
//! whose own peers are fine.
//!
//! A run takes a queue the first time it is moved forward and gives it back when it
//! completes, so runs that follow each other reuse one queue. The pool grows to
//! [`QUEUES_MAX`] queues, leaving the rest of GASPI's 16 to the application; runs beyond
//! that share the queue fewest runs use. A queue given back by a run that failed or was
//! dropped may still hold its requests (and their failure reports): it is handed out again
//! once a purge finds it drained, or before only if the pool is full and every queue in it
//! is in that state.

use std::sync::{Arc, Weak};

use gaspi::{Context, QueueId, Timeout};
use parking_lot::Mutex;

/// The most queues the collectives of one context create (GASPI allows 16 in all): more
/// runs in flight at once share them.
pub const QUEUES_MAX: usize = 4;

/// One queue of a context's pool.
struct Slot {
    id: QueueId,
    /// Runs posting on it now.
    users: usize,
    /// A run that did not complete gave it back: requests may still be on it.
    tainted: bool,
}

/// A queue [`take`] handed out, to be given back with [`give_back`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// A queue of the pool.
    Pool(QueueId),
    /// Queue 0, the application's, for want of a queue of their own: not the pool's to
    /// count or purge (even if the application deletes queue 0 and the pool later creates
    /// a queue of that id).
    Fallback,
}

impl Held {
    /// The queue to post on.
    pub(crate) fn id(self) -> QueueId {
        match self {
            Held::Pool(q) => q,
            Held::Fallback => QueueId(0),
        }
    }
}

/// The collectives' queues of one live context.
struct Pool {
    ctx: Weak<Context>,
    /// Queues the collectives created.
    slots: Vec<Slot>,
    /// A run was left on queue 0 for want of a queue, and the log said so.
    warned: bool,
}

static POOLS: Mutex<Vec<Pool>> = Mutex::new(Vec::new());

/// A queue for a run of a collective on `ctx`, to be given back with [`give_back`].
///
/// An idle queue of the pool, else a new one while the pool is below [`QUEUES_MAX`] and the
/// context can create one, else the pool's queue with the fewest runs on it. While the
/// pool is empty and the context can create no queue (the application holds every one),
/// runs are left on queue 0, shared with the application, as the collectives were before
/// they had queues of their own; that is said once. Queue 0 never joins the pool, so the
/// first run after the application frees a queue takes one of its own again (an
/// application that frees a queue to create another at once may find it taken: it should
/// pin the collectives to a queue of its own with `Options::queue`).
pub(crate) fn take(ctx: &Arc<Context>) -> Held {
    let mut pools = POOLS.lock();
    // A context that is gone frees its entry, so that a new one at its address is not
    // taken for it.
    pools.retain(|p| p.ctx.strong_count() > 0);
    let at = match pools
        .iter()
        .position(|p| p.ctx.as_ptr() == Arc::as_ptr(ctx))
    {
        Some(at) => at,
        None => {
            pools.push(Pool {
                ctx: Arc::downgrade(ctx),
                slots: Vec::new(),
                warned: false,
            });
            pools.len() - 1
        }
    };
    let Pool { slots, warned, .. } = &mut pools[at];
    for slot in slots.iter_mut().filter(|s| s.tainted && s.users == 0) {
        // Nobody posts on it: a purge that succeeds at once means nothing is in flight,
        // and it drops the failure reports the abandoned run left.
        if ctx.queue_purge(slot.id, Timeout::TEST).is_ok() {
            slot.tainted = false;
        }
    }
    if let Some(slot) = slots.iter_mut().find(|s| s.users == 0 && !s.tainted) {
        slot.users = 1;
        return Held::Pool(slot.id);
    }
    if slots.len() < QUEUES_MAX {
        match ctx.queue_create() {
            Ok(id) => {
                slots.push(Slot {
                    id,
                    users: 1,
                    tainted: false,
                });
                return Held::Pool(id);
            }
            Err(e) if slots.is_empty() => {
                if !std::mem::replace(warned, true) {
                    tracing::warn!(
                        error = %e,
                        "no queue of their own for the collectives: they share queue 0 with the application"
                    );
                }
                return Held::Fallback;
            }
            Err(_) => {}
        }
    }
    // The pool is full, or creating a queue failed on a pool that has one.
    match slots.iter_mut().min_by_key(|s| (s.tainted, s.users)) {
        Some(slot) => {
            slot.users += 1;
            Held::Pool(slot.id)
        }
        None => Held::Fallback,
    }
}

/// Gives back a queue [`take`] handed out. `drained`: the run completed, its last flush
/// waited for everything it posted; otherwise the queue is not handed out again until a
/// purge finds it drained.
pub(crate) fn give_back(ctx: &Context, held: Held, drained: bool) {
    let Held::Pool(queue) = held else {
        return;
    };
    let mut pools = POOLS.lock();
    let slot = pools
        .iter_mut()
        .filter(|p| std::ptr::eq(p.ctx.as_ptr(), ctx))
        .flat_map(|p| p.slots.iter_mut())
        .find(|s| s.id == queue && s.users > 0);
    if let Some(slot) = slot {
        slot.users -= 1;
        slot.tainted |= !drained;
    }
}
