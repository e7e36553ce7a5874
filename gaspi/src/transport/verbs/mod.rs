//! InfiniBand/RoCE verbs: RDMA straight into the peer's registered segment, no CPU on the
//! target. One RC queue pair per (peer, queue) plus one for internal traffic (collectives,
//! atomics, directory reads) and one for passive messages (SEND/RECV); one completion queue
//! per queue, polled in `wait`.
//!
//! Layers: [`device`] is the narrow interface to a device (real: [`ibv`] on `sideway`,
//! libibverbs loaded at run time; tests: [`fake`], with [`fake_passive`] for its receive
//! queues); [`channel`] is one queue pair and its in-flight ops; [`registry`] registers
//! segments and publishes their keys; [`address`] encodes what the rendezvous exchanges;
//! [`passive`] carries passive messages. This module sets them up and implements
//! [`Transport`]. Control traffic (segment registration, pings, peer death) stays on the TCP
//! mesh.

pub(crate) mod address;

pub(crate) mod channel;
pub(crate) mod device;
#[cfg(feature = "fake-verbs")]
pub(crate) mod fake;
#[cfg(feature = "fake-verbs")]
mod fake_fabric;
#[cfg(feature = "fake-verbs")]
pub(crate) mod fake_passive;
#[cfg(feature = "verbs")]
pub(crate) mod ibv;
pub(crate) mod open;
pub(crate) mod passive;
pub(crate) mod registry;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::backoff::Backoff;
use crate::config::limits;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::{RemoteAddr, RemoteKeys};
use crate::state::StateVector;
use crate::transport::completion::QueueState;
use crate::transport::{Dest, Transport, Xfer};
use crate::types::SegKey;
use crate::types::{AtomicOp, Deadline, Rank};
use address::{decode_qpns, encode_qpns, Endpoint, VerbsHello};
use channel::{wr_peer, Channel, Done, Op, ResultSlot};
use device::{Completion, CompletionQueue, Device, QueuePair, Sge, WrOp};
use passive::{PassiveVerbs, PASSIVE_SQ_DEPTH};

use registry::{Registry, ENTRY};

/// One-sided channels per peer: one per possible queue, then the internal one.
const CHANNELS: usize = limits::QUEUE_NUM_MAX as usize + 1;
const INTERNAL: usize = CHANNELS - 1;
/// The passive channel (SEND/RECV) follows them; its send completions have their own queue.
const PASSIVE: usize = CHANNELS;
/// Queue pairs (and completion queues in `cqs`) per peer.
const QPS: usize = CHANNELS + 1;
/// Largest single work request; longer transfers are split.
const MAX_WR_BYTES: usize = 1 << 30;
/// How long a directory read may take before the lookup fails.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Queue pairs created before the rendezvous, waiting for the peers' numbers.
pub(crate) struct VerbsSetup {
    device: Arc<dyn Device>,
    registry: Registry,
    cqs: Vec<Arc<dyn CompletionQueue>>,
    /// Receive completions of the passive queue pairs.
    recv_cq: Arc<dyn CompletionQueue>,
    qps: Vec<Vec<Box<dyn QueuePair>>>,
    psn: u32,
    sq_depth: u32,
    rank: Rank,
    passive: PassiveSizes,
    fake: bool,
}

/// Passive messages: the largest one (`passive_transfer_size_max`) and the receive buffers
/// posted per peer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PassiveSizes {
    pub size: u32,
    pub depth: u32,
}

impl VerbsSetup {
    /// Creates the completion queues, a queue pair per (peer, channel) and the registry.
    pub fn new(
        device: Arc<dyn Device>,
        rank: Rank,
        nranks: u16,
        queue_size_max: u32,
        passive: PassiveSizes,
        job_id: &str,
        fake: bool,
    ) -> Result<Self> {
        // Room for a full GASPI queue plus the fence, within what the device allows.
        let sq_depth = (queue_size_max + 1).min(device.max_qp_wr()).max(2);
        let registry = Registry::new(device.clone(), job_id, rank.0, fake)?;
        let peers = u32::from(nranks);
        let mut cqs = (0..CHANNELS)
            .map(|_| device.create_cq(sq_depth * peers))
            .collect::<Result<Vec<_>>>()?;
        cqs.push(device.create_cq(PASSIVE_SQ_DEPTH * peers)?);
        let recv_cq = device.create_cq(passive.depth * peers)?;
        let mut qps = Vec::with_capacity(usize::from(nranks));
        for p in 0..nranks {
            let mut v = Vec::new();
            if p != rank.0 {
                for cq in &cqs[..CHANNELS] {
                    v.push(device.create_qp(cq, cq, sq_depth, 0)?);
                }
                let sq = PASSIVE_SQ_DEPTH.min(device.max_qp_wr());
                v.push(device.create_qp(&cqs[PASSIVE], &recv_cq, sq, passive.depth)?);
            }
            qps.push(v);
        }
        let mut psn = [0u8; 4];
        getrandom::fill(&mut psn).map_err(|e| {
            Error::Device(format!("no randomness for packet sequence numbers: {e}"))
        })?;
        Ok(VerbsSetup {
            device,
            registry,
            cqs,
            recv_cq,
            qps,
            psn: u32::from_le_bytes(psn) & 0xff_ffff,
            sq_depth,
            rank,
            passive,
            fake,
        })
    }

    /// What this rank tells the others at the rendezvous.
    pub fn hello(&self) -> VerbsHello {
        let me = Endpoint {
            port: self.device.port(),
            psn: self.psn,
            directory: self.registry.directory_keys(),
        };
        VerbsHello {
            common: me.encode(),
            to_peer: self
                .qps
                .iter()
                .map(|v| encode_qpns(&v.iter().map(|q| q.qpn()).collect::<Vec<_>>()))
                .collect(),
        }
    }

    /// Connects the queue pairs of the peers in `peers` (the others are dropped), from what
    /// every rank published at the rendezvous: per rank, its endpoint record and its queue
    /// pair numbers meant for this rank.
    pub fn connect(
        self,
        published: &[(Vec<u8>, Vec<u8>)],
        peers: &[Rank],
        state: Arc<StateVector>,
        shm_prefix: Option<&str>,
    ) -> Result<VerbsTransport> {
        if let Some(p) = shm_prefix {
            self.device.attach_job(p);
        }
        let mut directories = vec![None; self.qps.len()];
        let mut channels: Vec<Option<Vec<Mutex<Channel>>>> = Vec::new();
        for (p, qps) in self.qps.into_iter().enumerate() {
            let rank = Rank(p as u16);
            if !peers.contains(&rank) {
                channels.push(None);
                continue;
            }
            let (common, qpns) = &published[p];
            let remote = Endpoint::decode(common)?
                .ok_or_else(|| Error::Bootstrap(format!("rank {p} has no verbs endpoint")))?;
            let qpns = decode_qpns(qpns, QPS)?;
            directories[p] = Some(remote.directory);
            let mut v = Vec::with_capacity(QPS);
            for (i, mut qp) in qps.into_iter().enumerate() {
                let ep = device::QpEndpoint {
                    addr: remote.port,
                    qpn: qpns[i],
                    psn: remote.psn,
                };
                qp.connect(self.psn, &ep)?;
                let queue = (i < INTERNAL).then_some(crate::types::QueueId(i as u8));
                let depth = if i == PASSIVE {
                    PASSIVE_SQ_DEPTH.min(self.device.max_qp_wr())
                } else {
                    self.sq_depth
                };
                v.push(Mutex::new(Channel::new(qp, rank, queue, depth)));
            }
            channels.push(Some(v));
        }
        // The fake device's peers fill the receive buffers from their own processes.
        let shared = match (self.fake, shm_prefix) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) => {
                return Err(Error::Device(
                    "fake device: no shared-memory prefix for the passive buffers".into(),
                ))
            }
        };
        let passive = PassiveVerbs::new(
            &*self.device,
            self.rank,
            peers,
            self.passive.size,
            self.passive.depth,
            self.recv_cq,
            shared,
        )?;
        for (p, v) in channels.iter().enumerate() {
            if let Some(v) = v {
                v[PASSIVE]
                    .lock()
                    .post_recv(&passive.initial_receives(Rank(p as u16)))?;
            }
        }
        Ok(VerbsTransport {
            device: self.device,
            registry: self.registry,
            cqs: self.cqs,
            channels,
            directories,
            state,
            passive,
        })
    }
}

pub(crate) struct VerbsTransport {
    device: Arc<dyn Device>,
    registry: Registry,
    /// One per channel index (queues, internal, passive sends).
    cqs: Vec<Arc<dyn CompletionQueue>>,
    channels: Vec<Option<Vec<Mutex<Channel>>>>,
    directories: Vec<Option<device::MrKeys>>,
    state: Arc<StateVector>,
    /// Last: its registered buffers outlive the queue pairs that may still use them.
    passive: PassiveVerbs,
}

impl VerbsTransport {
    pub fn describe(&self) -> String {
        self.device.describe()
    }

    fn channel(&self, rank: Rank, idx: usize) -> Result<&Mutex<Channel>> {
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
    pub fn progress(&self, idx: usize) {
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
    fn post(&self, rank: Rank, idx: usize, op: Op) -> Result<()> {
        let ch = self.channel(rank, idx)?;
        let n = op.wrs.len() as u32;
        if !ch.lock().has_room(n) {
            self.progress(idx);
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
        let slot = Arc::new(ResultSlot::default());
        self.post(
            rank,
            INTERNAL,
            Op {
                wrs: vec![wr],
                done: Done::Result(slot.clone()),
                hold: None,
                signal: true,
            },
        )?;
        let mut backoff = Backoff::new();
        loop {
            self.progress(INTERNAL);
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

    /// `wait` on a queue: fence the queue pairs whose last request went unsignaled, then
    /// poll the queue's completion queue until every op posted on the queue (on any
    /// transport) is complete.
    pub fn wait(&self, q: &QueueState, deadline: Deadline) -> Result<()> {
        let idx = usize::from(q.id().0);
        for v in self.channels.iter().flatten() {
            let mut ch = v[idx].lock();
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
        let mut backoff = Backoff::new();
        loop {
            self.progress(idx);
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
        if wrs.is_empty() {
            return Ok(());
        }
        self.post(
            x.remote.rank,
            Self::queue_channel(q),
            Op {
                wrs,
                done: Self::done_for(q),
                hold: Some(x.local.clone()),
                signal: false,
            },
        )
    }

    fn notify(&self, dst: &Dest, id: u32, value: u32, q: Option<&Arc<QueueState>>) -> Result<()> {
        let keys = Self::keys(dst)?;
        self.post(
            dst.rank,
            Self::queue_channel(q),
            Op {
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
            let dir =
                self.directories[x.remote.rank.index()].ok_or_else(|| Error::NotConnected {
                    rank: x.remote.rank,
                    transport: "verbs",
                })?;
            let sge = self.registry.local_slot_sge(x.local, id)?;
            let one = RemoteAddr {
                rkey: dir.rkey,
                addr: dir.base + (usize::from(registry::DIR_KEY) * ENTRY) as u64,
            };
            wrs.push((WrOp::Read { sge }, one));
        }
        if wrs.is_empty() {
            return Ok(());
        }
        self.post(
            x.remote.rank,
            Self::queue_channel(q),
            Op {
                wrs,
                done: Self::done_for(q),
                hold: Some(x.local.clone()),
                signal: false,
            },
        )
    }

    fn atomic(&self, dst: &Dest, off: usize, op: AtomicOp, deadline: Deadline) -> Result<u64> {
        let keys = Self::keys(dst)?;
        let (slot, sge) = self.registry.scratch(8)?;
        let wr = match op {
            AtomicOp::FetchAdd { add } => WrOp::FetchAdd { sge, add },
            AtomicOp::CompareSwap { expected, new } => WrOp::CompareSwap { sge, expected, new },
        };
        let remote = RemoteAddr {
            rkey: keys.data.rkey,
            addr: keys.data.addr + off as u64,
        };
        match self.call(dst.rank, (wr, remote), deadline) {
            Ok(()) => {
                let r = self.registry.read_scratch(slot);
                self.registry.release(slot);
                Ok(u64::from_le_bytes(r[..8].try_into().expect("8 bytes")))
            }
            // Still in flight: the slot stays taken (the device may write it later).
            Err(Error::Timeout) => Err(Error::Timeout),
            Err(e) => {
                self.registry.release(slot);
                Err(e)
            }
        }
    }
}
