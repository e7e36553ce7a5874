//! The queue collectives post on when their options name none: one created for them on
//! each context, apart from the application's.
//!
//! Why not queue 0, as before: a queue's `wait` waits for everything posted on it and takes
//! the report of any failed request on it, whoever posted it. On a queue shared with the
//! application, an application thread's `wait` would wait for the collectives' writes and
//! could take their failure reports, and the collectives' flushes would wait for the
//! application's writes.

use std::sync::{Arc, Weak};

use gaspi::{Context, QueueId};
use parking_lot::Mutex;

/// The collectives' queue of each live context.
static OWN: Mutex<Vec<(Weak<Context>, QueueId)>> = Mutex::new(Vec::new());

/// The queue of the collectives on `ctx`, created on first use (`gaspi_queue_create`). If
/// the context has every queue it may have already, they share queue 0 with the
/// application, as they did before, and say so once.
pub(crate) fn collectives_queue(ctx: &Arc<Context>) -> QueueId {
    let mut own = OWN.lock();
    // A context that is gone frees its entry, so that a new one at its address is not
    // taken for it.
    own.retain(|(c, _)| c.strong_count() > 0);
    if let Some((_, q)) = own.iter().find(|(c, _)| c.as_ptr() == Arc::as_ptr(ctx)) {
        return *q;
    }
    let q = ctx.queue_create().unwrap_or_else(|e| {
        tracing::warn!(
            error = %e,
            "no queue of their own for the collectives: they share queue 0 with the application"
        );
        QueueId(0)
    });
    own.push((Arc::downgrade(ctx), q));
    q
}
