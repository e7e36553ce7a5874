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

use super::channel::{wr_id, ResultSlot};
use super::device::{CompletionQueue, Device, MemoryRegion, RecvRequest, Region, Sge};
use crate::env::shm_file;
use crate::error::Result;
use crate::memory::segment_memory::SegmentMemory;
use crate::types::SegKey;
use crate::types::{Rank, SegmentId};

/// Registration key of the passive buffers (above user and group segments, below the
/// directory's); the fake device maps a peer's receive buffers by it.
pub(crate) const PASSIVE_KEY: SegKey = 510;
/// Send queue of a passive queue pair: one SEND in flight, room for the channel's spare slot.
pub(crate) const PASSIVE_SQ_DEPTH: u32 = 4;
pub(super) const WR_SEQ: u64 = (1 << 48) - 1;

/// Registered memory cut into equal buffers.
pub(super) struct Buffers {
    pub(super) mem: SegmentMemory,
    pub(super) _mr: Arc<dyn MemoryRegion>,
    pub(super) lkey: u32,
    /// Device address of buffer 0.
    pub(super) base: u64,
    pub(super) size: usize,
}

impl Buffers {
    pub(super) fn new(
        device: &dyn Device,
        count: usize,
        size: usize,
        file: Option<String>,
    ) -> Result<Self> {
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

    pub(super) fn sge(&self, i: usize, len: usize) -> Sge {
        Sge {
            lkey: self.lkey,
            addr: self.base + (i * self.size) as u64,
            len: len as u32,
        }
    }
}

/// A message in a receive buffer, waiting for `passive_receive`.
#[derive(Clone, Copy)]
pub(super) struct Arrived {
    pub(super) from: Rank,
    pub(super) buf: usize,
    pub(super) len: usize,
}

/// A SEND whose `passive_send` timed out.
pub(super) struct Pending {
    pub(super) slot: Arc<ResultSlot>,
    pub(super) what: (SegmentId, u64),
    pub(super) data: Vec<u8>,
}

/// The passive-message state of a verbs transport.
pub(crate) struct PassiveVerbs {
    pub(super) depth: usize,
    /// Position of each rank among the verbs peers (its buffers), `None` for the others.
    pub(super) index: Vec<Option<usize>>,
    pub(super) recv: Buffers,
    pub(super) recv_cq: Arc<dyn CompletionQueue>,
    /// Arrived messages in completion order (so per sender in sending order).
    pub(super) ready: Mutex<VecDeque<Arrived>>,
    pub(super) send: Buffers,
    /// Per verbs peer: the SEND left queued by a timeout, if any. Held while sending.
    pub(super) senders: Vec<Mutex<Option<Pending>>>,
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

    pub(super) fn position(&self, rank: Rank) -> Option<usize> {
        self.index.get(rank.index()).copied().flatten()
    }

    /// Receive request for buffer `buf` (of peer `from`).
    pub(super) fn recv_request(&self, from: Rank, buf: usize) -> RecvRequest {
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
