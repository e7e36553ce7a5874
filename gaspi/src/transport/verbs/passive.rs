//! Passive messages over verbs: a SEND on a dedicated RC queue pair per peer into receive
//! buffers that the target posted ahead, instead of a frame on the TCP control channel.
//!
//! **Receive queues: one per peer's passive queue pair, not a shared receive queue.** An SRQ
//! would need fewer buffers in large jobs, but (1) each sender gets its own `depth` buffers,
//! so one flooding sender cannot starve the others of buffers (with an SRQ it makes every
//! other sender hit RNR), (2) the sender is known from the receive's `wr_id` (peer rank and
//! buffer index), whereas an SRQ completion names its sender only by QP number, which
//! `sideway` 0.4 neither reads from work completions nor offers SRQs for, and (3) per-sender
//! order is the order of that QP's completions. Cost: `depth × passive_transfer_size_max`
//! bytes of registered memory per verbs peer (256 KiB by default), plus one send buffer.
//!
//! **Receive buffers** are one registered area of `peers × depth` buffers of
//! `passive_transfer_size_max` bytes (file-backed under the job's shared-memory prefix on the
//! fake device, so that peers' processes can fill it). They are posted at connect; a buffer
//! whose message has arrived stays taken until `passive_receive` has copied the message out,
//! then it is reposted. So at most `depth` messages per sender are delivered but not yet
//! received; the next SEND meets no receive buffer, RC answers "receiver not ready", and the
//! sender's HCA retries (unlimited RNR retry) until a buffer is reposted: flow control.
//!
//! **Sending**: the message is copied into the peer's registered send buffer (so that the
//! caller may reuse its segment at once, and so that a SEND left queued by a timeout keeps
//! its bytes) and posted as a signaled SEND; `passive_send` waits for its completion, which
//! on RC means the message is in the target's receive buffer. One SEND per peer is in flight
//! at a time (per-peer lock). When the deadline passes first, the SEND stays queued and
//! `Timeout` is returned; the next `passive_send` to that peer first waits for it, and if that
//! call sends the same bytes from the same segment range it is the caller's retry: it returns
//! when the queued SEND is delivered instead of sending the message twice. A different
//! message is sent after it (the timed-out one may thus be delivered although its call
//! reported `Timeout`; the TCP path in `crate::passive` behaves the same).

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use super::channel::{wr_id, wr_peer, Done, Op, ResultSlot};
use super::device::{Completion, WrOp};
use super::device::{CompletionQueue, Device, MemoryRegion, RecvRequest, Region, Sge};
use super::{Backoff, VerbsTransport, PASSIVE};
use crate::counters::{Counter, Stats};
use crate::env::shm_file;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::RemoteAddr;
use crate::types::SegKey;
use crate::types::{Deadline, Rank, SegmentId};

/// Registration key of the passive buffers (above user and group segments, below the
/// directory's); the fake device maps a peer's receive buffers by it.
pub(crate) const PASSIVE_KEY: SegKey = 510;
/// Send queue of a passive queue pair: one SEND in flight, room for the channel's spare slot.
pub(crate) const PASSIVE_SQ_DEPTH: u32 = 4;
const WR_SEQ: u64 = (1 << 48) - 1;

/// Registered memory cut into equal buffers.
struct Buffers {
    mem: SegmentMemory,
    _mr: Arc<dyn MemoryRegion>,
    lkey: u32,
    /// Device address of buffer 0.
    base: u64,
    size: usize,
}

impl Buffers {
    fn new(device: &dyn Device, count: usize, size: usize, file: Option<String>) -> Result<Self> {
        let len = count * size;
        let mem = match &file {
            Some(path) => SegmentMemory::create_shared(path.as_ref(), len, 0)?,
            None => SegmentMemory::anonymous(len, 0)?,
        };
        let (addr, map_len) = mem.mapping();
        let mr = device.register(&Region {
            key: PASSIVE_KEY,
            addr,
            len: map_len,
            file: file.map(Into::into),
        })?;
        let keys = mr.keys();
        let base = keys.base + mem.data_offset().expect("passive buffers are mapped") as u64;
        Ok(Buffers {
            mem,
            _mr: mr,
            lkey: keys.lkey,
            base,
            size,
        })
    }

    fn sge(&self, i: usize, len: usize) -> Sge {
        Sge {
            lkey: self.lkey,
            addr: self.base + (i * self.size) as u64,
            len: len as u32,
        }
    }
}

/// A message in a receive buffer, waiting for `passive_receive`.
#[derive(Clone, Copy)]
struct Arrived {
    from: Rank,
    buf: usize,
    len: usize,
}

/// A SEND whose `passive_send` timed out.
struct Pending {
    slot: Arc<ResultSlot>,
    what: (SegmentId, u64),
    data: Vec<u8>,
}

/// The passive-message state of a verbs transport.
pub(crate) struct PassiveVerbs {
    depth: usize,
    /// Position of each rank among the verbs peers (its buffers), `None` for the others.
    index: Vec<Option<usize>>,
    recv: Buffers,
    recv_cq: Arc<dyn CompletionQueue>,
    /// Arrived messages in completion order (so per sender in sending order).
    ready: Mutex<VecDeque<Arrived>>,
    send: Buffers,
    /// Per verbs peer: the SEND left queued by a timeout, if any. Held while sending.
    senders: Vec<Mutex<Option<Pending>>>,
}

impl PassiveVerbs {
    /// Registers the buffers for `peers`; `shared` puts the receive buffers in a file under
    /// `prefix` for the fake device.
    pub fn new(
        device: &dyn Device,
        me: Rank,
        peers: &[Rank],
        size: u32,
        depth: u32,
        recv_cq: Arc<dyn CompletionQueue>,
        shared: Option<&str>,
    ) -> Result<Self> {
        let size = (size as usize).max(1).next_multiple_of(64);
        let depth = depth as usize;
        let mut index = vec![None; peers.iter().map(|p| p.index() + 1).max().unwrap_or(0)];
        for (i, p) in peers.iter().enumerate() {
            index[p.index()] = Some(i);
        }
        let file = shared.map(|prefix| shm_file(prefix, me.0, PASSIVE_KEY).display().to_string());
        Ok(PassiveVerbs {
            depth,
            index,
            recv: Buffers::new(device, peers.len() * depth, size, file)?,
            recv_cq,
            ready: Mutex::default(),
            send: Buffers::new(device, peers.len(), size, None)?,
            senders: peers.iter().map(|_| Mutex::new(None)).collect(),
        })
    }

    fn position(&self, rank: Rank) -> Option<usize> {
        self.index.get(rank.index()).copied().flatten()
    }

    /// Receive request for buffer `buf` (of peer `from`).
    fn recv_request(&self, from: Rank, buf: usize) -> RecvRequest {
        RecvRequest {
            wr_id: wr_id(from, buf as u64),
            sge: self.recv.sge(buf, self.recv.size),
        }
    }

    /// The receive requests of `peer`'s buffers (posted at connect).
    pub fn initial_receives(&self, peer: Rank) -> Vec<RecvRequest> {
        let first = self.position(peer).map_or(0, |i| i * self.depth);
        (first..first + self.depth)
            .map(|b| self.recv_request(peer, b))
            .collect()
    }
}

impl VerbsTransport {
    /// Whether passive messages to `rank` go over verbs: it was connected over verbs at init.
    /// A later demotion of its one-sided route to TCP (a segment the device could not
    /// register) does not move them: one path per sender keeps its messages in order.
    pub fn has_passive(&self, rank: Rank) -> bool {
        self.passive.position(rank).is_some()
    }

    /// Sends `data` (read from `what` = (segment, offset)) to `rank` and waits until it is in
    /// one of `rank`'s receive buffers (see the module doc for timeouts and retries).
    pub fn passive_send(
        &self,
        rank: Rank,
        what: (SegmentId, u64),
        data: &[u8],
        deadline: Deadline,
        stats: &Stats,
    ) -> Result<()> {
        let p = &self.passive;
        let i = p.position(rank).ok_or(Error::NotConnected {
            rank,
            transport: "verbs",
        })?;
        if data.len() > p.send.size {
            return Err(Error::InvalidCommSize {
                size: data.len() as u64,
                max: p.send.size as u64,
            });
        }
        let mut pending = match deadline.remaining() {
            None => p.senders[i].lock(),
            Some(left) => p.senders[i].try_lock_for(left).ok_or(Error::Timeout)?,
        };
        if let Some(old) = pending.as_ref() {
            let retry = old.what == what && old.data == data;
            let slot = old.slot.clone();
            let res = self.await_send(rank, &slot, deadline);
            if !matches!(res, Err(Error::Timeout)) {
                *pending = None;
            }
            res?;
            stats.add(Counter::PassiveSentVerbs, 1);
            if retry {
                return Ok(());
            }
        }
        p.send.mem.copy_in(i * p.send.size, data);
        let slot = Arc::new(ResultSlot::default());
        self.post(
            rank,
            PASSIVE,
            Op {
                wrs: vec![(
                    WrOp::Send {
                        sge: p.send.sge(i, data.len()),
                    },
                    RemoteAddr { rkey: 0, addr: 0 },
                )],
                done: Done::Result(slot.clone()),
                hold: None,
                signal: true,
            },
        )?;
        let res = self.await_send(rank, &slot, deadline);
        if matches!(res, Err(Error::Timeout)) {
            *pending = Some(Pending {
                slot,
                what,
                data: data.to_vec(),
            });
        } else if res.is_ok() {
            stats.add(Counter::PassiveSentVerbs, 1);
        }
        res
    }

    /// Polls the passive send completions until `slot` is filled: `PeerFailed` on an error
    /// completion or when the peer is known to be unreachable (never a hang on a dead peer).
    fn await_send(&self, rank: Rank, slot: &ResultSlot, deadline: Deadline) -> Result<()> {
        let mut backoff = Backoff::new();
        loop {
            self.progress(PASSIVE);
            match slot.take() {
                Some(Ok(())) => return Ok(()),
                Some(Err(why)) => {
                    tracing::debug!("passive SEND to rank {rank} failed: {why}");
                    return Err(Error::PeerFailed { rank });
                }
                None => {}
            }
            if self.state.is_unreachable(rank) {
                return Err(Error::PeerFailed { rank });
            }
            if deadline.expired() {
                return Err(Error::Timeout);
            }
            backoff.pause(deadline.remaining());
        }
    }

    /// Takes the oldest message that arrived over verbs, if any: `place(from, bytes)` writes
    /// it where the caller wants it. A message longer than `max` stays first in line and
    /// the call fails with `InvalidSize`, as one that `place` refuses stays too. The buffer
    /// is reposted once the message is placed.
    pub fn passive_take(
        &self,
        max: u64,
        stats: &Stats,
        place: impl FnOnce(Rank, &[u8]) -> Result<()>,
    ) -> Option<Result<(Rank, u64)>> {
        let p = &self.passive;
        let mut ready = p.ready.lock();
        self.poll_receives(&mut ready);
        let m = *ready.front()?;
        if m.len as u64 > max {
            return Some(Err(Error::InvalidSize(format!(
                "passive message of {} bytes does not fit in {max}",
                m.len
            ))));
        }
        let mut data = vec![0u8; m.len];
        p.recv.mem.copy_out(m.buf * p.recv.size, &mut data);
        if let Err(e) = place(m.from, &data) {
            return Some(Err(e));
        }
        ready.pop_front();
        drop(ready);
        stats.add(Counter::PassiveReceivedVerbs, 1);
        let repost = self
            .channel(m.from, PASSIVE)
            .and_then(|ch| ch.lock().post_recv(&[p.recv_request(m.from, m.buf)]));
        if let Err(e) = repost {
            tracing::debug!("reposting a passive receive buffer of rank {}: {e}", m.from);
        }
        Some(Ok((m.from, m.len as u64)))
    }

    /// Moves completed receives into `ready`; an error completion marks its peer CORRUPT.
    fn poll_receives(&self, ready: &mut VecDeque<Arrived>) {
        let p = &self.passive;
        let mut done: Vec<Completion> = Vec::new();
        if let Err(e) = p.recv_cq.poll(&mut done, 256) {
            tracing::warn!("polling the passive receive queue: {e}");
        }
        for c in done {
            let from = wr_peer(c.wr_id);
            let buf = (c.wr_id & WR_SEQ) as usize;
            let len = c.byte_len as usize;
            let own = p
                .position(from)
                .is_some_and(|i| (i * p.depth..(i + 1) * p.depth).contains(&buf));
            let why = match c.status {
                Ok(()) if own && len <= p.recv.size => {
                    ready.push_back(Arrived { from, buf, len });
                    continue;
                }
                Ok(()) => format!("a receive completion for buffer {buf} of {len} bytes"),
                Err(why) => why,
            };
            if p.position(from).is_some() && self.state.mark_corrupt(from) {
                tracing::warn!("rank {from} marked CORRUPT: verbs receive completion error: {why}");
            }
        }
    }
}
