//! The [`Shape`] every algorithm is built for, and the layout helpers they share.

use super::action::{Action, Schedule};

/// The shape of one collective on one rank.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// This rank's index in the group.
    pub me: usize,
    /// Ranks in the group.
    pub ranks: usize,
    /// Elements.
    pub count: usize,
    /// Bytes per element.
    pub elem: usize,
    /// Pipelining granularity in bytes.
    pub chunk_bytes: usize,
    /// Highest notification id count the segment offers.
    pub notif_limit: u32,
    /// Bytes of staging the ring cycles through (`RING_STAGING_BYTES` of
    /// `ring.rs` outside tests; at least 2 chunks).
    pub ring_staging_bytes: usize,
    /// The vectors of the members on each host fit its last-level cache together (the
    /// group agrees on it: `collective::set_up`). Single-copy then pushes its finished
    /// block into the peers' buffers; past the cache the peers pull it, with streaming
    /// stores where their own view of the cache says so (`single_copy.rs`).
    pub in_cache: bool,
}

impl Shape {
    /// Bytes of the data range (the user's elements).
    pub(super) fn data_bytes(&self) -> usize {
        self.count * self.elem
    }

    /// Byte range of block `j` when the elements are split into `parts` balanced blocks.
    pub(super) fn block(&self, j: usize, parts: usize) -> (usize, usize) {
        let start = self.count * j / parts;
        let end = self.count * (j + 1) / parts;
        (start * self.elem, (end - start) * self.elem)
    }

    /// Bytes of the largest of `parts` balanced blocks (what a staging slot must hold).
    pub(super) fn max_block_bytes(&self, parts: usize) -> usize {
        self.count.div_ceil(parts) * self.elem
    }
}

/// Staging and data regions start on cache-line boundaries.
pub(super) fn align(bytes: usize) -> usize {
    bytes.next_multiple_of(64)
}

/// Splits `[off, off+len)` into chunks of `chunk` bytes (the last may be shorter).
pub(super) fn chunks(
    off: usize,
    len: usize,
    chunk: usize,
) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..len.div_ceil(chunk)).map(move |c| (c, off + c * chunk, chunk.min(len - c * chunk)))
}

/// The schedule of a collective with nobody to talk to (one rank or no elements): only
/// AVG's division is left to do, and that only when several ranks summed.
pub(super) fn local_only(sh: &Shape, avg: bool) -> Schedule {
    let mut actions = Vec::new();
    if avg && sh.count > 0 && sh.ranks > 1 {
        actions.push(Action::Divide {
            off: 0,
            len: sh.data_bytes(),
        });
    }
    Schedule {
        actions,
        segment_bytes: sh.data_bytes(),
        notifications: 0,
    }
}

/// Position in a broadcast relative to the root.
pub(super) fn relative(me: usize, root: usize, ranks: usize) -> usize {
    (me + ranks - root) % ranks
}
