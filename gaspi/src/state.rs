//! The state vector: this rank's view of every peer's health.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, Ordering};

use crate::types::{PeerState, Rank};

pub(crate) struct StateVector {
    corrupt: Vec<AtomicU8>,
    /// Peers that left with an orderly `term`: not corrupt, but unreachable.
    gone: Vec<AtomicBool>,
    /// Bumped on every new failure, so waiters can tell that something changed.
    failures: AtomicU64,
    last_failed: AtomicU16,
}

impl StateVector {
    pub fn new(nranks: u16) -> Self {
        StateVector {
            corrupt: (0..nranks).map(|_| AtomicU8::new(0)).collect(),
            gone: (0..nranks).map(|_| AtomicBool::new(false)).collect(),
            failures: AtomicU64::new(0),
            last_failed: AtomicU16::new(0),
        }
    }

    /// Marks `rank` CORRUPT; true if it was healthy before.
    pub fn mark_corrupt(&self, rank: Rank) -> bool {
        let newly = self.corrupt[rank.index()].swap(1, Ordering::SeqCst) == 0;
        if newly {
            self.last_failed.store(rank.0, Ordering::SeqCst);
            self.failures.fetch_add(1, Ordering::SeqCst);
        }
        newly
    }

    pub fn mark_gone(&self, rank: Rank) {
        self.gone[rank.index()].store(true, Ordering::SeqCst);
    }

    pub fn is_corrupt(&self, rank: Rank) -> bool {
        self.corrupt[rank.index()].load(Ordering::SeqCst) != 0
    }

    /// Corrupt or gone: operations to it cannot succeed.
    pub fn is_unreachable(&self, rank: Rank) -> bool {
        self.is_corrupt(rank) || self.gone[rank.index()].load(Ordering::SeqCst)
    }

    /// The first rank among `ranks` that is corrupt or has left: a collective that needs
    /// it cannot complete.
    pub fn first_unreachable(&self, mut ranks: impl Iterator<Item = Rank>) -> Option<Rank> {
        ranks.find(|r| self.is_unreachable(*r))
    }

    /// How many peers have failed so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// The peer that failed most recently.
    pub fn last_failed(&self) -> Rank {
        Rank(self.last_failed.load(Ordering::SeqCst))
    }

    pub fn snapshot(&self) -> Vec<PeerState> {
        self.corrupt
            .iter()
            .map(|s| {
                if s.load(Ordering::SeqCst) != 0 {
                    PeerState::Corrupt
                } else {
                    PeerState::Healthy
                }
            })
            .collect()
    }
}
