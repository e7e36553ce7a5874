//! The message sizes at which [`Algorithm::Auto`] changes algorithm.

use crate::algorithm::Algorithm;

/// Message-size thresholds of [`Algorithm::Auto`], in bytes of the whole vector (and of
/// the hierarchical allreduce's choice for each shard between hosts).
///
/// Measured on a 2-core machine with 2–4 ranks over shared memory and TCP loopback (see
/// `docs/allreduce.md`): recursive doubling wins while the message is latency-bound, the
/// ring once the pipeline has enough chunks to hide its `2(p-1)` steps, and Rabenseifner
/// in between. Override with `TNT_ALLREDUCE_SMALL_MAX` and `TNT_ALLREDUCE_RING_MIN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// Up to this size: recursive doubling.
    pub small_max: usize,
    /// From this size: ring. Between the two: Rabenseifner.
    pub ring_min: usize,
    /// From this size, on 3 ranks or more that all share memory: single-copy. Measured on
    /// the 2-core VM (session 24, single-copy pushing its finished block): on 3 and 4 ranks
    /// recursive doubling is 1.2–1.4× faster up to 4 KiB, single-copy 1.24–1.27× faster at
    /// 16 KiB and 1.2–3× faster than every other algorithm from 64 KiB (docs/allreduce.md).
    pub single_copy_min: usize,
    /// The same on 2 ranks, where its single round trip pays sooner: recursive doubling
    /// 1.1–1.3× faster up to 1 KiB, single-copy 1.18× faster at 4 KiB and 3.8× at 16 KiB.
    pub single_copy_min_two_ranks: usize,
}

impl Thresholds {
    /// The thresholds as words, for the setup signature (`reduce.rs`).
    pub(crate) fn words(&self) -> [u64; 4] {
        [
            self.small_max,
            self.ring_min,
            self.single_copy_min,
            self.single_copy_min_two_ranks,
        ]
        .map(|w| w as u64)
    }

    /// From which size single-copy runs on `ranks` ranks that all share memory: from 8 ranks
    /// at 16× `single_copy_min` (256 KiB by default). Each rank then takes `2(p-1)`
    /// notifications a run where recursive doubling takes `log2 p`, and the simulator (one
    /// host of 8 cores, `Machine::cluster_10gbit`) puts Rabenseifner ahead of single-copy up
    /// to 64 KiB on 8 ranks; the thresholds themselves were measured on 2–4 ranks.
    pub(crate) fn single_copy_from(&self, ranks: usize) -> usize {
        match ranks {
            2 => self.single_copy_min_two_ranks,
            r if r >= 8 => self.single_copy_min.saturating_mul(16),
            _ => self.single_copy_min,
        }
    }

    /// The flat algorithm for a vector of `bytes` on `ranks` ranks.
    ///
    /// The ring's threshold grows with the group from 16 ranks, to `ring_min · p / 12`:
    /// its `2(p-1)` steps each pay a message's latency where Rabenseifner pays `2 log2 p`,
    /// so the vector must be larger before the ring's pipelining pays for them (the
    /// simulator, `allreduce::sim`, one rank per host: Rabenseifner ahead at 4 MiB on 16
    /// and 32 ranks, at 16 MiB on 64, 64 MiB on 256 and 256 MiB on 1024; the ring from 16,
    /// 64, 256 MiB and 1 GiB). Groups of
    /// 3, 5, 6 or 7 ranks take the ring right above `small_max`: Rabenseifner first folds
    /// the surplus ranks' whole vectors into partners, a full extra exchange that a group
    /// this small does not win back (measured on 3 ranks: 256 KiB in 53 µs by the ring
    /// against 91 µs by Rabenseifner, docs/allreduce.md).
    pub(crate) fn flat(&self, bytes: usize, ranks: usize) -> Algorithm {
        let ring_min = if ranks >= 16 {
            self.ring_min.saturating_mul(ranks) / 12
        } else {
            self.ring_min
        };
        self.flat_from(bytes, ranks, ring_min)
    }

    /// [`flat`](Self::flat) for a group spread over several hosts with several members on
    /// some: the ring from `ring_min` whatever the rank count. There Rabenseifner's
    /// exchanges between hosts all cross a host's link at once, `k` ranks' worth of bytes,
    /// where the ring in rank order streams one rank's; the simulator finds the ring ahead
    /// from 4–16 MiB at 64–1024 ranks on 2–8 per host, where one rank per host needed
    /// 16–256 MiB.
    pub(crate) fn flat_across_hosts(&self, bytes: usize, ranks: usize) -> Algorithm {
        self.flat_from(bytes, ranks, self.ring_min)
    }

    fn flat_from(&self, bytes: usize, ranks: usize, ring_min: usize) -> Algorithm {
        if bytes <= self.small_max {
            Algorithm::RecursiveDoubling
        } else if ranks <= 2 || (ranks < 8 && !ranks.is_power_of_two()) {
            // On two ranks Rabenseifner is the ring without its pipeline.
            Algorithm::Ring
        } else if bytes < ring_min {
            Algorithm::Rabenseifner
        } else {
            Algorithm::Ring
        }
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            small_max: 64 << 10,
            ring_min: 4 << 20,
            single_copy_min: 16 << 10,
            single_copy_min_two_ranks: 4 << 10,
        }
    }
}
