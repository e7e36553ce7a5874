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

use super::device::{QueuePair, RecvRequest, Sge, WorkRequest, WrOp};
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::RemoteAddr;
use crate::transport::completion::QueueState;
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
pub(crate) struct WorkBatch {
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
    pub fn post(&mut self, op: WorkBatch) -> Result<()> {
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

    /// Posts receive buffers on this channel's queue pair (the passive channel).
    pub fn post_recv(&mut self, wrs: &[RecvRequest]) -> Result<()> {
        if self.failed.is_some() {
            return Err(Error::PeerFailed { rank: self.peer });
        }
        self.qp
            .post_recv(wrs)
            .map_err(|e| Error::Device(format!("posting receives for rank {}: {e}", self.peer)))
    }

    /// Posts a signaled zero-length write when the last request went unsignaled, so that
    /// `wait` learns when everything before it is complete.
    pub fn fence(&mut self, scratch: Sge, remote: RemoteAddr) -> Result<()> {
        if self.in_flight.is_empty() || self.last_signaled || self.failed.is_some() {
            return Ok(());
        }
        self.post(WorkBatch {
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
    use crate::transport::verbs::device::QpEndpoint;

    /// Records which posted requests were signaled.
    struct RecordingQp(Arc<parking_lot::Mutex<Vec<(u64, bool)>>>);

    impl QueuePair for RecordingQp {
        fn qpn(&self) -> u32 {
            1
        }
        fn connect(&mut self, _: u32, _: &QpEndpoint) -> Result<()> {
            Ok(())
        }
        fn post_send(&mut self, wrs: &[WorkRequest]) -> Result<()> {
            self.0
                .lock()
                .extend(wrs.iter().map(|w| (w.wr_id & 0xffff_ffff_ffff, w.signaled)));
            Ok(())
        }
        fn post_recv(&mut self, _: &[RecvRequest]) -> Result<()> {
            Ok(())
        }
    }

    fn write_op(q: &Arc<QueueState>) -> WorkBatch {
        let sge = Sge {
            lkey: 1,
            addr: 0,
            len: 8,
        };
        let remote = RemoteAddr { rkey: 2, addr: 0 };
        WorkBatch {
            wrs: vec![(WrOp::Write { sge }, remote)],
            done: Done::Queue(q.clone()),
            hold: None,
            signal: false,
        }
    }

    #[test]
    fn signals_selectively_fences_and_retires_in_order() {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut ch = Channel::new(Box::new(RecordingQp(log.clone())), Rank(1), None, 17);
        let q = Arc::new(QueueState::new(QueueId(0), 100));
        for _ in 0..10 {
            assert!(ch.has_room(1));
            ch.post(write_op(&q)).unwrap();
        }
        // Depth 17: a completion every 4 requests.
        let signaled: Vec<u64> = log.lock().iter().filter(|w| w.1).map(|w| w.0).collect();
        assert_eq!(signaled, [4, 8]);
        let empty = Sge {
            lkey: 1,
            addr: 0,
            len: 0,
        };
        ch.fence(empty, RemoteAddr { rkey: 2, addr: 0 }).unwrap();
        assert_eq!(*log.lock().last().unwrap(), (11, true));
        // The completion of request 8 retires 1..=8; the fence's retires the rest.
        ch.complete(8, Ok(()));
        assert_eq!(ch.wrs_in_flight, 3);
        ch.complete(11, Ok(()));
        assert!(ch.idle());
        q.wait(crate::types::Deadline::after(std::time::Duration::ZERO))
            .unwrap();
    }

    #[test]
    fn capacity_is_the_send_queue_and_errors_fail_everything() {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut ch = Channel::new(Box::new(RecordingQp(log)), Rank(3), Some(QueueId(2)), 4);
        let q = Arc::new(QueueState::new(QueueId(2), 100));
        for _ in 0..3 {
            assert!(ch.has_room(1));
            ch.post(write_op(&q)).unwrap();
        }
        assert!(!ch.has_room(1), "one slot stays free for the fence");
        assert!(matches!(ch.queue_full(), Error::QueueFull { max: 3, .. }));
        ch.complete(2, Err("remote access error".into()));
        assert!(ch.idle());
        let w = q.wait(crate::types::Deadline::after(std::time::Duration::ZERO));
        assert!(
            matches!(w, Err(Error::PeerFailed { rank: Rank(3) })),
            "{w:?}"
        );
        assert!(matches!(
            ch.post(write_op(&q)),
            Err(Error::PeerFailed { .. })
        ));
    }

    #[test]
    fn wr_ids_carry_the_peer() {
        let id = wr_id(Rank(513), 77);
        assert_eq!(wr_peer(id), Rank(513));
        assert_eq!(id & 0xffff_ffff_ffff, 77);
    }
}
