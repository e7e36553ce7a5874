//! A fake verbs device for tests: it executes posted work requests itself, against the
//! peer's registered memory mapped from the peer's shared-memory segment file, and produces
//! completions the way an RC queue pair does (selective signaling, error completions that
//! move the queue pair to the error state, flushed requests after that).
//!
//! Selected with `GASPI_IB_DEVICE=fake`. Work requests execute when posted, unless deferred
//! (below), in posting order (data may land any time before its completion on a real
//! device; "at once" is one legal schedule). Fault injection: `GASPI_IB_FAKE_FAIL_AFTER=n` makes the n-th work request this
//! process posts fail with a remote access error; `GASPI_IB_FAKE_MAX_WR=n` sets the device's
//! send-queue limit; `GASPI_IB_FAKE_CQ_LAG=n` holds every completion back for `n` polls of
//! its completion queue (a slow network: work stays in the send queue);
//! `GASPI_IB_FAKE_DEFER_BYTES=n` runs an RDMA write of at least `n` bytes, and what is
//! posted behind it on its queue pair, only at the next poll of their send completion queue
//! (data that lands late, still in posting order and before its completion, as a real
//! device may; small writes, which the runtime's own notifications and barriers are, run at
//! once, as the runtime does not poll for those). Only for tests that `wait` on their queues:
//! the internal channel's completions are polled only while a reply is awaited, so a
//! collective whose writes are deferred never completes. A peer whose process is gone makes
//! every request to it fail as a retry-exceeded error, as the peer's silent HCA would.
//!
//! SEND/RECV (passive messages): receive queues live in shared-memory rings that the peer's
//! process fills ([`super::fake_passive`]); a SEND with no receive posted waits in the send
//! queue and is retried (RNR retry, unlimited) whenever this process posts on that queue pair
//! or polls its send completion queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use super::device::{
    Completion, CompletionQueue, Device, MemoryRegion, MrKeys, PortAddr, QpEndpoint, QueuePair,
    RecvRequest, Region, WorkRequest, WrOp,
};
use super::fake_fabric::{Fabric, KEY_BITS};
use super::fake_passive::{ring_file, RecvRing, SendRing};
use crate::error::{Error, Result};

pub const FAKE_FAIL_AFTER: &str = "GASPI_IB_FAKE_FAIL_AFTER";
pub const FAKE_MAX_WR: &str = "GASPI_IB_FAKE_MAX_WR";
pub const FAKE_CQ_LAG: &str = "GASPI_IB_FAKE_CQ_LAG";
pub const FAKE_DEFER_BYTES: &str = "GASPI_IB_FAKE_DEFER_BYTES";

pub(crate) struct FakeDevice {
    fabric: Arc<Fabric>,
}

fn env_num(name: &str) -> Result<Option<u64>> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map(Some)
            .map_err(|_| Error::Env(format!("{name}={v:?} is not a number"))),
        Err(_) => Ok(None),
    }
}

impl FakeDevice {
    pub fn new(rank: u16, job_id: &str) -> Result<Self> {
        let max_wr = env_num(FAKE_MAX_WR)?.unwrap_or(16384).clamp(2, 1 << 20) as u32;
        Ok(FakeDevice {
            fabric: Arc::new(Fabric {
                rank,
                job_id: job_id.to_string(),
                prefix: OnceLock::new(),
                local: Mutex::default(),
                remote: Mutex::default(),
                generation: AtomicU32::new(1),
                posted: AtomicU64::new(0),
                fail_after: env_num(FAKE_FAIL_AFTER)?,
                fail_next: Default::default(),
                cq_lag: env_num(FAKE_CQ_LAG)?.unwrap_or(0).min(1 << 20) as u32,
                defer_bytes: env_num(FAKE_DEFER_BYTES)?.map(|v| v.min(u64::from(u32::MAX)) as u32),
                max_wr,
            }),
        })
    }
}

struct FakeMr {
    keys: MrKeys,
    fabric: Arc<Fabric>,
}

impl MemoryRegion for FakeMr {
    fn keys(&self) -> MrKeys {
        self.keys
    }
}

impl Drop for FakeMr {
    fn drop(&mut self) {
        self.fabric.local.lock().remove(&self.keys.lkey);
    }
}

struct FakeCq {
    /// Completions with the number of polls they are still held back for.
    done: Mutex<VecDeque<(Completion, u32)>>,
    /// Queue pairs (sending here) with a SEND waiting for the peer to post a receive.
    stalled: Mutex<Vec<Weak<Mutex<QpState>>>>,
    /// Receive queues completing here (owned by their queue pairs).
    rings: Mutex<Vec<Weak<RecvRing>>>,
}

impl CompletionQueue for FakeCq {
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }

    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<()> {
        // The HCA's RNR retries, driven by the sender's polling.
        let stalled = std::mem::take(&mut *self.stalled.lock());
        for qp in stalled.iter().filter_map(Weak::upgrade) {
            let mut qp = qp.lock();
            qp.stalled = false;
            qp.run_backlog(true);
        }
        self.rings.lock().retain(|ring| match ring.upgrade() {
            Some(ring) => {
                ring.poll(out, max);
                true
            }
            None => false,
        });
        let mut d = self.done.lock();
        for (_, lag) in d.iter_mut() {
            *lag = lag.saturating_sub(1);
        }
        // In order: a held completion holds back the ones behind it.
        while out.len() < max && d.front().is_some_and(|(_, lag)| *lag == 0) {
            out.push(d.pop_front().expect("checked").0);
        }
        Ok(())
    }
}

struct FakeQp(Arc<Mutex<QpState>>);

struct QpState {
    qpn: u32,
    fabric: Arc<Fabric>,
    cq: Arc<FakeCq>,
    recv_cq: Arc<FakeCq>,
    rq_depth: u32,
    /// The peer's rank, process id and queue pair number, once connected.
    peer: Option<(u16, u32, u32)>,
    /// Set by the first error completion: later requests are flushed.
    error: bool,
    /// Requests not run yet: deferred to the next poll (`FAKE_DEFER`), or behind a SEND the
    /// peer had no receive for (each with whether it has been tried, so that fault
    /// injection counts it once).
    backlog: VecDeque<(WorkRequest, bool)>,
    /// Listed in `cq.stalled` (for a retry at its next poll).
    stalled: bool,
    me: Weak<Mutex<QpState>>,
    /// This QP's receive queue (created at connect when `rq_depth > 0`).
    recv: Option<Arc<RecvRing>>,
    /// The peer QP's receive queue, mapped once it exists.
    send: Option<SendRing>,
}

impl Device for FakeDevice {
    fn describe(&self) -> String {
        "fake verbs device (tests only)".into()
    }

    fn port(&self) -> PortAddr {
        let mut gid = [0u8; 16];
        gid[..4].copy_from_slice(&std::process::id().to_le_bytes());
        PortAddr {
            lid: self.fabric.rank,
            gid,
            gid_index: 0,
            port: 1,
            roce: false,
            mtu: 4096,
        }
    }

    fn max_qp_wr(&self) -> u32 {
        self.fabric.max_wr
    }

    fn register(&self, region: &Region) -> Result<Arc<dyn MemoryRegion>> {
        if u32::from(region.key) >= 1 << KEY_BITS {
            return Err(Error::Device(format!(
                "fake device: segment key {} too large",
                region.key
            )));
        }
        let generation = self.fabric.generation.fetch_add(1, Ordering::Relaxed);
        let lkey = (generation << KEY_BITS) | u32::from(region.key);
        self.fabric
            .local
            .lock()
            .insert(lkey, (region.addr as usize, region.len));
        // Peers reach only file-backed memory (what they can map); rkey 0 = not remotely
        // accessible, as user-bound memory is here.
        let rkey = if region.file.is_some() { lkey } else { 0 };
        Ok(Arc::new(FakeMr {
            keys: MrKeys {
                lkey,
                rkey,
                base: 0,
            },
            fabric: self.fabric.clone(),
        }))
    }

    fn create_cq(&self, _depth: u32) -> Result<Arc<dyn CompletionQueue>> {
        Ok(Arc::new(FakeCq {
            done: Mutex::default(),
            stalled: Mutex::default(),
            rings: Mutex::default(),
        }))
    }

    fn create_qp(
        &self,
        send_cq: &Arc<dyn CompletionQueue>,
        recv_cq: &Arc<dyn CompletionQueue>,
        _sq_depth: u32,
        rq_depth: u32,
    ) -> Result<Box<dyn QueuePair>> {
        let ours = |cq: &Arc<dyn CompletionQueue>| {
            cq.clone()
                .into_any()
                .downcast::<FakeCq>()
                .map_err(|_| Error::Device("fake device: a foreign completion queue".into()))
        };
        let (cq, recv_cq) = (ours(send_cq)?, ours(recv_cq)?);
        static NEXT_QPN: AtomicU32 = AtomicU32::new(0x100);
        let qpn = NEXT_QPN.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(FakeQp(Arc::new_cyclic(|me| {
            Mutex::new(QpState {
                qpn,
                fabric: self.fabric.clone(),
                cq,
                recv_cq,
                rq_depth,
                peer: None,
                error: false,
                backlog: VecDeque::new(),
                stalled: false,
                me: me.clone(),
                recv: None,
                send: None,
            })
        }))))
    }

    fn attach_job(&self, shm_prefix: &str) {
        let _ = self.fabric.prefix.set(shm_prefix.to_string());
    }

    fn inject_fault(&self) -> bool {
        self.fabric.fail_next.store(true, Ordering::Relaxed);
        true
    }
}

fn alive(pid: u32) -> bool {
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    !matches!(
        nix::sys::signal::kill(pid, None),
        Err(nix::errno::Errno::ESRCH)
    )
}

impl QpState {
    /// Runs one request: `None` when it is a SEND the peer has no receive posted for.
    fn run(&mut self, wr: &WorkRequest, tried: bool) -> Option<std::result::Result<(), String>> {
        let (peer, pid, remote_qpn) = self.peer.expect("checked at post");
        if self.error {
            return Some(Err(
                "work request flushed (queue pair in error state)".into()
            ));
        }
        if !alive(pid) {
            return Some(Err(
                "transport retry counter exceeded (the peer does not answer)".into(),
            ));
        }
        if !tried {
            if let Some(why) = self.fabric.fault() {
                return Some(Err(why));
            }
        }
        let WrOp::Send { sge } = wr.op else {
            return Some(self.fabric.execute(peer, wr));
        };
        if self.send.is_none() {
            let prefix = self.fabric.prefix.get()?;
            self.send = SendRing::open(&ring_file(prefix, peer, remote_qpn));
        }
        self.send.as_ref()?.deliver(&self.fabric, peer, &sge)
    }

    /// Runs queued requests in order until one meets a peer without a receive posted or,
    /// unless the send completion queue is being `polled`, one that is deferred, then
    /// registers for a retry at the next poll of the send completion queue.
    fn run_backlog(&mut self, polled: bool) {
        let mut done = Vec::new();
        while let Some((wr, tried)) = self.backlog.pop_front() {
            let deferred = match (wr.op, self.fabric.defer_bytes) {
                (WrOp::Write { sge }, Some(least)) => sge.len >= least,
                _ => false,
            };
            if deferred && !polled {
                self.backlog.push_front((wr, tried));
                break;
            }
            match self.run(&wr, tried) {
                None => {
                    self.backlog.push_front((wr, true));
                    break;
                }
                Some(status) => {
                    if status.is_err() {
                        self.error = true;
                    }
                    if wr.signaled || status.is_err() {
                        let c = Completion {
                            wr_id: wr.wr_id,
                            status,
                            byte_len: 0,
                        };
                        done.push((c, self.fabric.cq_lag));
                    }
                }
            }
        }
        self.cq.done.lock().extend(done);
        if !self.backlog.is_empty() {
            self.stall();
        }
    }

    /// Has the next poll of the send completion queue run the backlog.
    fn stall(&mut self) {
        if !self.stalled {
            self.stalled = true;
            self.cq.stalled.lock().push(self.me.clone());
        }
    }
}

impl QueuePair for FakeQp {
    fn qpn(&self) -> u32 {
        self.0.lock().qpn
    }

    fn connect(&mut self, _local_psn: u32, remote: &QpEndpoint) -> Result<()> {
        let mut qp = self.0.lock();
        let pid = u32::from_le_bytes(remote.addr.gid[..4].try_into().expect("4 bytes"));
        qp.peer = Some((remote.addr.lid, pid, remote.qpn));
        if qp.rq_depth > 0 {
            let prefix = qp.fabric.prefix.get().ok_or_else(|| {
                Error::Device("fake device: receive queue before the job is attached".into())
            })?;
            let path = ring_file(prefix, qp.fabric.rank, qp.qpn);
            let ring = Arc::new(RecvRing::create(&path, qp.qpn, qp.rq_depth)?);
            qp.recv_cq.rings.lock().push(Arc::downgrade(&ring));
            qp.recv = Some(ring);
        }
        Ok(())
    }

    fn post_send(&mut self, wrs: &[WorkRequest]) -> Result<()> {
        let mut qp = self.0.lock();
        if qp.peer.is_none() {
            return Err(Error::Device(
                "fake device: posting on an unconnected QP".into(),
            ));
        }
        qp.backlog.extend(wrs.iter().map(|wr| (*wr, false)));
        qp.run_backlog(false);
        Ok(())
    }

    fn post_recv(&mut self, wrs: &[RecvRequest]) -> Result<()> {
        let qp = self.0.lock();
        let ring = qp.recv.as_ref().ok_or_else(|| {
            Error::Device("fake device: posting a receive on a QP without a receive queue".into())
        })?;
        ring.post(wrs)
    }
}
