//! The fake device's fabric: this rank's registrations and the peers' registered memory,
//! mapped from their shared-memory files, which is what an RDMA would reach.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use memmap2::{MmapOptions, MmapRaw};
use parking_lot::Mutex;

use super::device::{Sge, WorkRequest, WrOp};
use super::registry::{directory_file, DIR_KEY};
use crate::env::shm_file;
use crate::memory::segment_table::RemoteAddr;
use crate::types::SegKey;

/// Fake keys carry the segment key in their low bits and a registration generation above.
pub(super) const KEY_BITS: u32 = 9;

pub(super) struct Fabric {
    pub rank: u16,
    pub job_id: String,
    pub prefix: OnceLock<String>,
    /// lkey -> (address, length) of local registrations.
    pub local: Mutex<HashMap<u32, (usize, usize)>>,
    /// (peer, rkey) -> the peer's registered file, mapped here.
    pub remote: Mutex<HashMap<(u16, u32), Arc<MmapRaw>>>,
    pub generation: AtomicU32,
    pub posted: AtomicU64,
    pub fail_after: Option<u64>,
    pub fail_next: std::sync::atomic::AtomicBool,
    pub max_wr: u32,
    pub cq_lag: u32,
    /// RDMA writes of at least this many bytes run at the next poll of their send
    /// completion queue (`GASPI_IB_FAKE_DEFER_BYTES`).
    pub defer_bytes: Option<u32>,
}

impl Fabric {
    /// The local memory behind `sge`, bounds-checked against its registration.
    pub(super) fn local(&self, sge: &Sge) -> std::result::Result<*mut u8, String> {
        let (addr, len) = *self
            .local
            .lock()
            .get(&sge.lkey)
            .ok_or_else(|| format!("local protection error: lkey {:#x} unknown", sge.lkey))?;
        let end = sge.addr.checked_add(u64::from(sge.len));
        if end.is_none_or(|e| e > len as u64) {
            return Err(format!(
                "local length error: [{}, +{}) past a region of {len} bytes",
                sge.addr, sge.len
            ));
        }
        Ok((addr + sge.addr as usize) as *mut u8)
    }

    /// The peer's registered memory behind `remote`, bounds-checked.
    pub(super) fn remote(
        &self,
        peer: u16,
        remote: &RemoteAddr,
        len: usize,
    ) -> std::result::Result<*mut u8, String> {
        let map = self.peer_map(peer, remote.rkey)?;
        let end = remote.addr.checked_add(len as u64);
        if end.is_none_or(|e| e > map.len() as u64) {
            return Err(format!(
                "remote access error: [{}, +{len}) past a region of {} bytes",
                remote.addr,
                map.len()
            ));
        }
        // SAFETY: in bounds of the mapping (checked above); the mapping stays alive in the
        // cache for the life of the process.
        Ok(unsafe { map.as_mut_ptr().add(remote.addr as usize) })
    }

    fn peer_map(&self, peer: u16, rkey: u32) -> std::result::Result<Arc<MmapRaw>, String> {
        let mut cache = self.remote.lock();
        if let Some(m) = cache.get(&(peer, rkey)) {
            return Ok(m.clone());
        }
        let bad =
            |why: String| format!("remote access error: rkey {rkey:#x} of rank {peer}: {why}");
        if rkey == 0 {
            return Err(bad("not remotely accessible".into()));
        }
        let key = (rkey & ((1 << KEY_BITS) - 1)) as SegKey;
        let path = if key == DIR_KEY {
            directory_file(&self.job_id, peer)
        } else {
            let prefix = self
                .prefix
                .get()
                .ok_or_else(|| bad("no job attached".into()))?;
            shm_file(prefix, peer, key)
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        let map = MmapOptions::new()
            .map_raw(&file)
            .map_err(|e| bad(format!("mapping {}: {e}", path.display())))?;
        let map = Arc::new(map);
        cache.insert((peer, rkey), map.clone());
        Ok(map)
    }

    /// Counts a work request about to run; an injected fault makes it fail.
    pub(super) fn fault(&self) -> Option<String> {
        let n = self.posted.fetch_add(1, Ordering::Relaxed) + 1;
        (self.fail_after == Some(n) || self.fail_next.swap(false, Ordering::Relaxed))
            .then(|| format!("remote access error (injected at work request {n})"))
    }

    /// Runs one one-sided work request against local and peer memory.
    pub(super) fn execute(&self, peer: u16, wr: &WorkRequest) -> std::result::Result<(), String> {
        match wr.op {
            WrOp::Write { sge } => {
                let src = self.local(&sge)?;
                let dst = self.remote(peer, &wr.remote, sge.len as usize)?;
                // SAFETY: both ranges are bounds-checked registered memory; `copy` allows
                // overlap (a rank may write to its own segment).
                unsafe { std::ptr::copy(src, dst, sge.len as usize) };
            }
            WrOp::WriteInline { data } => {
                let dst = self.remote(peer, &wr.remote, 4)?;
                if (dst as usize).is_multiple_of(4) {
                    // SAFETY: 4 aligned, in-bounds bytes; a Release store publishes the data
                    // written before it (the way a notification slot is read: Acquire).
                    let word = unsafe { &*(dst as *const AtomicU32) };
                    word.store(u32::from_le_bytes(data), Ordering::Release);
                } else {
                    // SAFETY: 4 in-bounds bytes.
                    unsafe { std::ptr::copy(data.as_ptr(), dst, 4) };
                }
            }
            WrOp::Read { sge } => {
                let dst = self.local(&sge)?;
                let src = self.remote(peer, &wr.remote, sge.len as usize)?;
                if sge.len == 4 && (dst as usize).is_multiple_of(4) {
                    // A notification read (`read_notify`): publish it after the data.
                    // SAFETY: 4 aligned, in-bounds bytes on both sides.
                    let v = unsafe { std::ptr::read_unaligned(src as *const u32) };
                    // SAFETY: as above; notification slots are accessed atomically.
                    unsafe { &*(dst as *const AtomicU32) }.store(v, Ordering::Release);
                } else {
                    // SAFETY: as for writes.
                    unsafe { std::ptr::copy(src, dst, sge.len as usize) };
                }
            }
            WrOp::FetchAdd { sge, .. } | WrOp::CompareSwap { sge, .. } => {
                let out = self.local(&sge)?;
                let at = self.remote(peer, &wr.remote, 8)?;
                if !(at as usize).is_multiple_of(8) || sge.len != 8 {
                    return Err("remote invalid request: unaligned atomic".into());
                }
                // SAFETY: 8 aligned, in-bounds bytes of shared memory, only accessed
                // atomically by GASPI atomics.
                let word = unsafe { &*(at as *const AtomicU64) };
                let old = match wr.op {
                    WrOp::FetchAdd { add, .. } => word.fetch_add(add, Ordering::SeqCst),
                    WrOp::CompareSwap { expected, new, .. } => {
                        match word.compare_exchange(
                            expected,
                            new,
                            Ordering::SeqCst,
                            Ordering::SeqCst,
                        ) {
                            Ok(v) | Err(v) => v,
                        }
                    }
                    _ => unreachable!("matched above"),
                };
                // SAFETY: 8 in-bounds bytes of local registered memory (checked).
                unsafe { std::ptr::copy(old.to_le_bytes().as_ptr(), out, 8) };
            }
            WrOp::Send { .. } => unreachable!("SENDs run in QpState::run"),
        }
        Ok(())
    }
}
