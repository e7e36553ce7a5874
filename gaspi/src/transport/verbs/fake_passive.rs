//! The fake device's receive queues: SEND/RECV between rank processes.
//!
//! A queue pair that can receive (`rq_depth > 0`) keeps its receive queue in a ring in a
//! shared-memory file under the job's prefix, `<prefix>-r<rank>-rq<qpn>`, created by the
//! receiving process when the QP is connected and removed when the QP is dropped (at
//! finalize). The process at the other end of the connection maps the same file: it is the
//! only one that fills entries, as the peer's HCA would.
//!
//! Layout (all words `u64`, little-endian, accessed atomically):
//! - `POSTED` (written by the receiver): receives posted so far;
//! - `DELIVERED` (written by the sender): receives filled so far;
//! - entry `k % RING_CAP`, 32 bytes: `wr_id`, buffer address (an offset in the receiver's
//!   registered region, like every fake address), `len << 32 | lkey`, and, once filled,
//!   `status << 32 | byte_len`.
//!
//! Ordering: the receiver writes an entry, then `POSTED` (Release); the sender reads `POSTED`
//! (Acquire), the entry, copies the message into the buffer, writes the result, then
//! `DELIVERED` (Release); the receiver reads `DELIVERED` (Acquire) before the entry and the
//! buffer. The receiver reuses entry `k` only after it polled its completion, so the sender
//! is done with it.
//!
//! A SEND that finds no receive posted is "receiver not ready": the sender keeps it queued
//! and retries it whenever its process posts on that QP or polls its send completion queue
//! (a real HCA retries by itself; here the sender's own polling drives it).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::device::{Completion, RecvRequest, Sge, PASSIVE_DEPTH_MAX};
use super::fake_fabric::Fabric;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::RemoteAddr;

/// Entries of a ring: the most receives a queue pair may have outstanding.
const RING_CAP: u64 = PASSIVE_DEPTH_MAX as u64;
const POSTED: usize = 0;
const DELIVERED: usize = 8;
const HEADER: usize = 64;
const ENTRY: usize = 32;
const RING_LEN: usize = HEADER + RING_CAP as usize * ENTRY;
/// `status` of an entry filled by a SEND that did not fit the buffer.
const LENGTH_ERROR: u64 = 1;

/// The file of the receive queue of `rank`'s queue pair `qpn`.
pub(super) fn ring_file(prefix: &str, rank: u16, qpn: u32) -> PathBuf {
    PathBuf::from(format!("{prefix}-r{rank}-rq{qpn:x}"))
}

struct Ring(SegmentMemory);

impl Ring {
    fn word(&self, off: usize) -> &AtomicU64 {
        self.0
            .atomic_u64(off)
            .expect("ring offsets are aligned and inside the ring")
    }

    fn entry(&self, k: u64, field: usize) -> &AtomicU64 {
        self.word(HEADER + (k % RING_CAP) as usize * ENTRY + field * 8)
    }
}

/// The receiving side of a ring (one per queue pair with a receive queue).
pub(super) struct RecvRing {
    ring: Ring,
    qpn: u32,
    depth: u64,
    /// Completions polled so far.
    polled: Mutex<u64>,
}

impl RecvRing {
    /// Creates the ring file of queue pair `qpn` (unlinked when this value is dropped).
    pub fn create(path: &Path, qpn: u32, depth: u32) -> Result<Self> {
        if u64::from(depth) > RING_CAP {
            return Err(Error::Device(format!(
                "fake device: receive queue of {depth} entries (at most {RING_CAP})"
            )));
        }
        Ok(RecvRing {
            ring: Ring(SegmentMemory::create_shared(path, RING_LEN, 0)?),
            qpn,
            depth: u64::from(depth),
            polled: Mutex::new(0),
        })
    }

    /// Posts receive buffers; fails, posting none, when they do not fit the receive queue.
    /// The caller (the queue pair, under its lock) is the only writer of `POSTED`.
    pub fn post(&self, wrs: &[RecvRequest]) -> Result<()> {
        let posted = self.ring.word(POSTED).load(Ordering::Relaxed);
        let outstanding = posted - *self.polled.lock();
        if outstanding + wrs.len() as u64 > self.depth {
            return Err(Error::Device(format!(
                "fake device: receive queue of QP {:#x} full ({outstanding} of {} posted)",
                self.qpn, self.depth
            )));
        }
        for (i, wr) in wrs.iter().enumerate() {
            let k = posted + i as u64;
            let r = &self.ring;
            r.entry(k, 0).store(wr.wr_id, Ordering::Relaxed);
            r.entry(k, 1).store(wr.sge.addr, Ordering::Relaxed);
            let len_key = (u64::from(wr.sge.len) << 32) | u64::from(wr.sge.lkey);
            r.entry(k, 2).store(len_key, Ordering::Relaxed);
            r.entry(k, 3).store(0, Ordering::Relaxed);
        }
        self.ring
            .word(POSTED)
            .store(posted + wrs.len() as u64, Ordering::Release);
        Ok(())
    }

    /// Appends the completions of filled receives, in order.
    pub fn poll(&self, out: &mut Vec<Completion>, max: usize) {
        let mut polled = self.polled.lock();
        let delivered = self.ring.word(DELIVERED).load(Ordering::Acquire);
        while *polled < delivered && out.len() < max {
            let k = *polled;
            let result = self.ring.entry(k, 3).load(Ordering::Relaxed);
            let byte_len = result as u32;
            out.push(Completion {
                wr_id: self.ring.entry(k, 0).load(Ordering::Relaxed),
                status: match result >> 32 {
                    0 => Ok(()),
                    _ => Err("local length error (a message larger than the buffer)".into()),
                },
                byte_len,
            });
            *polled += 1;
        }
    }
}

/// The sending side: the peer's ring, once the peer has created it.
pub(super) struct SendRing(Ring);

impl SendRing {
    /// Maps the peer's ring; `None` while it does not exist (yet).
    pub fn open(path: &Path) -> Option<Self> {
        SegmentMemory::open_shared(path, RING_LEN, 0)
            .ok()
            .map(|m| SendRing(Ring(m)))
    }

    /// Executes a SEND of `sge` into the next receive the peer posted: `None` when there is
    /// none (RNR), else the sender's completion status.
    pub fn deliver(
        &self,
        fabric: &Fabric,
        peer: u16,
        sge: &Sge,
    ) -> Option<std::result::Result<(), String>> {
        let src = match fabric.local(sge) {
            Ok(p) => p,
            Err(why) => return Some(Err(why)),
        };
        let r = &self.0;
        let posted = r.word(POSTED).load(Ordering::Acquire);
        let k = r.word(DELIVERED).load(Ordering::Relaxed);
        if k == posted {
            return None;
        }
        let addr = r.entry(k, 1).load(Ordering::Relaxed);
        let len_key = r.entry(k, 2).load(Ordering::Relaxed);
        let (len, lkey) = ((len_key >> 32) as u32, len_key as u32);
        let n = sge.len as usize;
        let placed = if sge.len > len {
            Err(format!(
                "remote operation error: a SEND of {n} bytes into a receive buffer of {len}"
            ))
        } else {
            fabric
                .remote(peer, &RemoteAddr { rkey: lkey, addr }, n)
                .map(|dst| {
                    // SAFETY: `src` is bounds-checked registered local memory, `dst` a
                    // bounds-checked range of the peer's registered receive buffers, posted
                    // for this message and left alone by the peer until `DELIVERED` passes it.
                    unsafe { std::ptr::copy(src, dst, n) };
                })
        };
        let result = match &placed {
            Ok(()) => u64::from(sge.len),
            Err(_) => LENGTH_ERROR << 32,
        };
        r.entry(k, 3).store(result, Ordering::Relaxed);
        r.word(DELIVERED).store(k + 1, Ordering::Release);
        Some(placed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::transport::verbs::device::WrOp;
    use crate::transport::verbs::device::{Device, PortAddr, QpEndpoint, Region, WorkRequest};
    use crate::transport::verbs::fake::FakeDevice;

    /// The registration key of the receive buffers (the transport's `PASSIVE_KEY`).
    const PASSIVE_KEY: crate::types::SegKey = 510;

    fn recv(wr_id: u64, addr: u64, len: u32) -> RecvRequest {
        RecvRequest {
            wr_id,
            sge: Sge { lkey: 7, addr, len },
        }
    }

    /// The ring protocol without the data copy: post, fill, poll in order, reuse entries,
    /// and refuse more receives than the depth.
    #[test]
    fn ring_posts_fills_and_completes_in_order() {
        let path = std::env::temp_dir().join(format!("tnt-ringtest-{}", std::process::id()));
        let rx = RecvRing::create(&path, 0x101, 2).unwrap();
        let tx = SendRing::open(&path).unwrap();
        let fill = |len: u32| {
            let r = &tx.0;
            let k = r.word(DELIVERED).load(Ordering::Relaxed);
            if k == r.word(POSTED).load(Ordering::Acquire) {
                return false;
            }
            r.entry(k, 3).store(u64::from(len), Ordering::Relaxed);
            r.word(DELIVERED).store(k + 1, Ordering::Release);
            true
        };
        assert!(!fill(1), "nothing posted: receiver not ready");
        rx.post(&[recv(1, 0, 64), recv(2, 64, 64)]).unwrap();
        assert!(rx.post(&[recv(3, 128, 64)]).is_err(), "depth 2");
        assert!(fill(10) && fill(20) && !fill(30));
        let mut out = Vec::new();
        rx.poll(&mut out, 1);
        rx.poll(&mut out, 8);
        let got: Vec<(u64, u32)> = out.iter().map(|c| (c.wr_id, c.byte_len)).collect();
        assert_eq!(got, [(1, 10), (2, 20)]);
        for round in 0..(2 * RING_CAP) {
            rx.post(&[recv(round, 0, 64)]).unwrap();
            assert!(fill(5));
            out.clear();
            rx.poll(&mut out, 8);
            assert_eq!(out[0].wr_id, round);
        }
        drop(tx);
        drop(rx);
        assert!(!path.exists(), "the ring file is removed with the receiver");
    }

    /// Two queue pairs of one fake device connected to each other: a SEND waits (RNR) until
    /// a receive is posted, lands in the buffer with its length, and a SEND larger than the
    /// buffer fails on both sides.
    #[test]
    fn send_waits_for_a_receive_and_fills_it() {
        let prefix = format!("/dev/shm/tnt-unit{}-fakesend", std::process::id());
        let dev = FakeDevice::new(0, "unit").unwrap();
        dev.attach_job(&prefix);
        let (scq, rcq) = (dev.create_cq(4).unwrap(), dev.create_cq(4).unwrap());
        let mut a = dev.create_qp(&scq, &rcq, 4, 0).unwrap();
        let mut b = dev.create_qp(&scq, &rcq, 4, 2).unwrap();
        let port: PortAddr = dev.port();
        let (qa, qb) = (a.qpn(), b.qpn());
        let to = |qpn| QpEndpoint {
            addr: port,
            qpn,
            psn: 0,
        };
        a.connect(0, &to(qb)).unwrap();
        b.connect(0, &to(qa)).unwrap();
        // Receive buffers: 2 × 64 bytes, file-backed as the transport makes them.
        let rpath = crate::env::shm_file(&prefix, 0, PASSIVE_KEY);
        let rmem = SegmentMemory::create_shared(&rpath, 128, 0).unwrap();
        let smem = SegmentMemory::anonymous(256, 0).unwrap();
        let reg = |mem: &SegmentMemory, file: Option<&Path>| {
            let (addr, len) = mem.mapping();
            let file = file.map(Path::to_path_buf);
            let mr = dev
                .register(&Region {
                    key: PASSIVE_KEY,
                    addr,
                    len,
                    file,
                })
                .unwrap();
            (
                mr.clone(),
                mr.keys().lkey,
                mem.data_offset().unwrap() as u64,
            )
        };
        let (_rmr, rkey, rbase) = reg(&rmem, Some(&rpath));
        let (_smr, skey, sbase) = reg(&smem, None);
        smem.copy_in(0, &[0x5a; 200]);
        let send = |id: u64, len: u32| WorkRequest {
            wr_id: id,
            op: WrOp::Send {
                sge: Sge {
                    lkey: skey,
                    addr: sbase,
                    len,
                },
            },
            remote: RemoteAddr { rkey: 0, addr: 0 },
            signaled: true,
        };
        let poll = |cq: &Arc<dyn crate::transport::verbs::device::CompletionQueue>| {
            let mut out = Vec::new();
            cq.poll(&mut out, 8).unwrap();
            out
        };
        a.post_send(&[send(1, 40)]).unwrap();
        assert!(poll(&scq).is_empty(), "no receive posted: the SEND waits");
        let buf = |i: u64| RecvRequest {
            wr_id: 10 + i,
            sge: Sge {
                lkey: rkey,
                addr: rbase + i * 64,
                len: 64,
            },
        };
        b.post_recv(&[buf(0)]).unwrap();
        let sent = poll(&scq);
        assert_eq!(sent.len(), 1, "retried at the poll of the send CQ");
        assert!(sent[0].status.is_ok() && sent[0].wr_id == 1);
        let got = poll(&rcq);
        assert_eq!((got[0].wr_id, got[0].byte_len), (10, 40));
        let mut data = [0u8; 41];
        rmem.copy_out(0, &mut data);
        assert_eq!((data[0], data[39], data[40]), (0x5a, 0x5a, 0));
        // 100 bytes into a 64-byte buffer: an error completion on each side.
        b.post_recv(&[buf(1)]).unwrap();
        a.post_send(&[send(2, 100)]).unwrap();
        assert!(poll(&scq)[0].status.is_err());
        assert!(poll(&rcq)[0].status.is_err());
        drop((a, b));
        assert!(
            !ring_file(&prefix, 0, qb).exists(),
            "removed with its queue pair"
        );
    }
}
