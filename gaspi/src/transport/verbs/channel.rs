//! One RC queue pair towards one peer for one queue, and the bookkeeping of what is in
//! flight on it.
//!
//! Selective signaling: a work request asks for a completion only when its op needs one
//! (an atomic or a directory read, whose caller waits for it), every `signal_every`
//! requests, or as the fence that `wait` posts. RC completes a send queue in order, so a successful completion
//! retires everything posted before it. Capacity is the real send-queue depth: posting
//! past it is `QUEUE_FULL` (one slot stays free for the fence).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex as StdMutex};

use super::device::{QueuePair, RemoteAddr, Sge, WorkRequest, WrOp};
use crate::error::{Error, Result};
use crate::mem::SegmentMemory;
use crate::queue::QueueState;
use crate::types::{QueueId, Rank};

/// What to do when an op's last work request has completed.
pub(crate) enum Done {
    /// Internal traffic nobody waits for.
    Nothing,
    /// A queue op: local completion for `wait`.
    Queue(Arc<QueueState>),
    /// An atomic or directory read whose result the caller polls for.
    Result(Arc<ResultSlot>),
}

/// Where a caller that blocks on one work request finds its outcome.
#[derive(Default)]
pub(crate) struct ResultSlot {
    pub done: StdMutex<Option<std::result::Result<(), String>>>,
}

impl ResultSlot {
    pub fn take(&self) -> Option<std::result::Result<(), String>> {
        self.done.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn set(&self, r: std::result::Result<(), String>) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }
}

struct Pending {
    /// Sequence number of the op's last work request.
    last: u64,
    wrs: u32,
    done: Done,
    /// Keeps the local memory alive while the device may still access it.
    _hold: Option<Arc<SegmentMemory>>,
}

pub(crate) struct Channel {
    qp: Box<dyn QueuePair>,
    peer: Rank,
    queue: Option<QueueId>,
    sq_depth: u32,
    signal_every: u32,
    next_seq: u64,
    in_flight: VecDeque<Pending>,
    wrs_in_flight: u32,
    unsignaled: u32,
    last_signaled: bool,
    failed: Option<String>,
}

/// One op's work requests, before ids and signaling are assigned.
pub(crate) struct Op {
    pub wrs: Vec<(WrOp, RemoteAddr)>,
    pub done: Done,
    pub hold: Option<Arc<SegmentMemory>>,
    /// Signal the last request whatever the interval says.
    pub signal: bool,
}

/// `wr_id` = peer rank in the top 16 bits, sequence number below.
pub(crate) fn wr_id(peer: Rank, seq: u64) -> u64 {
    (u64::from(peer.0) << 48) | (seq & ((1 << 48) - 1))
}

pub(crate) fn wr_peer(id: u64) -> Rank {
    Rank((id >> 48) as u16)
}

impl Channel {
    pub fn new(qp: Box<dyn QueuePair>, peer: Rank, queue: Option<QueueId>, sq_depth: u32) -> Self {
        Channel {
            qp,
            peer,
            queue,
            sq_depth,
            signal_every: (sq_depth / 4).max(1),
            next_seq: 1,
            in_flight: VecDeque::new(),
            wrs_in_flight: 0,
            unsignaled: 0,
            last_signaled: true,
            failed: None,
        }
    }

    pub fn peer(&self) -> Rank {
        self.peer
    }

    /// Room for `n` more work requests, keeping one for the fence.
    pub fn has_room(&self, n: u32) -> bool {
        self.wrs_in_flight + n < self.sq_depth
    }

    pub fn queue_full(&self) -> Error {
        Error::QueueFull {
            queue: self.queue.unwrap_or(QueueId(u8::MAX)),
            entries: self.wrs_in_flight,
            max: self.sq_depth - 1,
        }
    }

    pub fn idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Posts `op` (the caller checked [`has_room`](Self::has_room)).
    pub fn post(&mut self, op: Op) -> Result<()> {
        if self.failed.is_some() {
            return Err(Error::PeerFailed { rank: self.peer });
        }
        let n = op.wrs.len() as u32;
        let signal_last = op.signal
            || !matches!(op.done, Done::Nothing | Done::Queue(_))
            || self.unsignaled + n >= self.signal_every;
        let first = self.next_seq;
        let wrs: Vec<WorkRequest> = op
            .wrs
            .iter()
            .enumerate()
            .map(|(i, (wr_op, remote))| WorkRequest {
                wr_id: wr_id(self.peer, first + i as u64),
                op: *wr_op,
                remote: *remote,
                signaled: signal_last && i + 1 == op.wrs.len(),
            })
            .collect();
        self.qp
            .post_send(&wrs)
            .map_err(|e| Error::Device(format!("posting to rank {}: {e}", self.peer)))?;
        self.next_seq += u64::from(n);
        self.wrs_in_flight += n;
        if signal_last {
            self.unsignaled = 0;
        } else {
            self.unsignaled += n;
        }
        self.last_signaled = signal_last;
        if let Done::Queue(q) = &op.done {
            q.begin_async();
        }
        self.in_flight.push_back(Pending {
            last: self.next_seq - 1,
            wrs: n,
            done: op.done,
            _hold: op.hold,
        });
        Ok(())
    }

    /// Posts a signaled zero-length write when the last request went unsignaled, so that
    /// `wait` learns when everything before it is complete.
    pub fn fence(&mut self, scratch: Sge, remote: RemoteAddr) -> Result<()> {
        if self.in_flight.is_empty() || self.last_signaled || self.failed.is_some() {
            return Ok(());
        }
        self.post(Op {
            wrs: vec![(WrOp::Write { sge: scratch }, remote)],
            done: Done::Nothing,
            hold: None,
            signal: true,
        })
    }

    /// A completion for work request `seq` arrived: retire what it covers, or fail
    /// everything on an error.
    pub fn complete(&mut self, seq: u64, status: std::result::Result<(), String>) {
        match status {
            Ok(()) => {
                while self.in_flight.front().is_some_and(|p| p.last <= seq) {
                    let p = self.in_flight.pop_front().expect("checked");
                    self.wrs_in_flight -= p.wrs;
                    finish(p.done, Ok(()), self.peer);
                }
            }
            Err(why) => self.fail(why),
        }
    }

    /// Fails every op in flight (error completion, or the peer died): RC moved the queue
    /// pair to the error state, nothing more will complete on it.
    pub fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            self.failed = Some(why.clone());
        }
        for p in self.in_flight.drain(..) {
            finish(p.done, Err(why.clone()), self.peer);
        }
        self.wrs_in_flight = 0;
    }
}

fn finish(done: Done, status: std::result::Result<(), String>, peer: Rank) {
    let failed = status.is_err().then_some(peer);
    match done {
        Done::Nothing => {}
        Done::Queue(q) => q.complete(failed),
        Done::Result(slot) => slot.set(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wr_ids_carry_the_peer() {
        let id = wr_id(Rank(513), 77);
        assert_eq!(wr_peer(id), Rank(513));
        assert_eq!(id & 0xffff_ffff_ffff, 77);
    }
}
