//! Transports behind one trait. Every peer is reached through exactly one of them, chosen at
//! init ([`Route`]): the rank itself and ranks on the same host through shared memory, the
//! others through InfiniBand verbs when both have an active port, else TCP. The TCP mesh is
//! always built: it also carries the control traffic (segment registration, pings, passive
//! messages to peers not connected over verbs, which get them as verbs SENDs) and tells a rank
//! when a peer dies.

use std::sync::Arc;

use crate::error::Result;
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::RemoteKeys;
use crate::transport::completion::QueueState;
use crate::types::{AtomicOp, Deadline, Rank, SegKey};

pub(crate) mod completion;
pub(crate) mod control_handler;
pub(crate) mod requests;
pub(crate) mod route;
pub(crate) mod shm;
pub(crate) mod tcp;
pub(crate) mod verbs;

/// The far side of a one-sided operation, resolved and bounds-checked by the caller.
pub(crate) struct Dest {
    pub rank: Rank,
    pub key: SegKey,
    pub notif_count: u32,
    /// The peer's segment mapped into this process (self and shared-memory peers).
    pub mem: Option<Arc<SegmentMemory>>,
    /// The keys of the peer's segment (verbs peers whose segment is registered).
    pub verbs: Option<RemoteKeys>,
}

/// A transfer between a local segment and a remote one (bounds already checked).
pub(crate) struct Xfer<'a> {
    pub local: &'a Arc<SegmentMemory>,
    pub local_off: usize,
    pub remote: &'a Dest,
    pub remote_off: usize,
    pub len: usize,
}

/// The data path of a transport. Posting never blocks on a slow peer: an op that cannot be
/// finished at once is registered with its queue (`q`) and completed later; `q = None` marks
/// internal traffic that nobody waits for.
pub(crate) trait Transport: Send + Sync {
    /// Remote write, then the notification `(id, value)` if given, in that order.
    fn write(
        &self,
        x: &Xfer<'_>,
        notify: Option<(u32, u32)>,
        q: Option<&Arc<QueueState>>,
    ) -> Result<()>;
    /// Sets notification `id` of the remote segment to `value`.
    fn notify(&self, dst: &Dest, id: u32, value: u32, q: Option<&Arc<QueueState>>) -> Result<()>;
    /// Remote read into the local segment, then local notification `id` = 1 if given.
    fn read(&self, x: &Xfer<'_>, notify: Option<u32>, q: Option<&Arc<QueueState>>) -> Result<()>;
    /// Atomic on the remote u64 at `off`; returns the old value.
    fn atomic(&self, dst: &Dest, off: usize, op: AtomicOp, deadline: Deadline) -> Result<u64>;
}
