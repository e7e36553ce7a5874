//! The verbs transport: RDMA writes, reads and atomics straight into peers' registered
//! segments, on one queue pair per (peer, queue), completions polled in `wait`.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::channel::{wr_peer, Channel, Done, ResultSlot, WorkBatch};
use super::device::{Completion, CompletionQueue, Device, Sge, WrOp};
use super::layout::{INTERNAL, LOOKUP_TIMEOUT, MAX_WR_BYTES};
use super::passive::PassiveVerbs;
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::{RemoteAddr, RemoteKeys};
use crate::state::StateVector;
use crate::transport::completion::QueueState;
use crate::transport::requests::{AtomicCall, AtomicsInDoubt};
use crate::transport::{Dest, Transport, Xfer};
use crate::types::SegKey;
use crate::types::{AtomicOp, Deadline, QueueId, Rank};

use super::registry::{Registry, ENTRY};

pub(crate) struct VerbsTransport {
    pub(super) device: Arc<dyn Device>,
    pub(super) registry: Registry,
    /// One per channel index (queues, internal, passive sends).
    pub(super) cqs: Vec<Arc<dyn CompletionQueue>>,
    pub(super) channels: Vec<Option<Vec<Mutex<Channel>>>>,
    pub(super) directories: Vec<Option<super::device::MrKeys>>,
    pub(super) state: Arc<StateVector>,
    /// Atomics whose call timed out, with their completion and the scratch slot the device
    /// writes the old value into (see [`AtomicsInDoubt`]).
    pub(super) atomics_in_doubt: AtomicsInDoubt<(Arc<ResultSlot>, usize)>,
    /// Last: its registered buffers outlive the queue pairs that may still use them.
    pub(super) passive: PassiveVerbs,
}

impl VerbsTransport {
    pub fn describe(&self) -> String {
        self.device.describe()
    }

    pub(super) fn channel(&self, rank: Rank, idx: usize) -> Result<&Mutex<Channel>> {
        self.channels
            .get(rank.index())
            .and_then(|c| c.as_ref())
            .map(|v| &v[idx])
            .ok_or(Error::NotConnected {
                rank,
                transport: "verbs",
            })
    }

    /// Registers a new local segment with the device (at alloc, bind and group creation).
    /// Test hook: the next work request fails (fake device only).
    #[cfg(feature = "testing")]
    pub fn inject_fault(&self) -> bool {
        self.device.inject_fault()
    }

    pub fn register_segment(&self, key: SegKey, mem: &Arc<SegmentMemory>) -> Result<()> {
        self.registry.add(key, mem)
    }

    pub fn unregister_segment(&self, key: SegKey) {
        self.registry.remove(key)
    }

    /// Polls completion queue `idx` once and retires what completed; an error completion
    /// marks its peer CORRUPT.
    pub fn poll_completions(&self, idx: usize) {
        let mut done: Vec<Completion> = Vec::new();
        if let Err(e) = self.cqs[idx].poll(&mut done, 256) {
            tracing::warn!("polling completion queue {idx}: {e}");
        }
        for c in done {
            let peer = wr_peer(c.wr_id);
            if let Err(why) = &c.status {
                if self.state.mark_corrupt(peer) {
                    tracing::warn!("rank {peer} marked CORRUPT: verbs completion error: {why}");
                }
            }
            if let Ok(ch) = self.channel(peer, idx) {
                ch.lock().complete(c.wr_id & ((1 << 48) - 1), c.status);
            }
        }
        // Ops towards a peer that failed elsewhere (its TCP connection) will never complete.
        for v in self.channels.iter().flatten() {
            let mut ch = v[idx].lock();
            if !ch.idle() {
                let peer = ch.peer();
                if self.state.is_corrupt(peer) {
                    ch.fail(format!("rank {peer} failed"));
                }
            }
        }
    }

    /// Posts `op` on channel `idx` to `rank`; `QUEUE_FULL` when the send queue has no room
    /// even after retiring what completed.
    pub(super) fn post(&self, rank: Rank, idx: usize, op: WorkBatch) -> Result<()> {
        let ch = self.channel(rank, idx)?;
        let n = op.wrs.len() as u32;
        if !ch.lock().has_room(n) {
            self.poll_completions(idx);
        }
        let mut c = ch.lock();
        if !c.has_room(n) {
            return Err(c.queue_full());
        }
        c.post(op)
    }

    fn queue_channel(q: Option<&Arc<QueueState>>) -> usize {
        q.map_or(INTERNAL, |q| usize::from(q.id().0))
    }

    fn done_for(q: Option<&Arc<QueueState>>) -> Done {
        q.map_or(Done::Nothing, |q| Done::Queue(q.clone()))
    }

    fn keys(dst: &Dest) -> Result<RemoteKeys> {
        dst.verbs.ok_or_else(|| {
            Error::Device(format!(
                "segment {} of rank {} has no registered memory region",
                dst.key, dst.rank
            ))
        })
    }

    /// Posts the work requests of transfer `x` on its queue's channel (nothing when there
    /// are none), keeping the local segment mapped until they complete.
    fn post_transfer(
        &self,
        x: &Xfer<'_>,
        q: Option<&Arc<QueueState>>,
        wrs: Vec<(WrOp, RemoteAddr)>,
    ) -> Result<()> {
        if wrs.is_empty() {
            return Ok(());
        }
        self.post(
            x.remote.rank,
            Self::queue_channel(q),
            WorkBatch {
                wrs,
                done: Self::done_for(q),
                hold: Some(x.local.clone()),
                signal: false,
            },
        )
    }

    fn notify_wr(keys: &RemoteKeys, id: u32, value: u32) -> (WrOp, RemoteAddr) {
        (
            WrOp::WriteInline {
                data: value.to_le_bytes(),
            },
            RemoteAddr {
                rkey: keys.ctl.rkey,
                addr: keys.ctl.addr + SegmentMemory::slot_offset(id) as u64,
            },
        )
    }

    /// Work requests moving `[off, off+len)` between local and remote data, split into
    /// pieces the device accepts.
    fn pieces(
        &self,
        x: &Xfer<'_>,
        keys: &RemoteKeys,
        make: fn(Sge) -> WrOp,
    ) -> Result<Vec<(WrOp, RemoteAddr)>> {
        let mut v = Vec::new();
        let mut done = 0;
        while done < x.len {
            let n = (x.len - done).min(MAX_WR_BYTES);
            let sge = self
                .registry
                .local_sge(x.local, x.local_off + done, n as u32)?;
            let remote = RemoteAddr {
                rkey: keys.data.rkey,
                addr: keys.data.addr + (x.remote_off + done) as u64,
            };
            v.push((make(sge), remote));
            done += n;
        }
        Ok(v)
    }

    /// Posts a signaled request on the internal channel and waits for its completion.
    fn call(&self, rank: Rank, wr: (WrOp, RemoteAddr), deadline: Deadline) -> Result<()> {
        let slot = self.start_call(rank, wr)?;
        self.wait_call(rank, &slot, deadline)
    }

    /// Posts one signalled work request on `rank`'s internal channel; its completion lands
    /// in the returned slot.
    fn start_call(&self, rank: Rank, wr: (WrOp, RemoteAddr)) -> Result<Arc<ResultSlot>> {
        let slot = Arc::new(ResultSlot::default());
        self.post(
            rank,
            INTERNAL,
            WorkBatch {
                wrs: vec![wr],
                done: Done::Result(slot.clone()),
                hold: None,
                signal: true,
            },
        )?;
        Ok(slot)
    }

    /// Polls the internal channel until `slot`'s work request completes or `deadline`
    /// passes (`Timeout`: it is still in flight).
    fn wait_call(&self, rank: Rank, slot: &ResultSlot, deadline: Deadline) -> Result<()> {
        let mut backoff = Backoff::new();
        loop {
            self.poll_completions(INTERNAL);
            match slot.take() {
                Some(Ok(())) => return Ok(()),
                Some(Err(why)) => {
                    tracing::debug!("verbs request to rank {rank} failed: {why}");
                    return Err(Error::PeerFailed { rank });
                }
                None => {}
            }
            if deadline.expired() {
                return Err(Error::Timeout);
            }
            backoff.pause(deadline.remaining());
        }
    }

    /// Reads `rank`'s directory entry for segment `key`: its keys, or `None` when the
    /// segment's memory is not remotely accessible (the caller then uses TCP).
    pub fn lookup(&self, rank: Rank, key: SegKey) -> Result<Option<RemoteKeys>> {
        let dir = self.directories[rank.index()].ok_or(Error::NotConnected {
            rank,
            transport: "verbs",
        })?;
        let (slot, sge) = self.registry.scratch(ENTRY as u32)?;
        let remote = RemoteAddr {
            rkey: dir.rkey,
            addr: dir.base + (usize::from(key) * ENTRY) as u64,
        };
        let res = self.call(
            rank,
            (WrOp::Read { sge }, remote),
            Deadline::after(LOOKUP_TIMEOUT),
        );
        match res {
            Ok(()) => {
                let entry = self.registry.read_scratch(slot);
                self.registry.release(slot);
                Ok(RemoteKeys::decode(&entry))
            }
            // Still in flight: the slot stays taken (the device may write it later).
            Err(Error::Timeout) => Err(Error::Device(format!(
                "rank {rank} did not answer a directory read within {LOOKUP_TIMEOUT:?}"
            ))),
            Err(e) => {
                self.registry.release(slot);
                Err(e)
            }
        }
    }

    /// Completes everything posted to `rank` on queue `queue`'s channel: fences it if busy
    /// and polls its completion queue until it is idle, within [`LOOKUP_TIMEOUT`] (the bound
    /// of the directory read the same post may make; a post has no timeout of its own).
    /// Why: an op to a peer reached over verbs that goes over TCP instead must not overtake
    /// what was posted before it on its queue; a notification over TCP would otherwise tell
    /// the peer that data is there which an RDMA write has yet to deliver. A peer never
    /// reached over verbs has no channels: nothing to do.
    pub fn quiesce(&self, rank: Rank, queue: QueueId) -> Result<()> {
        let idx = usize::from(queue.0);
        let Some(ch) = self
            .channels
            .get(rank.index())
            .and_then(|c| c.as_ref()?.get(idx))
        else {
            return Ok(());
        };
        if ch.lock().idle() {
            return Ok(());
        }
        self.fence(&mut ch.lock());
        let deadline = Deadline::after(LOOKUP_TIMEOUT);
        let mut backoff = Backoff::new();
        while !ch.lock().idle() {
            self.poll_completions(idx);
            if deadline.expired() {
                return Err(Error::Device(format!(
                    "requests to rank {rank} over verbs on queue {} did not complete within \
                     {LOOKUP_TIMEOUT:?}",
                    queue.0
                )));
            }
            backoff.pause(deadline.remaining());
        }
        Ok(())
    }

    /// Posts a signaled request behind `ch`'s last one if that went unsignaled, so that a
    /// completion retires everything in flight on it; a channel that cannot post one fails
    /// and its peer is marked CORRUPT.
    fn fence(&self, ch: &mut Channel) {
        let peer = ch.peer();
        if let Some(dir) = self.directories[peer.index()] {
            let remote = RemoteAddr {
                rkey: dir.rkey,
                addr: dir.base,
            };
            if let Err(e) = ch.fence(self.registry.empty_sge(), remote) {
                ch.fail(format!("posting a fence: {e}"));
                self.state.mark_corrupt(peer);
            }
        }
    }

    /// `wait` on a queue: fence the queue pairs whose last request went unsignaled, then
    /// poll the queue's completion queue until every op posted on the queue (on any
    /// transport) is complete.
    pub fn wait(&self, q: &QueueState, deadline: Deadline) -> Result<()> {
        let idx = usize::from(q.id().0);
        for v in self.channels.iter().flatten() {
            self.fence(&mut v[idx].lock());
        }
        let mut backoff = Backoff::new();
        loop {
            self.poll_completions(idx);
            match q.wait(Deadline::after(Duration::ZERO)) {
                Err(Error::Timeout) => {}
                other => return other,
            }
            if deadline.expired() {
                return Err(Error::Timeout);
            }
            backoff.pause(deadline.remaining());
        }
    }
}

impl Transport for VerbsTransport {
    fn write(
        &self,
        x: &Xfer<'_>,
        notify: Option<(u32, u32)>,
        q: Option<&Arc<QueueState>>,
    ) -> Result<()> {
        let keys = Self::keys(x.remote)?;
        let mut wrs = self.pieces(x, &keys, |sge| WrOp::Write { sge })?;
        if let Some((id, value)) = notify {
            wrs.push(Self::notify_wr(&keys, id, value));
        }
        self.post_transfer(x, q, wrs)
    }

    fn notify(&self, dst: &Dest, id: u32, value: u32, q: Option<&Arc<QueueState>>) -> Result<()> {
        let keys = Self::keys(dst)?;
        self.post(
            dst.rank,
            Self::queue_channel(q),
            WorkBatch {
                wrs: vec![Self::notify_wr(&keys, id, value)],
                done: Self::done_for(q),
                hold: None,
                signal: false,
            },
        )
    }

    fn read(&self, x: &Xfer<'_>, notify: Option<u32>, q: Option<&Arc<QueueState>>) -> Result<()> {
        let keys = Self::keys(x.remote)?;
        let mut wrs = self.pieces(x, &keys, |sge| WrOp::Read { sge })?;
        if let Some(id) = notify {
            // The constant 1 in the peer's directory, read into our notification slot after
            // the data: RC places read responses in order.
            let dir = self.directories[x.remote.rank.index()].ok_or(Error::NotConnected {
                rank: x.remote.rank,
                transport: "verbs",
            })?;
            let sge = self.registry.local_slot_sge(x.local, id)?;
            let one = RemoteAddr {
                rkey: dir.rkey,
                addr: dir.base + (usize::from(super::registry::DIR_KEY) * ENTRY) as u64,
            };
            wrs.push((WrOp::Read { sge }, one));
        }
        self.post_transfer(x, q, wrs)
    }

    /// As over TCP, an atomic posted is applied by the target's device, so a `Timeout` here
    /// leaves it in doubt for the caller's retry with the same arguments (see
    /// [`AtomicsInDoubt`]).
    fn atomic(&self, dst: &Dest, off: usize, op: AtomicOp, deadline: Deadline) -> Result<u64> {
        let call = AtomicCall::on(dst, off, op);
        let (done, scratch) = match self.atomics_in_doubt.take(&call) {
            Some(posted) => posted,
            None => {
                let keys = Self::keys(dst)?;
                let (scratch, sge) = self.registry.scratch(8)?;
                let wr = match op {
                    AtomicOp::FetchAdd { add } => WrOp::FetchAdd { sge, add },
                    AtomicOp::CompareSwap { expected, new } => {
                        WrOp::CompareSwap { sge, expected, new }
                    }
                };
                let remote = RemoteAddr {
                    rkey: keys.data.rkey,
                    addr: keys.data.addr + off as u64,
                };
                match self.start_call(dst.rank, (wr, remote)) {
                    Ok(done) => (done, scratch),
                    Err(e) => {
                        self.registry.release(scratch);
                        return Err(e);
                    }
                }
            }
        };
        match self.wait_call(dst.rank, &done, deadline) {
            Ok(()) => {
                let r = self.registry.read_scratch(scratch);
                self.registry.release(scratch);
                Ok(u64::from_le_bytes(r[..8].try_into().expect("8 bytes")))
            }
            // Still in flight: its scratch slot stays taken (the device may write it later).
            // One given up to make room frees its slot only if it has completed since.
            Err(Error::Timeout) => {
                if let Some((given_up, slot)) = self.atomics_in_doubt.keep(call, (done, scratch)) {
                    if given_up.take().is_some() {
                        self.registry.release(slot);
                    }
                }
                Err(Error::Timeout)
            }
            Err(e) => {
                self.registry.release(scratch);
                Err(e)
            }
        }
    }
}
