//! Request/response slots for calls that wait for a peer's answer (atomics, pings, segment
//! registration, passive sends). The progress thread fills a slot; the caller waits on it.

use std::collections::hash_map::{Entry, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ProtocolError, Result};
use crate::types::{Deadline, Rank, SegmentId};

#[derive(Default)]
pub(crate) struct RpcSlot {
    value: Mutex<Option<Result<u64>>>,
    cv: Condvar,
}

#[derive(Default)]
pub(crate) struct RpcTable {
    next: AtomicU64,
    slots: Mutex<HashMap<u64, (Rank, Arc<RpcSlot>)>>,
    /// Set by [`fail_all`](Self::fail_all): requests begun later fail at once.
    closed: AtomicBool,
}

impl RpcTable {
    /// A new request id towards `rank`, with the slot its answer lands in.
    pub fn begin(&self, rank: Rank) -> (u64, Arc<RpcSlot>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = Arc::new(RpcSlot::default());
        let mut slots = self.slots.lock();
        if self.closed.load(Ordering::Acquire) {
            *slot.value.lock() = Some(Err(Error::Terminated));
        } else {
            slots.insert(id, (rank, slot.clone()));
        }
        (id, slot)
    }

    /// Delivers `from`'s answer to request `id` (ignored if the caller gave up). Request ids
    /// are not secret, so an answer from a rank the request did not go to is refused, and the
    /// request stays open for the answer of the rank it went to.
    pub fn complete(
        &self,
        id: u64,
        from: Rank,
        value: Result<u64>,
    ) -> std::result::Result<(), ProtocolError> {
        let slot = match self.slots.lock().entry(id) {
            Entry::Vacant(_) => return Ok(()),
            Entry::Occupied(e) if e.get().0 != from => {
                return Err(ProtocolError::ForeignAnswer {
                    req: id,
                    to: e.get().0,
                })
            }
            Entry::Occupied(e) => e.remove().1,
        };
        *slot.value.lock() = Some(value);
        slot.cv.notify_all();
        Ok(())
    }

    /// Fails every request waiting on `rank`.
    pub fn fail_rank(&self, rank: Rank) {
        let failed: Vec<_> = {
            let mut slots = self.slots.lock();
            let ids: Vec<u64> = slots
                .iter()
                .filter(|(_, (r, _))| *r == rank)
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter().filter_map(|id| slots.remove(&id)).collect()
        };
        for (_, slot) in failed {
            *slot.value.lock() = Some(Err(Error::PeerFailed { rank }));
            slot.cv.notify_all();
        }
    }

    /// Fails every open request with `error()` (process termination).
    pub fn fail_all(&self, error: impl Fn() -> Error) {
        let open: Vec<_> = {
            let mut slots = self.slots.lock();
            self.closed.store(true, Ordering::Release);
            slots.drain().map(|(_, (_, s))| s).collect()
        };
        for slot in open {
            *slot.value.lock() = Some(Err(error()));
            slot.cv.notify_all();
        }
    }

    /// Waits for the answer in `slot` until `deadline`; on `Timeout` the request stays open, so
    /// that a later call can wait for the same answer again (or [`forget`](Self::forget) it).
    pub fn wait_resumable(&self, slot: &RpcSlot, deadline: Deadline) -> Result<u64> {
        let mut v = slot.value.lock();
        loop {
            if let Some(r) = v.take() {
                return r;
            }
            match deadline.remaining() {
                None => slot.cv.wait(&mut v),
                Some(d) if d.is_zero() => return Err(Error::Timeout),
                Some(d) => {
                    slot.cv.wait_for(&mut v, d);
                }
            }
        }
    }

    /// Drops request `id`: its answer, if it ever comes, is ignored.
    pub fn forget(&self, id: u64) {
        self.slots.lock().remove(&id);
    }

    /// Waits for the answer to `id` until `deadline`; on timeout the request is forgotten.
    pub fn wait(&self, id: u64, slot: &RpcSlot, deadline: Deadline) -> Result<u64> {
        match self.wait_resumable(slot, deadline) {
            Err(Error::Timeout) => {
                self.forget(id);
                // The answer may have landed between the check and the removal.
                slot.value.lock().take().unwrap_or(Err(Error::Timeout))
            }
            answer => answer,
        }
    }
}

/// A request sent whose answer (an acknowledgement) a caller still has to take.
pub(crate) struct Ack {
    pub req: u64,
    pub slot: Arc<RpcSlot>,
}

impl Ack {
    /// Waits for the answer until `deadline`; on timeout the request is forgotten.
    pub fn wait(self, table: &RpcTable, deadline: Deadline) -> Result<()> {
        table.wait(self.req, &self.slot, deadline).map(|_| ())
    }

    /// Waits for the answer until `deadline`; on `Timeout` the request stays open, and a
    /// later call waits for the same answer (an answer is taken once).
    pub fn wait_resumable(&self, table: &RpcTable, deadline: Deadline) -> Result<()> {
        table.wait_resumable(&self.slot, deadline).map(|_| ())
    }
}

/// A passive message sent over TCP whose `passive_send` returned `Timeout`.
pub(crate) struct Unacked {
    pub req: u64,
    pub slot: Arc<RpcSlot>,
    /// The segment range the message was read from.
    pub what: (SegmentId, u64),
    /// Its bytes, to recognize the caller's retry.
    pub data: Vec<u8>,
}

/// The sending side's memory of TCP passive sends whose call timed out before their
/// acknowledgement, per target rank (see `passive_send_tcp`).
#[derive(Default)]
pub(crate) struct UnackedSends(Mutex<HashMap<Rank, Unacked>>);

impl UnackedSends {
    pub fn take(&self, rank: Rank) -> Option<Unacked> {
        self.0.lock().remove(&rank)
    }

    pub fn keep(&self, rank: Rank, u: Unacked) {
        self.0.lock().insert(rank, u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Deadline;

    #[test]
    fn only_the_rank_a_request_went_to_answers_it() {
        let table = RpcTable::default();
        let (id, slot) = table.begin(Rank(1));
        assert_eq!(
            table.complete(id, Rank(2), Ok(666)),
            Err(ProtocolError::ForeignAnswer {
                req: id,
                to: Rank(1)
            })
        );
        // Still open: the real answer lands.
        assert_eq!(table.complete(id, Rank(1), Ok(7)), Ok(()));
        assert_eq!(
            table
                .wait(id, &slot, Deadline::after(std::time::Duration::ZERO))
                .ok(),
            Some(7)
        );
        // An answer to a request nobody waits for any more is ignored, from anyone.
        assert_eq!(table.complete(id, Rank(2), Ok(8)), Ok(()));
    }
}
