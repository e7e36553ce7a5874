//! Where the simulated ranks run: how many, how many per host, and which transport joins
//! ranks of one host; and from that the layout and the [`Shape`] the runtime would build.

use crate::options::{NET_CHUNK_BYTES, SHM_CHUNK_BYTES};
use crate::schedule::{Shape, RING_STAGING_BYTES};
use crate::stream_copy::worth_streaming;

/// How ranks on the same host reach each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Intra {
    /// Shared memory (gaspi's default between ranks of a host).
    #[default]
    Shm,
    /// TCP over loopback (`--transport tcp`): every pair talks over the network path.
    Tcp,
}

/// A group of `ranks` ranks placed `per_host` to a host, in rank order (the last host may
/// hold fewer), as a launcher's hostfile with `slots=per_host` places them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Ranks in the group.
    pub ranks: usize,
    /// Ranks per host (at least 1; `ranks` or more puts everything on one host).
    pub per_host: usize,
    /// Transport between ranks of one host.
    pub intra: Intra,
}

/// Notification ids a gaspi segment offers by default (`gaspi::config`): what the runtime
/// passes as [`Shape::notif_limit`].
pub(crate) const NOTIF_LIMIT: u32 = 65536;

impl Cluster {
    /// `ranks` ranks, `per_host` to a host, shared memory inside hosts.
    pub fn new(ranks: usize, per_host: usize) -> Cluster {
        Cluster {
            ranks,
            per_host,
            intra: Intra::Shm,
        }
    }

    /// Hosts in use.
    pub fn hosts(&self) -> usize {
        self.ranks.div_ceil(self.per_host.max(1))
    }

    /// Member indices per host, as `collective::set_up` hands them to the planner.
    pub fn layout(&self) -> Vec<Vec<usize>> {
        let k = self.per_host.max(1);
        (0..self.hosts())
            .map(|h| (h * k..((h + 1) * k).min(self.ranks)).collect())
            .collect()
    }

    /// The host rank `r` runs on.
    pub(crate) fn host_of(&self, r: usize) -> usize {
        r / self.per_host.max(1)
    }

    /// Whether every member reaches every other through shared memory (the runtime's
    /// `all_shared_memory`): one host and the shared-memory transport.
    pub fn shared_memory(&self) -> bool {
        self.hosts() == 1 && self.intra == Intra::Shm
    }

    /// Whether ranks `a` and `b` talk through shared memory.
    pub(crate) fn shm_between(&self, a: usize, b: usize) -> bool {
        self.intra == Intra::Shm && self.host_of(a) == self.host_of(b)
    }

    /// The shape rank `me` builds for `bytes` of `elem`-byte elements, exactly as
    /// `collective::set_up` fills it in with default options on hosts whose last-level
    /// cache holds `llc_bytes`.
    pub(crate) fn shape(&self, me: usize, bytes: usize, elem: usize, llc_bytes: usize) -> Shape {
        Shape {
            me,
            ranks: self.ranks,
            count: bytes / elem,
            elem,
            chunk_bytes: if self.shared_memory() {
                SHM_CHUNK_BYTES
            } else {
                NET_CHUNK_BYTES
            },
            notif_limit: NOTIF_LIMIT,
            ring_staging_bytes: RING_STAGING_BYTES,
            in_cache: !worth_streaming(bytes, self.per_host.max(1).min(self.ranks), llc_bytes),
        }
    }
}
