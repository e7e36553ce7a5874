//! Memory registration: one memory region per segment (control page, notification slots
//! and data; user-bound data gets a second one), a per-rank directory through which peers
//! learn a segment's keys with one RDMA READ, and scratch memory for atomics' results.
//!
//! After the last entry the directory holds the constant 1 (u32): `read_notify` chains a
//! 4-byte RDMA READ of it into the local notification slot after the data, and RC places
//! read responses in order, so the notification is set once the data is there.
//!
//! Directory entry `key` (32 bytes): control base (u64), control rkey (u32), data rkey
//! (u32), data base (u64), valid (u64). It is written before the segment's registration is
//! announced over the control channel, so a peer that has seen the announcement reads a
//! valid entry.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use super::device::{Device, MemoryRegion, MrKeys, Region, Sge};
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::RemoteAddr;
use crate::memory::segment_table::RemoteKeys;
use crate::types::SegKey;

/// The directory's own key (above every user and internal segment key).
pub(crate) const DIR_KEY: SegKey = 511;
pub(crate) const ENTRY: usize = 32;
const SCRATCH_SLOTS: usize = 256;

/// Where the directory lives when peers map it (the fake device): known before the
/// rendezvous, unlike segment files.
pub(crate) fn directory_file(job_id: &str, rank: u16) -> PathBuf {
    PathBuf::from(format!("/dev/shm/tnt-{job_id}-verbs-r{rank}"))
}

impl RemoteKeys {
    /// `None` for an empty or not remotely accessible entry.
    pub fn decode(e: &[u8; ENTRY]) -> Option<RemoteKeys> {
        let u64_at = |i: usize| u64::from_le_bytes(e[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(e[i..i + 4].try_into().expect("4 bytes"));
        let keys = RemoteKeys {
            ctl: RemoteAddr {
                addr: u64_at(0),
                rkey: u32_at(8),
            },
            data: RemoteAddr {
                rkey: u32_at(12),
                addr: u64_at(16),
            },
        };
        (u64_at(24) != 0 && keys.ctl.rkey != 0 && keys.data.rkey != 0).then_some(keys)
    }

    fn encode(&self) -> [u8; ENTRY] {
        let mut e = [0u8; ENTRY];
        e[0..8].copy_from_slice(&self.ctl.addr.to_le_bytes());
        e[8..12].copy_from_slice(&self.ctl.rkey.to_le_bytes());
        e[12..16].copy_from_slice(&self.data.rkey.to_le_bytes());
        e[16..24].copy_from_slice(&self.data.addr.to_le_bytes());
        e[24..32].copy_from_slice(&1u64.to_le_bytes());
        e
    }
}

struct LocalReg {
    mem: Arc<SegmentMemory>,
    /// lkey and device address of mapping byte 0 (notification slots).
    ctl: (u32, u64),
    _ctl: Arc<dyn MemoryRegion>,
    _data: Option<Arc<dyn MemoryRegion>>,
    /// lkey and device address of data byte 0.
    data: (u32, u64),
}

pub(crate) struct Registry {
    device: Arc<dyn Device>,
    dir: Arc<SegmentMemory>,
    dir_keys: MrKeys,
    _dir_mr: Arc<dyn MemoryRegion>,
    scratch: Arc<SegmentMemory>,
    scratch_keys: MrKeys,
    _scratch_mr: Arc<dyn MemoryRegion>,
    free: Mutex<Vec<usize>>,
    by_key: Mutex<HashMap<SegKey, Arc<LocalReg>>>,
    by_mem: Mutex<HashMap<usize, Arc<LocalReg>>>,
}

fn register(
    device: &dyn Device,
    key: SegKey,
    mem: &SegmentMemory,
) -> Result<Arc<dyn MemoryRegion>> {
    let (addr, len) = mem.mapping();
    device.register(&Region {
        key,
        addr,
        len,
        file: mem.file_path().map(|p| p.to_path_buf()),
    })
}

impl Registry {
    pub fn new(device: Arc<dyn Device>, job_id: &str, rank: u16, shared: bool) -> Result<Self> {
        let dir_len = (usize::from(DIR_KEY) + 1) * ENTRY;
        let dir = if shared {
            SegmentMemory::create_shared(&directory_file(job_id, rank), dir_len, 0)?
        } else {
            SegmentMemory::anonymous(dir_len, 0)?
        };
        dir.copy_in(usize::from(DIR_KEY) * ENTRY, &1u32.to_le_bytes());
        let dir_mr = register(&*device, DIR_KEY, &dir)?;
        let mut dir_keys = dir_mr.keys();
        dir_keys.base += dir.data_offset().expect("directory data is in its mapping") as u64;
        let scratch = SegmentMemory::anonymous(SCRATCH_SLOTS * ENTRY, 0)?;
        let scratch_mr = register(&*device, DIR_KEY, &scratch)?;
        let mut scratch_keys = scratch_mr.keys();
        scratch_keys.base += scratch.data_offset().expect("in mapping") as u64;
        Ok(Registry {
            device,
            dir: Arc::new(dir),
            dir_keys,
            _dir_mr: dir_mr,
            scratch: Arc::new(scratch),
            scratch_keys,
            _scratch_mr: scratch_mr,
            free: Mutex::new((0..SCRATCH_SLOTS).collect()),
            by_key: Mutex::default(),
            by_mem: Mutex::default(),
        })
    }

    /// The directory's keys, data base included (published in the rendezvous).
    pub fn directory_keys(&self) -> MrKeys {
        self.dir_keys
    }

    /// Registers a new local segment and publishes its keys in the directory.
    pub fn add(&self, key: SegKey, mem: &Arc<SegmentMemory>) -> Result<()> {
        if key >= DIR_KEY {
            return Err(Error::Device(format!(
                "segment key {key} has no directory entry"
            )));
        }
        let ctl = register(&*self.device, key, mem)?;
        let ck = ctl.keys();
        let (data_mr, data_keys) = match mem.data_offset() {
            Some(off) => (None, (ck.lkey, ck.rkey, ck.base + off as u64)),
            None => {
                let mr = self.device.register(&Region {
                    key,
                    addr: mem.data_addr(),
                    len: mem.len().max(1),
                    file: None,
                })?;
                let k = mr.keys();
                (Some(mr), (k.lkey, k.rkey, k.base))
            }
        };
        let reg = Arc::new(LocalReg {
            mem: mem.clone(),
            ctl: (ck.lkey, ck.base),
            _ctl: ctl,
            _data: data_mr,
            data: (data_keys.0, data_keys.2),
        });
        let entry = RemoteKeys {
            ctl: RemoteAddr {
                rkey: ck.rkey,
                addr: ck.base,
            },
            data: RemoteAddr {
                rkey: data_keys.1,
                addr: data_keys.2,
            },
        };
        let mut by_key = self.by_key.lock();
        if let Some(old) = by_key.insert(key, reg.clone()) {
            self.by_mem.lock().remove(&(Arc::as_ptr(&old.mem) as usize));
        }
        self.by_mem.lock().insert(Arc::as_ptr(mem) as usize, reg);
        self.dir.copy_in(usize::from(key) * ENTRY, &entry.encode());
        Ok(())
    }

    /// Withdraws a deleted segment: its entry is cleared and its regions deregistered.
    pub fn remove(&self, key: SegKey) {
        if let Some(old) = self.by_key.lock().remove(&key) {
            self.by_mem.lock().remove(&(Arc::as_ptr(&old.mem) as usize));
        }
        if key < DIR_KEY {
            self.dir.copy_in(usize::from(key) * ENTRY, &[0u8; ENTRY]);
        }
    }

    fn local(&self, mem: &Arc<SegmentMemory>) -> Result<Arc<LocalReg>> {
        self.by_mem
            .lock()
            .get(&(Arc::as_ptr(mem) as usize))
            .cloned()
            .ok_or_else(|| Error::Device("local segment is not registered with the device".into()))
    }

    /// The local side of a transfer from/to `mem`'s data at `off`.
    pub fn local_sge(&self, mem: &Arc<SegmentMemory>, off: usize, len: u32) -> Result<Sge> {
        let reg = self.local(mem)?;
        Ok(Sge {
            lkey: reg.data.0,
            addr: reg.data.1 + off as u64,
            len,
        })
    }

    /// Local notification slot `id` of `mem`, as the target of a 4-byte read.
    pub fn local_slot_sge(&self, mem: &Arc<SegmentMemory>, id: u32) -> Result<Sge> {
        let reg = self.local(mem)?;
        Ok(Sge {
            lkey: reg.ctl.0,
            addr: reg.ctl.1 + SegmentMemory::slot_offset(id) as u64,
            len: 4,
        })
    }

    /// A scratch slot (32 bytes) for a result; give it back with [`release`](Self::release).
    pub fn scratch(&self, len: u32) -> Result<(usize, Sge)> {
        let i = self
            .free
            .lock()
            .pop()
            .ok_or(Error::TooManyAtomics { max: SCRATCH_SLOTS })?;
        Ok((
            i,
            Sge {
                lkey: self.scratch_keys.lkey,
                addr: self.scratch_keys.base + (i * ENTRY) as u64,
                len,
            },
        ))
    }

    pub fn read_scratch(&self, i: usize) -> [u8; ENTRY] {
        let mut out = [0u8; ENTRY];
        self.scratch.copy_out(i * ENTRY, &mut out);
        out
    }

    pub fn release(&self, i: usize) {
        self.free.lock().push(i);
    }

    /// A zero-length local buffer for fences.
    pub fn empty_sge(&self) -> Sge {
        Sge {
            lkey: self.scratch_keys.lkey,
            addr: self.scratch_keys.base,
            len: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_roundtrip_and_empty_is_none() {
        let k = RemoteKeys {
            ctl: RemoteAddr {
                rkey: 5,
                addr: 4096,
            },
            data: RemoteAddr {
                rkey: 6,
                addr: 8192,
            },
        };
        assert_eq!(RemoteKeys::decode(&k.encode()), Some(k));
        assert_eq!(RemoteKeys::decode(&[0; ENTRY]), None);
    }
}
