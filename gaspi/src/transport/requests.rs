//! Request/response slots for calls that wait for a peer's answer (atomics, pings, segment
//! registration, passive sends). The progress thread fills a slot; the caller waits on it.

use std::collections::hash_map::{Entry, HashMap};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ProtocolError, Result};
use crate::transport::Dest;
use crate::types::{AtomicOp, Deadline, Rank, SegKey, SegmentId};

#[derive(Default)]
pub(crate) struct RpcSlot {
    value: Mutex<Option<Result<u64>>>,
    cv: Condvar,
}

impl RpcSlot {
    /// Wakes whoever waits on this slot without an answer, so that it checks its `stop`
    /// condition again (see [`RpcTable::wait_until`]).
    pub fn wake(&self) {
        let _value = self.value.lock();
        self.cv.notify_all();
    }
}

/// Requests waiting for their answer, by id. The table holds each slot weakly: the caller
/// holds it, and a request whose caller dropped its slot (a commit abandoned with the group
/// it was for, say) is forgotten, whether its answer ever comes or not.
struct Open {
    slots: HashMap<u64, (Rank, Weak<RpcSlot>)>,
    /// When the table holds this many requests, those nobody waits for any more are dropped
    /// (then it is set to twice what remains), so a peer that never answers keeps no more
    /// than the requests still waited for, and each `begin` costs O(1) amortized.
    prune_at: usize,
}

/// The least `Open::prune_at`.
const PRUNE_MIN: usize = 64;

impl Default for Open {
    fn default() -> Open {
        Open {
            slots: HashMap::new(),
            prune_at: PRUNE_MIN,
        }
    }
}

#[derive(Default)]
pub(crate) struct RpcTable {
    next: AtomicU64,
    open: Mutex<Open>,
    /// Set by [`fail_all`](Self::fail_all): requests begun later fail at once.
    closed: AtomicBool,
}

impl RpcTable {
    /// A new request id towards `rank`, with the slot its answer lands in. The request is
    /// open while the caller holds the slot (or until it is answered or forgotten).
    pub fn begin(&self, rank: Rank) -> (u64, Arc<RpcSlot>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = Arc::new(RpcSlot::default());
        let mut open = self.open.lock();
        if self.closed.load(Ordering::Acquire) {
            *slot.value.lock() = Some(Err(Error::Terminated));
            return (id, slot);
        }
        if open.slots.len() >= open.prune_at {
            open.slots.retain(|_, (_, s)| s.strong_count() > 0);
            open.prune_at = (2 * open.slots.len()).max(PRUNE_MIN);
        }
        open.slots.insert(id, (rank, Arc::downgrade(&slot)));
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
        let slot = match self.open.lock().slots.entry(id) {
            Entry::Vacant(_) => return Ok(()),
            Entry::Occupied(e) if e.get().0 != from => {
                return Err(ProtocolError::ForeignAnswer {
                    req: id,
                    to: e.get().0,
                })
            }
            Entry::Occupied(e) => e.remove().1,
        };
        // Nobody waits for it any more.
        let Some(slot) = slot.upgrade() else {
            return Ok(());
        };
        *slot.value.lock() = Some(value);
        slot.cv.notify_all();
        Ok(())
    }

    /// Fails every request waiting on `rank`.
    pub fn fail_rank(&self, rank: Rank) {
        let failed: Vec<_> = {
            let mut open = self.open.lock();
            let mut failed = Vec::new();
            open.slots.retain(|_, (r, s)| {
                if *r != rank {
                    return true;
                }
                failed.extend(s.upgrade());
                false
            });
            failed
        };
        for slot in failed {
            *slot.value.lock() = Some(Err(Error::PeerFailed { rank }));
            slot.cv.notify_all();
        }
    }

    /// Fails every open request with `error()` (process termination).
    pub fn fail_all(&self, error: impl Fn() -> Error) {
        let open: Vec<_> = {
            let mut open = self.open.lock();
            self.closed.store(true, Ordering::Release);
            open.slots
                .drain()
                .filter_map(|(_, (_, s))| s.upgrade())
                .collect()
        };
        for slot in open {
            *slot.value.lock() = Some(Err(error()));
            slot.cv.notify_all();
        }
    }

    /// Waits for the answer in `slot` until `deadline`; on `Timeout` the request stays open, so
    /// that a later call can wait for the same answer again (or [`forget`](Self::forget) it).
    pub fn wait_resumable(&self, slot: &RpcSlot, deadline: Deadline) -> Result<u64> {
        self.wait_until(slot, deadline, || false)
            .unwrap_or(Err(Error::Timeout))
    }

    /// As [`wait_resumable`](Self::wait_resumable), and returns `None` as soon as `stop()`
    /// holds (the request stays open). `stop` is asked under the slot's lock before every
    /// sleep, so it must take no lock; whoever makes it hold then calls
    /// [`RpcSlot::wake`], so that the waiter cannot miss it.
    pub fn wait_until(
        &self,
        slot: &RpcSlot,
        deadline: Deadline,
        stop: impl Fn() -> bool,
    ) -> Option<Result<u64>> {
        let mut v = slot.value.lock();
        loop {
            if let Some(r) = v.take() {
                return Some(r);
            }
            if stop() {
                return None;
            }
            match deadline.remaining() {
                None => slot.cv.wait(&mut v),
                Some(d) if d.is_zero() => return Some(Err(Error::Timeout)),
                Some(d) => {
                    slot.cv.wait_for(&mut v, d);
                }
            }
        }
    }

    /// Drops request `id`: its answer, if it ever comes, is ignored.
    pub fn forget(&self, id: u64) {
        self.open.lock().slots.remove(&id);
    }

    /// Requests the table holds (answered ones and forgotten ones are gone; abandoned ones
    /// stay until the next prune).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.open.lock().slots.len()
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

    /// As [`wait_resumable`](Self::wait_resumable), and returns `None` as soon as `stop()`
    /// holds (see [`RpcTable::wait_until`]).
    pub fn wait_until(
        &self,
        table: &RpcTable,
        deadline: Deadline,
        stop: impl Fn() -> bool,
    ) -> Option<Result<()>> {
        table
            .wait_until(&self.slot, deadline, stop)
            .map(|r| r.map(|_| ()))
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

/// One remote atomic as its caller named it: target rank, segment, word and operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicCall {
    pub rank: Rank,
    pub seg: SegKey,
    pub offset: u64,
    pub op: AtomicOp,
}

impl AtomicCall {
    /// The atomic `op` on the word at `offset` of the segment `dst` names.
    pub fn on(dst: &Dest, offset: usize, op: AtomicOp) -> Self {
        AtomicCall {
            rank: dst.rank,
            seg: dst.key,
            offset: offset as u64,
            op,
        }
    }
}

/// Remote atomics whose call returned `Timeout` after the operation had gone out: the target
/// carries each out all the same, so it is kept here with what its answer will land in
/// (`T`, per transport). A later call with the same [`AtomicCall`] is the caller's retry
/// (GASPI: a call that timed out is resumed by calling it again with the same arguments)
/// and takes that answer instead of sending the operation a second time, which would apply
/// it twice. An entry is taken by the next call with the same arguments, whenever it comes:
/// a program that gave up on a timed-out atomic and makes the same call later gets the
/// abandoned one's answer (the operation was applied once). At most [`MAX`](Self::MAX) are
/// kept; past that the oldest is handed back to be given up: its answer, when it comes, is
/// ignored, and its retry sends the operation again.
pub(crate) struct AtomicsInDoubt<T>(Mutex<VecDeque<(AtomicCall, T)>>);

impl<T> Default for AtomicsInDoubt<T> {
    fn default() -> Self {
        AtomicsInDoubt(Mutex::new(VecDeque::new()))
    }
}

impl<T> AtomicsInDoubt<T> {
    /// Calls that timed out and were not retried yet are given up beyond this many (a rank
    /// polling this many targets at once with `Timeout::TEST`).
    pub const MAX: usize = 1024;

    /// The oldest timed-out atomic that `call` retries, if any.
    pub fn take(&self, call: &AtomicCall) -> Option<T> {
        let mut pending = self.0.lock();
        if pending.is_empty() {
            return None;
        }
        let at = pending.iter().position(|(c, _)| c == call)?;
        pending.remove(at).map(|(_, t)| t)
    }

    /// Keeps a timed-out atomic for its retry; returns the one given up to make room.
    pub fn keep(&self, call: AtomicCall, answer: T) -> Option<T> {
        let mut pending = self.0.lock();
        pending.push_back((call, answer));
        if pending.len() > Self::MAX {
            pending.pop_front().map(|(_, t)| t)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Deadline;

    #[test]
    fn a_timed_out_atomic_is_taken_only_by_the_same_call_and_the_oldest_is_given_up() {
        let call = |rank: u16, offset: u64, add: u64| AtomicCall {
            rank: Rank(rank),
            seg: 3,
            offset,
            op: AtomicOp::FetchAdd { add },
        };
        let doubt = AtomicsInDoubt::<u32>::default();
        assert_eq!(doubt.keep(call(1, 8, 1), 10), None);
        assert_eq!(doubt.keep(call(1, 8, 1), 11), None);
        // Another rank, word or operand is another call.
        for other in [call(2, 8, 1), call(1, 16, 1), call(1, 8, 2)] {
            assert_eq!(doubt.take(&other), None);
        }
        assert_eq!(doubt.take(&call(1, 8, 1)), Some(10));
        assert_eq!(doubt.take(&call(1, 8, 1)), Some(11));
        assert_eq!(doubt.take(&call(1, 8, 1)), None);
        let max = AtomicsInDoubt::<u32>::MAX as u64;
        for i in 0..max {
            assert_eq!(doubt.keep(call(1, 8 * i, 1), i as u32), None);
        }
        assert_eq!(doubt.keep(call(1, 8 * max, 1), 99), Some(0));
        assert_eq!(doubt.take(&call(1, 0, 1)), None);
        assert_eq!(doubt.take(&call(1, 8 * max, 1)), Some(99));
    }

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

    /// Requests whose callers dropped their slots (a peer that never answers them) do not
    /// pile up: the table holds at most about twice the requests still waited for.
    #[test]
    fn requests_nobody_waits_for_are_dropped() {
        let table = RpcTable::default();
        let kept: Vec<_> = (0..10).map(|_| table.begin(Rank(1))).collect();
        for _ in 0..10_000 {
            let (_id, _slot) = table.begin(Rank(1));
        }
        assert!(table.held() <= PRUNE_MIN + 1, "{} held", table.held());
        // The requests still waited for are answered.
        for (id, slot) in &kept {
            table.complete(*id, Rank(1), Ok(*id)).unwrap();
            assert_eq!(table.wait(*id, slot, Deadline::NOW).ok(), Some(*id));
        }
        // An answer to a dropped request is ignored.
        let (id, slot) = table.begin(Rank(1));
        drop(slot);
        assert_eq!(table.complete(id, Rank(1), Ok(1)), Ok(()));
    }

    /// A waiter whose stop condition comes to hold returns once woken (whether it was
    /// asleep by then or not), long before its deadline; the request stays open for a later
    /// wait.
    #[test]
    fn a_wait_stops_when_woken_with_its_condition_set() {
        let table = Arc::new(RpcTable::default());
        let (id, slot) = table.begin(Rank(1));
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Deadline::after(std::time::Duration::from_secs(20));
        let waiter = {
            let (table, slot, stop) = (table.clone(), slot.clone(), stop.clone());
            std::thread::spawn(move || {
                table.wait_until(&slot, deadline, || stop.load(Ordering::Acquire))
            })
        };
        stop.store(true, Ordering::Release);
        slot.wake();
        let waited = waiter.join().unwrap();
        assert!(waited.is_none(), "stopped, not {waited:?}");
        table.complete(id, Rank(1), Ok(3)).unwrap();
        assert_eq!(table.wait(id, &slot, Deadline::NOW).ok(), Some(3));
    }
}
