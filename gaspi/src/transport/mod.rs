//! Transports behind one trait. Every peer is reached through exactly one of them, chosen at
//! init ([`Route`]): the rank itself and ranks on the same host through shared memory, the
//! others through InfiniBand verbs when both have an active port, else TCP. The TCP mesh is
//! always built: it also carries the control traffic (segment registration, pings, passive
//! messages to peers not connected over verbs, which get them as verbs SENDs) and tells a rank
//! when a peer dies.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::mem::SegmentMemory;
use crate::queue::QueueState;
use crate::segment::SegKey;
use crate::types::{AtomicOp, Deadline, Rank};

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
    pub verbs: Option<verbs::RemoteKeys>,
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

/// How this rank reaches a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Route {
    /// The rank itself: a local copy.
    Local = 0,
    Shm = 1,
    Tcp = 2,
    Verbs = 3,
}

pub(crate) struct Routes {
    routes: Vec<AtomicU8>,
    /// Peers reached over TCP (routes only ever move to TCP, so this only grows), for
    /// [`Routes::any_tcp`] on every blocking wait without a scan.
    tcp_peers: AtomicUsize,
}

impl Routes {
    pub fn new(routes: &[Route]) -> Self {
        Routes {
            routes: routes.iter().map(|r| AtomicU8::new(*r as u8)).collect(),
            tcp_peers: AtomicUsize::new(routes.iter().filter(|r| **r == Route::Tcp).count()),
        }
    }

    pub fn get(&self, rank: Rank) -> Route {
        match self.routes[rank.index()].load(Ordering::Acquire) {
            0 => Route::Local,
            1 => Route::Shm,
            3 => Route::Verbs,
            _ => Route::Tcp,
        }
    }

    /// Moves a shared-memory peer to TCP for good (it registered memory we cannot map).
    /// Safe for ordering: every shared-memory op is complete when its post returns.
    pub fn demote_to_tcp(&self, rank: Rank) {
        self.demote(rank, Route::Shm);
    }

    /// Moves a peer from `from` to TCP for good (it registered memory that its route cannot
    /// reach). For verbs this happens only when a device refused to register a segment;
    /// ops already posted over verbs are not ordered with later TCP ops.
    pub fn demote(&self, rank: Rank, from: Route) {
        let moved = self.routes[rank.index()]
            .compare_exchange(
                from as u8,
                Route::Tcp as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if moved {
            self.tcp_peers.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Whether any peer's data goes over TCP.
    pub fn any_tcp(&self) -> bool {
        self.tcp_peers.load(Ordering::Acquire) > 0
    }

    pub fn any_shm(&self) -> bool {
        self.any(Route::Shm)
    }

    pub fn any(&self, route: Route) -> bool {
        self.routes
            .iter()
            .any(|r| r.load(Ordering::Acquire) == route as u8)
    }

    pub fn ranks_with(&self, route: Route) -> Vec<u16> {
        (0..self.routes.len() as u16)
            .filter(|r| self.get(Rank(*r)) == route)
            .collect()
    }
}
