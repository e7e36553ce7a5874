//! The table of segments this rank knows: its own (which peers may access, checked on every
//! incoming operation) and what peers announced of theirs (size, notification count, the
//! mapping of a shared-memory peer's segment, its verbs keys).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::types::{Deadline, Rank, SegKey, SegmentId};

/// The remote side of a work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RemoteAddr {
    pub rkey: u32,
    pub addr: u64,
}

/// A peer segment's keys, as read from its directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RemoteKeys {
    /// Byte 0 of the segment's mapping (notification slots are at fixed offsets from it).
    pub ctl: RemoteAddr,
    /// Byte 0 of the segment's data.
    pub data: RemoteAddr,
}

pub(crate) struct LocalSegment {
    pub mem: Arc<SegmentMemory>,
    /// Ranks this segment is registered with (allowed to access it).
    allowed: Vec<AtomicBool>,
    /// Peer failures already reported by waits on this segment.
    pub failures_seen: AtomicU64,
}

impl LocalSegment {
    pub fn allows(&self, rank: Rank) -> bool {
        self.allowed
            .get(rank.index())
            .is_some_and(|a| a.load(Ordering::Acquire))
    }

    pub fn allow(&self, rank: Rank) {
        self.allowed[rank.index()].store(true, Ordering::Release);
    }
}

/// What a peer told us about one of its segments.
pub(crate) struct RemoteSegment {
    pub size: u64,
    pub tag: u64,
    pub notif_count: u32,
    /// The peer's segment mapped here, when it is on this host and shareable.
    pub mem: Option<Arc<SegmentMemory>>,
    /// Its verbs keys, read from the peer's directory at first use (`None` inside: the
    /// segment is not reachable over verbs).
    pub verbs: OnceLock<Option<RemoteKeys>>,
}

/// Set in the tag of a registration that the table remembers past the segment's deletion
/// (see [`SegmentTable::latched`]): a group commit's mark that its sender has seen the
/// receiver's registration, which the receiver must not miss because the sender, done with
/// its commit, deleted the segment (or began the next commit) at once.
pub(crate) const TAG_LATCHED: u64 = 1 << 47;

#[derive(Default)]
pub(crate) struct SegmentTable {
    local: RwLock<HashMap<SegKey, Arc<LocalSegment>>>,
    remote: RwLock<HashMap<(u16, SegKey), Arc<RemoteSegment>>>,
    /// Per peer and key, the tag of the last registration that carried [`TAG_LATCHED`]:
    /// neither a deletion nor a later registration clears it.
    latched: RwLock<HashMap<(u16, SegKey), u64>>,
    registered: Mutex<()>,
    registered_cv: Condvar,
}

impl SegmentTable {
    pub fn local(&self, key: SegKey) -> Option<Arc<LocalSegment>> {
        self.local.read().get(&key).cloned()
    }

    pub fn remote(&self, rank: Rank, key: SegKey) -> Option<Arc<RemoteSegment>> {
        self.remote.read().get(&(rank.0, key)).cloned()
    }

    pub fn remove_local(&self, key: SegKey) -> Option<Arc<LocalSegment>> {
        self.local.write().remove(&key)
    }

    pub fn for_each_local(&self, mut f: impl FnMut(&LocalSegment)) {
        for s in self.local.read().values() {
            f(s);
        }
    }

    /// Adds local segment `key`, built by `make` while the table is locked (so that two
    /// threads creating the same id cannot both succeed).
    pub fn insert_local_with(
        &self,
        key: SegKey,
        make: impl FnOnce() -> LocalSegment,
    ) -> Result<Arc<LocalSegment>> {
        let mut t = self.local.write();
        if t.contains_key(&key) {
            return Err(Error::SegmentExists {
                segment: SegmentId(key as u8),
            });
        }
        let seg = Arc::new(make());
        t.insert(key, seg.clone());
        Ok(seg)
    }

    /// The keys of the local segments that `keep` accepts.
    pub fn local_keys(&self, keep: impl Fn(SegKey) -> bool) -> Vec<SegKey> {
        self.local
            .read()
            .keys()
            .copied()
            .filter(|k| keep(*k))
            .collect()
    }

    /// How many local segments `keep` accepts.
    pub fn count_local(&self, keep: impl Fn(SegKey) -> bool) -> usize {
        self.local.read().keys().filter(|k| keep(**k)).count()
    }

    /// Records what `from` announced about its segment `key` and wakes those waiting for it.
    pub fn insert_remote(&self, from: Rank, key: SegKey, seg: RemoteSegment) {
        // Latched before the wake-up, so that a waiter woken for it finds it.
        if seg.tag & TAG_LATCHED != 0 {
            self.latched.write().insert((from.0, key), seg.tag);
        }
        self.remote.write().insert((from.0, key), Arc::new(seg));
        let _g = self.registered.lock();
        self.registered_cv.notify_all();
    }

    /// `from` deleted its segment `key` (what it latched stays).
    pub fn remove_remote(&self, from: Rank, key: SegKey) {
        self.remote.write().remove(&(from.0, key));
    }

    /// The tag of the last registration of `key` from `rank` that carried [`TAG_LATCHED`],
    /// whether or not that segment still exists or was registered anew since. A caller
    /// compares it for equality with the tag it expects (a group commit's generation and
    /// member digest), so an older registration is never taken for it.
    pub fn latched(&self, rank: Rank, key: SegKey) -> Option<u64> {
        self.latched.read().get(&(rank.0, key)).copied()
    }

    /// Waits until `ready` holds, asking it again whenever a peer registers a segment (it
    /// reads this table, and a registration lands before its wake-up: none goes unnoticed
    /// between the question and the sleep). With a deadline that has passed, asks once. An
    /// older registration under a key may still be here (a peer's deletion travels on its
    /// own schedule): `ready` tells. `give_up` is asked after every wake-up whether to stop
    /// (peer failed, process terminating).
    pub fn wait_registered(
        &self,
        deadline: Deadline,
        mut ready: impl FnMut() -> bool,
        give_up: impl Fn() -> Result<()>,
    ) -> Result<()> {
        let mut g = self.registered.lock();
        loop {
            if ready() {
                return Ok(());
            }
            give_up()?;
            match deadline.remaining() {
                None => {
                    self.registered_cv.wait(&mut g);
                }
                Some(d) if d.is_zero() => return Err(Error::Timeout),
                Some(d) => {
                    self.registered_cv.wait_for(&mut g, d);
                }
            }
        }
    }

    /// Wakes everything that waits on local state (after a peer failure or a goodbye).
    pub fn wake_all(&self) {
        self.for_each_local(|s| s.mem.wake());
        self.wake_registered();
    }

    /// Wakes the waits of [`wait_registered`](Self::wait_registered), to ask their `ready`
    /// again (a group deleted while a commit of it waits).
    pub fn wake_registered(&self) {
        let _g = self.registered.lock();
        self.registered_cv.notify_all();
    }
}

impl LocalSegment {
    /// A segment over `mem`, accessible to `me` only until registered with peers.
    pub fn new(mem: Arc<SegmentMemory>, me: Rank, nranks: u16, failures_seen: u64) -> Self {
        LocalSegment {
            mem,
            failures_seen: AtomicU64::new(failures_seen),
            allowed: (0..nranks).map(|r| AtomicBool::new(r == me.0)).collect(),
        }
    }
}
