//! Segments: memory that peers read and write one-sidedly.
//!
//! A segment exists locally after `segment_alloc` (or `segment_bind`) and becomes visible to
//! a peer with `segment_register(seg, rank)`; `segment_create` does both for a whole group
//! and synchronizes it. A peer may only write to a segment registered with it: the receiver
//! checks every incoming operation against this table before it touches memory.

use std::path::PathBuf;
use std::sync::Arc;

use crate::context::{Context, Shared};
use crate::env::shm_file;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::LocalSegment;
use crate::transport::requests::Ack;
use crate::transport::route::Route;
use crate::transport::tcp::send::Payload;
use crate::transport::Dest;
use crate::types::{Alloc, Deadline, Group, Rank, SegKey, SegmentId, Timeout, INTERNAL_BASE};
use crate::wire::control::{ControlMessage, SegmentAnnouncement};

mod handle;

pub use handle::Segment;

/// The tag user segments are announced with (group segments carry their commit's).
pub(crate) const USER_TAG: u64 = 0;

impl Shared {
    /// Path of the shared-memory file of `rank`'s segment `key` (when shm is in use).
    pub(crate) fn shm_path(&self, rank: Rank, key: SegKey) -> Option<PathBuf> {
        self.shm_prefix.as_ref().map(|p| shm_file(p, rank.0, key))
    }

    /// Fresh, zeroed memory for a local segment: shared with local peers when any exist.
    pub(crate) fn new_memory(
        &self,
        key: SegKey,
        size: usize,
        notif_count: u32,
    ) -> Result<SegmentMemory> {
        match self.shm_path(self.rank, key) {
            Some(path) => SegmentMemory::create_shared(&path, size, notif_count),
            None => SegmentMemory::anonymous(size, notif_count),
        }
    }

    /// Adds local segment `key` over `mem`, registered with the verbs device when there is
    /// one (peers learn about the region only through the directory entry written then;
    /// without one they reach this segment over TCP).
    pub(crate) fn insert_local(
        &self,
        key: SegKey,
        mem: SegmentMemory,
    ) -> Result<Arc<LocalSegment>> {
        self.segments.insert_local_with(key, || {
            let mem = Arc::new(mem);
            if let Some(v) = &self.verbs {
                if let Err(e) = v.register_segment(key, &mem) {
                    tracing::warn!(
                        segment = key,
                        "cannot register segment with the device: {e}"
                    );
                    v.unregister_segment(key);
                }
            }
            LocalSegment::new(mem, self.rank, self.nranks, self.state.failures())
        })
    }

    /// Waits until `ready` holds, asked again at every registration a peer makes with us
    /// (see [`SegmentTable::wait_registered`]); ends early when one of `peers` fails or this
    /// process leaves.
    pub(crate) fn wait_registered(
        &self,
        peers: &[Rank],
        deadline: Deadline,
        ready: impl FnMut() -> bool,
    ) -> Result<()> {
        self.segments.wait_registered(deadline, ready, || {
            if let Some(rank) = self.state.first_unreachable(peers.iter().copied()) {
                return Err(Error::PeerFailed { rank });
            }
            self.check_open()
        })
    }

    /// Wakes everything that waits on local state (after a peer failure).
    pub(crate) fn wake_all(&self) {
        self.segments.wake_all();
    }
}

impl Context {
    pub(crate) fn user_key(&self, seg: SegmentId) -> Result<SegKey> {
        if u32::from(seg.0) >= self.sh.config.segment_max {
            return Err(Error::InvalidSegment {
                segment: seg,
                rank: None,
            });
        }
        Ok(SegKey::from(seg.0))
    }

    pub(crate) fn local_segment(&self, seg: SegmentId) -> Result<Arc<LocalSegment>> {
        let key = self.user_key(seg)?;
        self.sh.segments.local(key).ok_or(Error::InvalidSegment {
            segment: seg,
            rank: None,
        })
    }

    /// Resolves `rank`'s segment for an access of `[offset, offset+len)`, checking bounds.
    pub(crate) fn dest(&self, rank: Rank, key: SegKey, offset: u64, len: u64) -> Result<Dest> {
        let seg = SegmentId(key as u8);
        let oob = |size| Error::RemoteOutOfBounds {
            rank,
            segment: seg,
            offset,
            len,
            size,
        };
        if rank == self.sh.rank {
            let local = self.sh.segments.local(key).ok_or(Error::InvalidSegment {
                segment: seg,
                rank: Some(rank),
            })?;
            let size = local.mem.len() as u64;
            if offset.checked_add(len).is_none_or(|e| e > size) {
                return Err(oob(size));
            }
            return Ok(Dest {
                rank,
                key,
                notif_count: local.mem.notif_count(),
                mem: Some(local.mem.clone()),
                verbs: None,
            });
        }
        let remote = self
            .sh
            .segments
            .remote(rank, key)
            .ok_or(Error::InvalidSegment {
                segment: seg,
                rank: Some(rank),
            })?;
        if offset.checked_add(len).is_none_or(|e| e > remote.size) {
            return Err(oob(remote.size));
        }
        let verbs = match (self.sh.routes.get(rank), &self.sh.verbs) {
            (Route::Verbs, Some(v)) => match remote.verbs.get() {
                Some(k) => *k,
                None => {
                    let k = v.lookup(rank, key)?;
                    if k.is_none() {
                        tracing::info!(
                            rank = rank.0,
                            segment = key,
                            "peer segment not reachable over verbs: using TCP to it from now on"
                        );
                        self.sh.routes.demote(rank, Route::Verbs);
                    }
                    *remote.verbs.get_or_init(|| k)
                }
            },
            _ => None,
        };
        Ok(Dest {
            rank,
            key,
            notif_count: remote.notif_count,
            mem: remote.mem.clone(),
            verbs,
        })
    }

    /// Allocates local segment `seg` of `size` bytes (`gaspi_segment_alloc`). Memory is zeroed.
    pub fn segment_alloc(&self, seg: SegmentId, size: u64, _alloc: Alloc) -> Result<()> {
        let key = self.user_key(seg)?;
        let max = self.sh.config.transfer_size_max.max(1 << 40);
        if size == 0 || size > max {
            return Err(Error::InvalidSegmentSize { size, max });
        }
        if self.sh.segments.count_local(|_| true)
            >= self.sh.config.segment_max as usize + self.internal_segments()
        {
            return Err(Error::TooManySegments {
                max: self.sh.config.segment_max,
            });
        }
        if self.sh.segments.local(key).is_some() {
            return Err(Error::SegmentExists { segment: seg });
        }
        let mem = self
            .sh
            .new_memory(key, size as usize, self.sh.config.notification_num)?;
        self.sh.insert_local(key, mem)?;
        Ok(())
    }

    fn internal_segments(&self) -> usize {
        self.sh.segments.count_local(|k| k >= INTERNAL_BASE)
    }

    /// Binds user memory as segment `seg` (`gaspi_segment_bind`). Local peers reach it over
    /// TCP (it cannot be mapped by other processes).
    ///
    /// # Safety
    /// `ptr..ptr+size` must stay valid for reads and writes by the runtime and its peers until
    /// the segment is deleted, and must not be accessed through Rust references that assume
    /// exclusivity while peers may write to it.
    pub unsafe fn segment_bind(&self, seg: SegmentId, ptr: *mut u8, size: u64) -> Result<()> {
        let key = self.user_key(seg)?;
        if ptr.is_null() {
            return Err(Error::NullPointer("segment memory"));
        }
        if size == 0 {
            return Err(Error::InvalidSegmentSize {
                size,
                max: u64::MAX,
            });
        }
        if self.sh.segments.local(key).is_some() {
            return Err(Error::SegmentExists { segment: seg });
        }
        let ctl = SegmentMemory::anonymous(0, self.sh.config.notification_num)?;
        // SAFETY: forwarded from this function's contract.
        let mem = unsafe { SegmentMemory::with_user_data(ctl, ptr, size as usize) };
        self.sh.insert_local(key, mem)?;
        Ok(())
    }

    /// Binds user memory and registers it with `group` (`gaspi_segment_use`), which must be
    /// committed and unchanged since (checked before the memory is bound).
    ///
    /// # Safety
    /// As for [`segment_bind`](Self::segment_bind).
    pub unsafe fn segment_use(
        &self,
        seg: SegmentId,
        ptr: *mut u8,
        size: u64,
        group: Group,
        timeout: Timeout,
    ) -> Result<()> {
        self.committed_members(group)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.segment_bind(seg, ptr, size)? };
        self.register_with_group(seg, group, timeout)
    }

    /// Makes local segment `seg` visible to `rank` (`gaspi_segment_register`).
    pub fn segment_register(&self, seg: SegmentId, rank: Rank, timeout: Timeout) -> Result<()> {
        self.check_rank(rank)?;
        let key = self.user_key(seg)?;
        self.register_key(key, rank, USER_TAG, timeout.deadline())
    }

    /// Makes local segment `key` visible to `rank`, announced with `tag` (what a group's
    /// commit tells its members apart by; [`USER_TAG`] for user segments).
    pub(crate) fn register_key(
        &self,
        key: SegKey,
        rank: Rank,
        tag: u64,
        deadline: Deadline,
    ) -> Result<()> {
        match self.announce_key(key, rank, tag)? {
            Some(ack) => ack.wait(&self.sh.rpc, deadline),
            None => Ok(()),
        }
    }

    /// Sends the registration of [`register_key`](Self::register_key) without waiting: the
    /// acknowledgement to wait for, `None` for this rank itself (nothing to send).
    pub(crate) fn announce_key(&self, key: SegKey, rank: Rank, tag: u64) -> Result<Option<Ack>> {
        let local = self.sh.segments.local(key).ok_or(Error::InvalidSegment {
            segment: SegmentId(key as u8),
            rank: None,
        })?;
        local.allow(rank);
        if rank == self.sh.rank {
            return Ok(None);
        }
        let announcement = SegmentAnnouncement {
            key,
            size: local.mem.len() as u64,
            notif_count: local.mem.notif_count(),
            shm_data: local.mem.data_shareable(),
            tag,
        };
        let msg = ControlMessage::RegisterSegment(announcement);
        let (req, slot) = self.tcp()?.start_call(rank, msg.header(), Payload::None)?;
        Ok(Some(Ack { req, slot }))
    }

    /// Allocates `seg` on every member of `group` and registers it with all of them
    /// (`gaspi_segment_create`). Collective over `group` (which must be committed, and not
    /// changed since: [`Error::GroupChanged`]): no member returns before every member has
    /// registered its segment with every other.
    pub fn segment_create(
        &self,
        seg: SegmentId,
        size: u64,
        group: Group,
        timeout: Timeout,
        alloc: Alloc,
    ) -> Result<()> {
        // The group is checked before anything happens: allocation and announcements to
        // its members are not undone by a failure later.
        self.committed_members(group)?;
        self.segment_alloc(seg, size, alloc)?;
        self.register_with_group(seg, group, timeout)
            .inspect_err(|_| {
                let _ = self.segment_delete(seg);
            })
    }

    /// Registers `seg` with every member of `group`, then waits in a barrier of the group.
    ///
    /// Each registration is acknowledged by its target once it is in the target's table, and
    /// a member enters the barrier only after all of its own were acknowledged; so when the
    /// barrier completes, every member's registration with us has landed. Registrations of
    /// a deleted segment under the same id cannot linger: a peer's deletion notice travels
    /// on the same ordered channel ahead of its new registration. (Waiting for "some
    /// registration of `seg` from each member" instead would accept such a stale one.)
    fn register_with_group(&self, seg: SegmentId, group: Group, timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        let key = self.user_key(seg)?;
        let members = self.committed_members(group)?;
        for &r in &members {
            self.register_key(key, r, USER_TAG, deadline)?;
        }
        self.barrier_deadline(group, deadline)
    }

    /// Deletes local segment `seg` (`gaspi_segment_delete`); peers it was registered with are
    /// told, so their later accesses fail locally instead of reaching freed memory.
    pub fn segment_delete(&self, seg: SegmentId) -> Result<()> {
        let key = self.user_key(seg)?;
        self.delete_key(key).ok_or(Error::InvalidSegment {
            segment: seg,
            rank: None,
        })
    }

    /// Removes local segment `key` (user or internal) and tells the peers it was registered
    /// with; `None` when there is no such segment. Its shared-memory file goes at once, so
    /// the id can be created again while handles to the old memory are still alive.
    pub(crate) fn delete_key(&self, key: SegKey) -> Option<()> {
        // The file goes before the id is free: a create of the same id that finds the id
        // free must not find the old file still there.
        self.sh.segments.local(key)?.mem.unlink();
        let local = self.sh.segments.remove_local(key)?;
        if let Some(v) = &self.sh.verbs {
            v.unregister_segment(key);
        }
        // User memory bound to the segment may be freed next: no transfer touches it from
        // here on (see `SegmentMemory::revoke`).
        let revoked = local.mem.revoke();
        if let Ok(tcp) = self.tcp() {
            if revoked {
                tcp.wait_for_transfers();
            }
            for r in 0..self.sh.nranks {
                let r = Rank(r);
                if r != self.sh.rank && local.allows(r) && !self.sh.state.is_unreachable(r) {
                    let _ = tcp.post_control(r, &ControlMessage::DeleteSegment { key });
                }
            }
        }
        Some(())
    }

    /// Number of local user segments (`gaspi_segment_num`).
    pub fn segment_num(&self) -> u32 {
        self.segment_list().len() as u32
    }

    /// Ids of the local user segments, ascending (`gaspi_segment_list`).
    pub fn segment_list(&self) -> Vec<SegmentId> {
        let mut v: Vec<SegmentId> = self
            .sh
            .segments
            .local_keys(|k| k < INTERNAL_BASE)
            .into_iter()
            .map(|k| SegmentId(k as u8))
            .collect();
        v.sort();
        v
    }

    /// `gaspi_segment_max`.
    pub fn segment_max(&self) -> u32 {
        self.sh.config.segment_max
    }

    /// The lowest unused segment id (`gaspi_segment_avail_local`).
    pub fn segment_avail_local(&self) -> Result<SegmentId> {
        let taken = self.sh.segments.local_keys(|k| k < INTERNAL_BASE);
        (0..self.sh.config.segment_max)
            .map(|s| s as SegKey)
            .find(|k| !taken.contains(k))
            .map(|k| SegmentId(k as u8))
            .ok_or(Error::TooManySegments {
                max: self.sh.config.segment_max,
            })
    }

    /// Size of `rank`'s segment `seg` as known here (`gaspi_segment_size`).
    pub fn segment_size(&self, seg: SegmentId, rank: Rank) -> Result<u64> {
        self.check_rank(rank)?;
        let key = self.user_key(seg)?;
        if rank == self.sh.rank {
            return Ok(self.local_segment(seg)?.mem.len() as u64);
        }
        self.sh
            .segments
            .remote(rank, key)
            .map(|r| r.size)
            .ok_or(Error::InvalidSegment {
                segment: seg,
                rank: Some(rank),
            })
    }

    /// Start address of local segment `seg` (`gaspi_segment_ptr`).
    pub fn segment_ptr(&self, seg: SegmentId) -> Result<*mut u8> {
        Ok(self.local_segment(seg)?.mem.data_addr())
    }

    /// A handle to local segment `seg` for typed access.
    pub fn segment(&self, seg: SegmentId) -> Result<Segment> {
        Ok(Segment::new(seg, self.local_segment(seg)?.mem.clone()))
    }

    /// A handle to `rank`'s segment `seg` as mapped into this process, for a peer reached
    /// through shared memory (an extension of GASPI, like MPI's `MPI_Win_shared_query`): its
    /// accessors and views read and write the peer's memory directly, with no transport and
    /// no notification, so collectives on one host can reduce straight from their peers'
    /// buffers. For this rank itself it is [`segment`](Self::segment).
    ///
    /// [`Error::NotMapped`] when `rank` is reached any other way (TCP, verbs); the
    /// segment must have been registered with this rank (`segment_register` or
    /// `segment_create`). What the peer writes is seen here only after a notification (or
    /// another synchronisation) orders it, as for its one-sided writes.
    pub fn peer_segment(&self, rank: Rank, seg: SegmentId) -> Result<Segment> {
        self.check_rank(rank)?;
        if rank == self.sh.rank {
            return self.segment(seg);
        }
        let key = self.user_key(seg)?;
        let dest = self.dest(rank, key, 0, 0)?;
        match dest.mem {
            Some(mem) if self.sh.routes.get(rank) == Route::Shm => Ok(Segment::new(seg, mem)),
            _ => Err(Error::NotMapped { rank, segment: key }),
        }
    }
}
