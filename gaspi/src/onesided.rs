//! One-sided communication: `write`, `read`, their `_notify` and `_list` forms, and which
//! transport carries an op to a peer (in the order GASPI gives a queue's ops).
//!
//! Every argument is checked before anything is posted (queue, rank, both segments and
//! ranges, transfer size, notification id and value); a rejected call posts nothing and
//! takes no queue entry.

use std::sync::Arc;

use crate::context::Context;
use crate::counters::Counter;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::transport::completion::QueueState;
use crate::transport::route::Route;
use crate::transport::shm::Shm;
use crate::transport::verbs::VerbsTransport;
use crate::transport::{Dest, Transport, Xfer};
use crate::types::{NotificationId, QueueId, Rank, SegmentId};

/// A place in a local segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Local {
    /// A segment of this rank (`segment_id_local`).
    pub segment: SegmentId,
    /// Byte offset into its data (`offset_local`); the transfer must fit before its end.
    pub offset: u64,
}

impl Local {
    /// Byte `offset` of this rank's segment `segment`.
    pub fn new(segment: SegmentId, offset: u64) -> Self {
        Local { segment, offset }
    }
}

/// A place in a segment of another rank (or of this one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    /// The target rank; this rank itself is allowed.
    pub rank: Rank,
    /// The target's segment (`segment_id_remote`); it must be registered with this rank.
    pub segment: SegmentId,
    /// Byte offset into the target segment's data (`offset_remote`), checked against the
    /// size the target registered.
    pub offset: u64,
}

impl Remote {
    /// Byte `offset` of `rank`'s segment `segment`.
    pub fn new(rank: Rank, segment: SegmentId, offset: u64) -> Self {
        Remote {
            rank,
            segment,
            offset,
        }
    }
}

/// One element of a list operation; all elements of a list go to the same rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListElem {
    /// Where the element's bytes come from (write) or land (read) on this rank
    /// (`segment_id_local[i]`, `offset_local[i]`).
    pub local: Local,
    /// The target's segment for this element (`segment_id_remote[i]`).
    pub remote_segment: SegmentId,
    /// Byte offset in the target segment (`offset_remote[i]`).
    pub remote_offset: u64,
    /// Bytes of this element (`size[i]`), `1..=transfer_size_max`.
    pub size: u64,
}

/// A checked transfer, ready to post.
struct Checked {
    local: Arc<SegmentMemory>,
    local_off: usize,
    dest: Dest,
    remote_off: usize,
    len: usize,
}

impl Checked {
    fn xfer(&self) -> Xfer<'_> {
        Xfer {
            local: &self.local,
            local_off: self.local_off,
            remote: &self.dest,
            remote_off: self.remote_off,
            len: self.len,
        }
    }
}

impl Context {
    fn check_transfer(&self, local: Local, remote: Remote, size: u64) -> Result<Checked> {
        self.check_rank(remote.rank)?;
        if size > self.sh.config.transfer_size_max {
            return Err(Error::InvalidCommSize {
                size,
                max: self.sh.config.transfer_size_max,
            });
        }
        let l = self.local_segment(local.segment)?;
        let lsize = l.mem.len() as u64;
        if local.offset.checked_add(size).is_none_or(|e| e > lsize) {
            return Err(Error::LocalOutOfBounds {
                segment: local.segment,
                offset: local.offset,
                len: size,
                size: lsize,
            });
        }
        let key = self.user_key(remote.segment)?;
        let dest = self.dest(remote.rank, key, remote.offset, size)?;
        Ok(Checked {
            local: l.mem.clone(),
            local_off: local.offset as usize,
            dest,
            remote_off: remote.offset as usize,
            len: size as usize,
        })
    }

    fn check_notify_target(dest: &Dest, id: NotificationId, value: u32) -> Result<()> {
        if value == 0 {
            return Err(Error::ZeroNotificationValue);
        }
        if id.0 >= dest.notif_count {
            return Err(Error::NotificationIdOutOfRange {
                id: id.0,
                num: 1,
                max: dest.notif_count,
            });
        }
        Ok(())
    }

    /// [`post_on`](Self::post_on), then counts the op and its `bytes` (on `BytesWritten`
    /// or `BytesRead`) when it was posted.
    fn posting(
        &self,
        q: &Arc<QueueState>,
        entries: u32,
        bytes: (Counter, u64),
        rank: Rank,
        post: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        if self.post_on(q, entries, rank, post)? {
            self.sh.stats.add(Counter::OpsPosted, u64::from(entries));
            self.sh.stats.add(bytes.0, bytes.1);
        }
        Ok(())
    }

    /// Takes `entries` on `q` and runs `post` towards `rank`, giving the entries back if it
    /// fails. Towards a rank that has failed nothing is posted and the call succeeds
    /// (false): the queue's next `wait` returns [`Error::PeerFailed`], as in GPI-2, where
    /// fault-tolerant programs learn of a failure at their `wait` and then read the state
    /// vector.
    pub(crate) fn post_on(
        &self,
        q: &Arc<QueueState>,
        entries: u32,
        rank: Rank,
        post: impl FnOnce() -> Result<()>,
    ) -> Result<bool> {
        q.reserve(entries)?;
        let posted = self.check_reachable(rank).and_then(|()| post());
        match posted {
            Ok(()) => Ok(true),
            Err(Error::PeerFailed { rank }) => {
                q.fail_unposted(rank);
                Ok(false)
            }
            Err(e) => {
                q.unreserve(entries);
                Err(e)
            }
        }
    }

    /// Writes `size` bytes from `local` to `remote` (`gaspi_write`). Zero bytes take a
    /// queue entry and move nothing, as in GPI-2.
    pub fn write(&self, local: Local, remote: Remote, size: u64, queue: QueueId) -> Result<()> {
        let q = self.queues.get(queue)?;
        let c = self.check_transfer(local, remote, size)?;
        let t = self.transport_on(&c.dest, &q)?;
        self.posting(
            &q,
            1,
            (Counter::BytesWritten, size),
            remote.rank,
            || match size {
                0 => Ok(()),
                _ => t.write(&c.xfer(), None, Some(&q)),
            },
        )
    }

    /// Writes, then sets notification `id` of the remote segment to `value`: a peer that
    /// sees the notification sees the data (`gaspi_write_notify`). Counts 2 queue entries.
    /// Zero bytes: the notification alone.
    pub fn write_notify(
        &self,
        local: Local,
        remote: Remote,
        size: u64,
        id: NotificationId,
        value: u32,
        queue: QueueId,
    ) -> Result<()> {
        let q = self.queues.get(queue)?;
        let c = self.check_transfer(local, remote, size)?;
        Self::check_notify_target(&c.dest, id, value)?;
        let t = self.transport_on(&c.dest, &q)?;
        self.posting(
            &q,
            2,
            (Counter::BytesWritten, size),
            remote.rank,
            || match size {
                0 => t.notify(&c.dest, id.0, value, Some(&q)),
                _ => t.write(&c.xfer(), Some((id.0, value)), Some(&q)),
            },
        )
    }

    /// Reads `size` bytes of `remote` into `local` (`gaspi_read`); the data is there after
    /// `wait` on `queue`. Zero bytes take a queue entry and move nothing, as in GPI-2.
    pub fn read(&self, local: Local, remote: Remote, size: u64, queue: QueueId) -> Result<()> {
        let q = self.queues.get(queue)?;
        let c = self.check_transfer(local, remote, size)?;
        let t = self.transport_on(&c.dest, &q)?;
        self.posting(
            &q,
            1,
            (Counter::BytesRead, size),
            remote.rank,
            || match size {
                0 => Ok(()),
                _ => t.read(&c.xfer(), None, Some(&q)),
            },
        )
    }

    /// Reads, then sets notification `id` of the *local* segment to 1 once the data has
    /// arrived (`gaspi_read_notify`). Counts 2 queue entries. Zero bytes: an empty read
    /// that carries the notification (after the reads posted before it to that rank).
    pub fn read_notify(
        &self,
        local: Local,
        remote: Remote,
        size: u64,
        id: NotificationId,
        queue: QueueId,
    ) -> Result<()> {
        let q = self.queues.get(queue)?;
        let c = self.check_transfer(local, remote, size)?;
        if id.0 >= c.local.notif_count() {
            return Err(Error::NotificationIdOutOfRange {
                id: id.0,
                num: 1,
                max: c.local.notif_count(),
            });
        }
        let t = self.transport_on(&c.dest, &q)?;
        self.posting(&q, 2, (Counter::BytesRead, size), remote.rank, || {
            t.read(&c.xfer(), Some(id.0), Some(&q))
        })
    }

    fn check_list(&self, rank: Rank, elems: &[ListElem]) -> Result<Vec<Checked>> {
        let max = self.rw_list_elem_max();
        if elems.is_empty() || elems.len() > max as usize {
            return Err(Error::InvalidNumber(format!(
                "list of {} elements (1..={max})",
                elems.len()
            )));
        }
        elems
            .iter()
            .map(|e| {
                self.check_transfer(
                    e.local,
                    Remote::new(rank, e.remote_segment, e.remote_offset),
                    e.size,
                )
            })
            .collect()
    }

    /// Several writes to one rank (`gaspi_write_list`); one queue entry per element.
    pub fn write_list(&self, rank: Rank, elems: &[ListElem], queue: QueueId) -> Result<()> {
        self.write_list_inner(rank, elems, None, queue)
    }

    /// Several writes to one rank, then notification `id` = `value` on its segment
    /// `notif_segment`, after all of them (`gaspi_write_list_notify`).
    pub fn write_list_notify(
        &self,
        rank: Rank,
        elems: &[ListElem],
        notif_segment: SegmentId,
        id: NotificationId,
        value: u32,
        queue: QueueId,
    ) -> Result<()> {
        self.write_list_inner(rank, elems, Some((notif_segment, id, value)), queue)
    }

    fn write_list_inner(
        &self,
        rank: Rank,
        elems: &[ListElem],
        notify: Option<(SegmentId, NotificationId, u32)>,
        queue: QueueId,
    ) -> Result<()> {
        let q = self.queues.get(queue)?;
        let checked = self.check_list(rank, elems)?;
        let notif_dest = match notify {
            Some((seg, id, value)) => {
                let dest = self.dest(rank, self.user_key(seg)?, 0, 0)?;
                Self::check_notify_target(&dest, id, value)?;
                Some((dest, id.0, value))
            }
            None => None,
        };
        let entries = checked.len() as u32 + u32::from(notif_dest.is_some());
        let bytes = checked.iter().map(|c| c.len as u64).sum();
        self.posting(&q, entries, (Counter::BytesWritten, bytes), rank, || {
            for c in checked.iter().filter(|c| c.len > 0) {
                self.transport_on(&c.dest, &q)?
                    .write(&c.xfer(), None, Some(&q))?;
            }
            if let Some((dest, id, value)) = &notif_dest {
                self.transport_on(dest, &q)?
                    .notify(dest, *id, *value, Some(&q))?;
            }
            Ok(())
        })
    }

    /// Several reads from one rank (`gaspi_read_list`).
    pub fn read_list(&self, rank: Rank, elems: &[ListElem], queue: QueueId) -> Result<()> {
        self.read_list_inner(rank, elems, None, queue)
    }

    /// Several reads from one rank, then local notification `id` of `notif_segment` = 1 once
    /// all of them have arrived (`gaspi_read_list_notify`).
    pub fn read_list_notify(
        &self,
        rank: Rank,
        elems: &[ListElem],
        notif_segment: SegmentId,
        id: NotificationId,
        queue: QueueId,
    ) -> Result<()> {
        self.read_list_inner(rank, elems, Some((notif_segment, id)), queue)
    }

    fn read_list_inner(
        &self,
        rank: Rank,
        elems: &[ListElem],
        notify: Option<(SegmentId, NotificationId)>,
        queue: QueueId,
    ) -> Result<()> {
        let q = self.queues.get(queue)?;
        let checked = self.check_list(rank, elems)?;
        let notif = match notify {
            Some((seg, id)) => {
                let mem = self.local_segment(seg)?.mem.clone();
                if id.0 >= mem.notif_count() {
                    return Err(Error::NotificationIdOutOfRange {
                        id: id.0,
                        num: 1,
                        max: mem.notif_count(),
                    });
                }
                Some((mem, id.0))
            }
            None => None,
        };
        let entries = checked.len() as u32 + u32::from(notif.is_some());
        let bytes = checked.iter().map(|c| c.len as u64).sum();
        self.posting(&q, entries, (Counter::BytesRead, bytes), rank, || {
            for c in checked.iter().filter(|c| c.len > 0) {
                self.transport_on(&c.dest, &q)?
                    .read(&c.xfer(), None, Some(&q))?;
            }
            if let Some((mem, id)) = &notif {
                // Responses from one rank arrive in order: an empty read posted after the
                // others completes after them and carries the notification.
                let last = checked.last().expect("lists are non-empty");
                let x = Xfer {
                    local: mem,
                    local_off: 0,
                    remote: &last.dest,
                    remote_off: 0,
                    len: 0,
                };
                self.transport_on(&last.dest, &q)?
                    .read(&x, Some(*id), Some(&q))?;
            }
            Ok(())
        })
    }
}

/// Which transport carries an op to a peer.
enum Via<'a> {
    Shm,
    Verbs(&'a VerbsTransport),
    Tcp,
}

impl Context {
    /// Which transport reaches `dst`, by its route read once.
    fn via(&self, dst: &Dest) -> Via<'_> {
        match (self.sh.routes.get(dst.rank), &self.sh.verbs) {
            (Route::Local, _) => Via::Shm,
            (Route::Shm, _) if dst.mem.is_some() => Via::Shm,
            (Route::Verbs, Some(v)) if dst.verbs.is_some() => Via::Verbs(v),
            _ => Via::Tcp,
        }
    }

    fn transport<'a>(&'a self, via: Via<'a>) -> Result<&'a dyn Transport> {
        match via {
            Via::Shm => Ok(&Shm),
            Via::Verbs(v) => Ok(v),
            Via::Tcp => Ok(self.tcp()?),
        }
    }

    /// The transport that reaches `dst`.
    pub(crate) fn transport_for(&self, dst: &Dest) -> Result<&dyn Transport> {
        self.transport(self.via(dst))
    }

    /// [`transport_for`](Self::transport_for) an op posted on queue `q`. GASPI orders a
    /// queue's ops to one rank (a notification after the writes before it), so an op to a
    /// peer reached over verbs that goes over TCP (the peer was moved to TCP, or this
    /// segment of it is not registered) first waits until what went to that peer over
    /// verbs on `q` is complete (`VerbsTransport::quiesce`). A peer never reached over verbs
    /// costs a branch. Ops on no queue (atomics, the collectives' internal traffic) are
    /// ordered by nothing and use `transport_for`.
    pub(crate) fn transport_on(&self, dst: &Dest, q: &QueueState) -> Result<&dyn Transport> {
        let via = self.via(dst);
        if let (Via::Tcp, Some(v)) = (&via, &self.sh.verbs) {
            v.quiesce(dst.rank, q.id())?;
        }
        self.transport(via)
    }
}
