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
    /// Per segment owner, the ranges written in the replay and by whom.
    segments: Vec<RangeMap<u64, u32>>,
}

impl LastWriters {
    pub(crate) fn new(ranks: usize) -> LastWriters {
        LastWriters {
            segments: (0..ranks).map(|_| RangeMap::new()).collect(),
        }
    }

    /// Bytes of `owner`'s segment range `[at, at+len)` that a rank other than `reader`
    /// wrote last.
    pub(crate) fn foreign(&self, owner: usize, at: u64, len: u64, reader: usize) -> u64 {
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

    /// `writer` wrote `owner`'s segment range `[at, at+len)`.
    pub(crate) fn wrote(&mut self, owner: usize, at: u64, len: u64, writer: usize) {
        if len > 0 {
            self.segments[owner].insert(at..at + len, writer as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LastWriters;

    #[test]
    fn bytes_are_their_owners_until_another_rank_writes_them() {
        let mut w = LastWriters::new(3);
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
