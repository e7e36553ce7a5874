//! Where a replay finds the bytes a copy or a reduction touches: in the private cache of
//! the rank's own core, in its host's last-level cache, or in memory, each byte by how
//! recently it was touched there (`recency.rs`).
//!
//! Why a private tier of its own: on the Intel Xeon VM one core copies at 38 GB/s what
//! fits its 2 MiB L2 and at 12 GB/s what it finds in the L3 (`docs/allreduce.md`,
//! "Simulator", session 32), so single-copy on 2 ranks moves 1 MiB at twice the rate per
//! byte of 4 MiB: each rank's half of its own vector and of its peer's, which it pushed
//! there itself the run before, stay in its L2 up to 1 MiB. A line another rank touched
//! since is in that rank's core, not this one's: the private caches are per rank, and the
//! ranks that take turns on a core split its cache. A byte's distance counts from the
//! beginning of the touch that stamped it (`Recency::counting_from_touch_start`), so a
//! pass over more than the cache leaves nothing of itself for the next.
//!
//! The last-level cache also holds the kernel's socket buffers, which every network message
//! passes through where the host's cores copy it (`Caches::pass_through_kernel`): over TCP
//! on 3 ranks at 16 MiB, the ranks' vectors and staging alone fit the Xeon's cache, and the
//! replay held them there while the runs measured them spilled (session 33).

use super::cluster::Cluster;
use super::machine::Machine;
use super::program::Program;
use super::recency::Recency;

/// Where a range's bytes are: the shares (0 to 1, summing to at most 1) in the reader's
/// core's private cache and in memory; the rest is in the last-level cache.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Found {
    pub private: f64,
    pub missed: f64,
}

/// The caches of every host and core of a replay.
pub(crate) struct Caches {
    /// Per host (or the one machine hosts share), what its ranks touched.
    llc: Recency,
    /// Per rank, what it touched (nothing tracked without a private tier).
    private: Recency,
    /// The host (pool of `llc`) of each rank.
    host: Vec<usize>,
    /// Where the last-level cache's recency is not tracked, the share of the working set
    /// outside it: that share of every range comes from memory.
    spill: f64,
    /// Bytes of socket buffers each host's network messages cycle through, where its
    /// cores copy them (0: untracked). Host `h`'s are segment owner `ranks + h`.
    kernel_bytes: u64,
    /// Per host, where the next message's bytes go in its socket buffers.
    kernel_at: Vec<u64>,
}

/// How fast the share of a line a private cache holds falls once more distinct bytes than
/// its size were touched since: nearly least-recently-used. Why fixed: one core copying
/// 1.5 MiB buffers (3 MiB touched a copy, 1.5 times the L2) on the Xeon VM runs at
/// 14.4 GB/s against 38 within the L2 and 12.9 from the L3: 16% held, `(1/1.5)^4.5`.
const PRIVATE_FALLOFF: f64 = 4.5;

impl Caches {
    /// The caches for `cluster` on `machine`, warmed with what `program` touches (the
    /// measured runs follow many others), where `spill` is the working set's share outside
    /// the last-level cache when its recency is not tracked.
    pub(crate) fn new(
        machine: &Machine,
        cluster: &Cluster,
        program: &Program,
        spill: f64,
    ) -> Caches {
        let n = cluster.ranks;
        let host: Vec<usize> = (0..n).map(|r| machine.pool_of(cluster, r)).collect();
        let pools = machine.pools(cluster);
        let mut llc = Recency::new(
            n + pools,
            pools,
            machine.cache_bytes,
            machine.llc_falloff,
            machine.llc_by_reuse,
        );
        llc.warm(program, |owner| host[owner]);
        // Ranks that take turns on a core split its cache.
        let private_bytes =
            (machine.private_bytes as f64 / machine.ranks_per_core(cluster)) as usize;
        let mut private = Recency::new(n, n, private_bytes, PRIVATE_FALLOFF, private_bytes > 0)
            .counting_from_touch_start();
        private.warm(program, |owner| owner);
        Caches {
            llc,
            private,
            host,
            spill,
            kernel_bytes: if machine.net_on_cpu {
                machine.net_buffer_bytes as u64
            } else {
                0
            },
            kernel_at: vec![0; pools],
        }
    }

    /// A network message of `len` bytes from `by` passed through its host's socket
    /// buffers: the kernel wrote them there and read them out, in the last-level cache,
    /// where they take the place of the ranks' bytes. The buffers are a ring of
    /// `Machine::net_buffer_bytes` per host, each message after the one before.
    pub(crate) fn pass_through_kernel(&mut self, by: usize, len: u32) {
        if self.kernel_bytes == 0 || !self.llc.tracks() {
            return;
        }
        let pool = self.host[by];
        let owner = self.host.len() + pool;
        let mut left = u64::from(len);
        while left > 0 {
            let at = self.kernel_at[pool];
            let n = left.min(self.kernel_bytes - at);
            self.llc.touch(pool, &[(owner, at)], n as u32);
            self.kernel_at[pool] = (at + n) % self.kernel_bytes;
            left -= n;
        }
    }

    /// Whether the last-level cache holds each byte by its recency.
    pub(crate) fn tracks(&self) -> bool {
        self.llc.tracks()
    }

    /// Where `reader` finds `owner`'s range `[at, at+len)`.
    pub(crate) fn find(&self, reader: usize, owner: usize, at: u64, len: u32) -> Found {
        let missed = if self.llc.tracks() {
            self.llc.missed(self.host[reader], owner, at, len)
        } else {
            self.spill
        };
        let private = if self.private.tracks() {
            1.0 - self.private.missed(reader, owner, at, len)
        } else {
            0.0
        };
        // What the private cache holds is not fetched from further away.
        Found {
            private,
            missed: missed.min(1.0 - private),
        }
    }

    /// `by` touched `len` bytes at each of `ranges` (`(owner, offset)`).
    pub(crate) fn touch(&mut self, by: usize, ranges: &[(usize, u64)], len: u32) {
        self.llc.touch(self.host[by], ranges, len);
        self.private.touch(by, ranges, len);
    }
}

#[cfg(test)]
mod tests {
    use super::{Caches, Found};
    use crate::sim::cluster::Cluster;
    use crate::sim::machine::Machine;
    use crate::sim::program::Program;

    /// `ranks` ranks on one host of `machine`, with nothing warmed.
    fn caches(machine: &Machine, ranks: usize, spill: f64) -> Caches {
        let program = Program {
            ranks: vec![Vec::new(); ranks],
            segment_bytes: 1 << 20,
        };
        Caches::new(machine, &Cluster::new(ranks, ranks), &program, spill)
    }

    fn found(private: f64, missed: f64) -> Found {
        Found { private, missed }
    }

    /// The Xeon VM with a 64 KiB private tier.
    fn small_tier() -> Machine {
        Machine {
            private_bytes: 64 << 10,
            ..Machine::xeon_shm()
        }
    }

    #[test]
    fn a_rank_finds_privately_what_it_touched_last_and_no_other_rank_since() {
        let mut c = caches(&small_tier(), 2, 0.0);
        assert_eq!(c.find(0, 1, 0, 4096), found(0.0, 1.0), "never touched");
        c.touch(0, &[(1, 0)], 4096);
        assert_eq!(c.find(0, 1, 0, 4096), found(1.0, 0.0));
        assert_eq!(
            c.find(1, 1, 0, 4096),
            found(0.0, 0.0),
            "in the shared cache"
        );
        // Rank 1 takes the lines to its core.
        c.touch(1, &[(1, 0)], 4096);
        assert_eq!(c.find(0, 1, 0, 4096), found(0.0, 0.0));
        assert_eq!(c.find(1, 1, 0, 4096), found(1.0, 0.0));
        // 128 KiB more through rank 1's core: twice its size, nearly nothing held there.
        c.touch(1, &[(0, 0)], 128 << 10);
        let f = c.find(1, 1, 0, 4096);
        assert!(f.private < 0.05 && f.missed == 0.0, "{f:?}");
    }

    #[test]
    fn ranks_that_take_turns_on_a_core_each_have_a_share_of_its_private_cache() {
        // 4 ranks on 2 cores: 32 KiB each.
        let mut c = caches(&small_tier(), 4, 0.0);
        c.touch(0, &[(0, 0)], 4096);
        c.touch(0, &[(1, 0)], 24 << 10);
        assert_eq!(c.find(0, 0, 0, 4096).private, 1.0);
        c.touch(0, &[(1, 1 << 19)], 24 << 10);
        assert!(c.find(0, 0, 0, 4096).private < 0.5);
    }

    /// 2 ranks with a 1 MiB last-level cache that keeps nothing past its size, no private
    /// tier, and `ring` bytes of socket buffers; rank 0 has just touched 4 KiB of its own.
    fn with_kernel_ring(ring: usize) -> Caches {
        let m = Machine {
            cache_bytes: 1 << 20,
            llc_falloff: 100.0,
            private_bytes: 0,
            net_buffer_bytes: ring,
            ..Machine::xeon_shm()
        };
        let mut c = caches(&m, 2, 0.0);
        c.touch(0, &[(0, 0)], 4096);
        c
    }

    #[test]
    fn network_bytes_through_the_kernel_push_a_ranks_bytes_out_of_the_shared_cache() {
        let mut c = with_kernel_ring(4 << 20);
        // 512 KiB through the kernel: still within the 1 MiB cache.
        c.pass_through_kernel(1, 512 << 10);
        assert_eq!(c.find(0, 0, 0, 4096), found(0.0, 0.0));
        // 2 MiB more: the rank's bytes are 2.5 MiB of other bytes away.
        c.pass_through_kernel(1, 2 << 20);
        assert!(c.find(0, 0, 0, 4096).missed > 0.99);
        // Without the buffers tracked, the same messages leave the cache alone.
        let mut none = with_kernel_ring(0);
        none.pass_through_kernel(1, 8 << 20);
        assert_eq!(none.find(0, 0, 0, 4096), found(0.0, 0.0));
    }

    #[test]
    fn the_kernels_buffers_are_a_ring_reused_after_its_size() {
        let mut c = with_kernel_ring(256 << 10);
        // 8 MiB through a 256 KiB ring touch only 256 KiB of distinct bytes.
        for _ in 0..32 {
            c.pass_through_kernel(0, 256 << 10);
        }
        assert_eq!(c.find(0, 0, 0, 4096), found(0.0, 0.0));
    }

    #[test]
    fn without_a_private_tier_or_recency_only_the_shared_cache_counts() {
        let mut c = caches(&Machine::shm(), 2, 0.0);
        c.touch(0, &[(0, 0)], 4096);
        assert_eq!(c.find(0, 0, 0, 4096), found(0.0, 0.0));
        // The choice table's machine: the share of the working set that spills, per range.
        let mut c = caches(&Machine::cluster_10gbit(), 2, 0.25);
        assert!(!c.tracks());
        c.touch(0, &[(0, 0)], 4096);
        assert_eq!(c.find(0, 0, 0, 4096), found(0.0, 0.25));
    }
}
