//! Remote atomics on 8-byte words of a segment. Every atomic on a word, from any rank and
//! any transport, is one hardware atomic instruction on that word, so they are atomic with
//! respect to each other.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{AtomicOp, Rank, SegmentId, Timeout};

impl Context {
    fn atomic(
        &self,
        seg: SegmentId,
        offset: u64,
        rank: Rank,
        op: AtomicOp,
        timeout: Timeout,
    ) -> Result<u64> {
        self.check_rank(rank)?;
        if !offset.is_multiple_of(8) {
            return Err(Error::UnalignedOffset { offset });
        }
        let key = self.user_key(seg)?;
        let dest = self.dest(rank, key, offset, 8)?;
        self.check_reachable(rank)?;
        self.transport_for(&dest)?
            .atomic(&dest, offset as usize, op, timeout.deadline())
    }

    /// Adds `add` to the u64 at `offset` of `rank`'s segment and returns the old value
    /// (`gaspi_atomic_fetch_add`).
    ///
    /// [`Error::Timeout`] after the operation went out (over TCP or verbs) leaves it in
    /// doubt: the target applies it, and the next call with the same arguments is its retry,
    /// which returns that operation's old value rather than applying it again (as for every
    /// call that timed out, GASPI resumes it when called again the same way).
    pub fn atomic_fetch_add(
        &self,
        seg: SegmentId,
        offset: u64,
        rank: Rank,
        add: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        self.atomic(seg, offset, rank, AtomicOp::FetchAdd { add }, timeout)
    }

    /// Replaces the u64 at `offset` with `new` if it equals `expected`; returns the old value
    /// either way (`gaspi_atomic_compare_swap`). A timed-out call is resumed by its retry,
    /// as for [`atomic_fetch_add`](Self::atomic_fetch_add).
    pub fn atomic_compare_swap(
        &self,
        seg: SegmentId,
        offset: u64,
        rank: Rank,
        expected: u64,
        new: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        self.atomic(
            seg,
            offset,
            rank,
            AtomicOp::CompareSwap { expected, new },
            timeout,
        )
    }

    /// The largest value an atomic word holds (`gaspi_atomic_max`).
    pub fn atomic_max(&self) -> u64 {
        u64::MAX
    }
}
