//! Who last wrote each byte of every rank's segment in a replay, so that a copy or a
//! reduction can tell what it reads from another core's cache from what its own core wrote.
//!
//! Why the replay needs it: on the VM a line another core has just written moves to the
//! reader's core slower than a line comes from the shared last-level cache (session 20,
//! `docs/allreduce.md`), and whether a read finds such lines depends on the schedule, not
//! on the size alone. Single-copy that pushes its finished block reads, in the next run, the
//! lines it wrote itself into its peers' buffers; one that pulls reads lines the peers
//! wrote, and the peers then read back lines it wrote: every line crosses twice (2.8× slower
//! at 1 MiB on 2 ranks). The schedules are race-free (every read of a peer's bytes follows
//! the notification of their last write), so the replay's order of actions gives every read
//! the same last writer as the real run.

use std::ops::Range;

use rangemap::RangeMap;

/// The last writer of every byte of every rank's segment. A byte no action has written was
/// written by its owner (the application filled its vector, or the segment is new).
pub(crate) struct LastWriters {
    /// Per segment owner, the ranges written in the replay and by whom; empty where nothing
    /// is tracked.
    segments: Vec<RangeMap<u64, u32>>,
}

impl LastWriters {
    /// Tracks the segments of `ranks` ranks, or none (`track` false: where lines never
    /// cross between private caches, who wrote them does not matter, and every share is 0).
    pub(crate) fn new(ranks: usize, track: bool) -> LastWriters {
        let ranks = if track { ranks } else { 0 };
        LastWriters {
            segments: (0..ranks).map(|_| RangeMap::new()).collect(),
        }
    }

    /// The share of `len` bytes read by `reader` from each `(owner, offset)` operand that
    /// another rank wrote last, over one operand's bytes (0 where nothing is tracked). A
    /// reduction with one foreign operand and one with two both count 1 once the caller
    /// caps it, as the model before session 25 charged every reduction (the fit absorbs the
    /// difference).
    pub(crate) fn foreign_share(&self, reader: usize, operands: &[(usize, u64)], len: u32) -> f64 {
        if self.segments.is_empty() || len == 0 {
            return 0.0;
        }
        let bytes: u64 = operands
            .iter()
            .map(|&(owner, at)| self.foreign(owner, at, u64::from(len), reader))
            .sum();
        bytes as f64 / f64::from(len)
    }

    /// Bytes of `owner`'s segment range `[at, at+len)` that a rank other than `reader`
    /// wrote last.
    fn foreign(&self, owner: usize, at: u64, len: u64, reader: usize) -> u64 {
        if len == 0 {
            return 0;
        }
        let range = at..at + len;
        let overlap = |r: &Range<u64>| r.end.min(range.end) - r.start.max(range.start);
        let mut written = 0;
        let mut by_others = 0;
        for (r, &writer) in self.segments[owner].overlapping(&range) {
            written += overlap(r);
            if writer as usize != reader {
                by_others += overlap(r);
            }
        }
        // The rest is the owner's.
        if owner != reader {
            by_others += len - written;
        }
        by_others
    }

    /// `writer` wrote `owner`'s segment range `[at, at+len)` (nothing where nothing is
    /// tracked).
    pub(crate) fn wrote(&mut self, owner: usize, at: u64, len: u32, writer: usize) {
        if let (Some(segment), true) = (self.segments.get_mut(owner), len > 0) {
            segment.insert(at..at + u64::from(len), writer as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LastWriters;

    #[test]
    fn bytes_are_their_owners_until_another_rank_writes_them() {
        let mut w = LastWriters::new(3, true);
        assert_eq!(w.foreign(0, 0, 100, 0), 0);
        assert_eq!(w.foreign(0, 0, 100, 1), 100);
        // Rank 1 writes [40, 60) of rank 0's segment, then rank 2 writes [50, 70).
        w.wrote(0, 40, 20, 1);
        w.wrote(0, 50, 20, 2);
        assert_eq!(w.foreign(0, 0, 100, 0), 30);
        assert_eq!(w.foreign(0, 0, 100, 1), 100 - 10);
        assert_eq!(w.foreign(0, 45, 10, 2), 5);
        // The owner writes over everything: its own again.
        w.wrote(0, 0, 100, 0);
        assert_eq!(w.foreign(0, 0, 100, 0), 0);
        assert_eq!(w.foreign(0, 0, 0, 1), 0);
        w.wrote(0, 7, 0, 1);
        assert_eq!(w.foreign(0, 0, 100, 0), 0);
    }
}
