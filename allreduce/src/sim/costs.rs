//! What a byte of a copy, a reduction or a network message costs in a replay: the
//! machine's rates blended by where the bytes come from (the rank's own core's private
//! cache, the last-level cache or memory, another core's private cache), fixed per replay
//! except for what the replay tracks.

use super::caches::Found;
use super::cluster::Cluster;
use super::machine::Machine;

/// The per-rank costs of the machine for this cluster and vector, fixed for a replay.
pub(crate) struct Costs {
    /// More ranks than cores share the cores: a rank that blocks gives its core away and
    /// spends `oversub_wake` to be switched back in.
    pub oversubscribed: bool,
    /// Seconds per byte of a copy and of a reduction, from the last-level cache and from
    /// memory.
    copy: Rates,
    reduce: Rates,
    /// Seconds per byte of one side's kernel copy of a network message.
    net_copy: Rates,
    /// Seconds per byte of a reduction into a chunk still in cache (`Op::ReadPeer`'s
    /// `folded`) where no byte's recency is tracked: only the peer's operand streams from
    /// memory.
    reduce_folded: f64,
    /// Share of what another rank wrote last that is still in its core's private cache
    /// (`Machine::core_cache_bytes`), and seconds per byte of moving it between the cores.
    pub hot: f64,
    cross: f64,
    /// On an oversubscribed host, the share of a read's lines whose core the scheduler
    /// decided (`Machine::oversub_migration`), and the share of those in another core's
    /// cache.
    migrated: f64,
    elsewhere: f64,
    /// On an oversubscribed host, the share of the kernel's copies that come from memory
    /// whatever the replay finds in the cache (`Machine::oversub_net_miss`).
    net_miss: f64,
    /// Seconds per byte of a rank's network stream.
    pub stream: f64,
    /// Where no byte's recency is tracked, the share of the working set outside the cache:
    /// that share of every byte a copy or a reduction touches comes from memory.
    spill: f64,
}

/// Seconds per byte from the core's private cache, the last-level cache and memory.
#[derive(Clone, Copy)]
pub(crate) struct Rates {
    private: f64,
    cache: f64,
    memory: f64,
}

impl Rates {
    fn of(private_bw: f64, cache_bw: f64, memory_bw: f64) -> Rates {
        Rates {
            private: 1.0 / private_bw,
            cache: 1.0 / cache_bw,
            memory: 1.0 / memory_bw,
        }
    }
}

/// A kind of work on bytes, for its rates.
#[derive(Clone, Copy)]
pub(crate) enum Work {
    Copy,
    Reduce,
    /// One side of a network message, copied by the kernel.
    NetCopy,
}

impl Costs {
    pub(crate) fn new(m: &Machine, c: &Cluster, segment_bytes: usize) -> Costs {
        let on_cores = m.ranks_on_cores(c);
        // Why this working set: the ranks of a host (or of the one VM) read and write each
        // other's segments (vector and staging) through one cache.
        let set = on_cores as f64 * segment_bytes as f64;
        let fits = (m.cache_bytes as f64 / set.max(1.0)).min(1.0);
        // The share of a segment still in the writing core's private cache moves between
        // the cores at their own rate, whatever the last-level cache holds
        // (`Machine::core_cache_bytes`). Ranks that take turns on a core share its cache.
        let per_core = m.ranks_per_core(c);
        let hot = (m.core_cache_bytes as f64 / (per_core * segment_bytes as f64).max(1.0)).min(1.0);
        let oversubscribed = on_cores > m.cores;
        let if_oversubscribed = |share: f64| if oversubscribed { share } else { 0.0 };
        Costs {
            oversubscribed,
            copy: Rates::of(m.private_copy_bw, m.shm_copy_bw_cache, m.shm_copy_bw_mem),
            reduce: Rates::of(m.private_reduce_bw, m.reduce_bw_cache, m.reduce_bw_mem),
            // The kernel's copies are not told apart by the private cache: fitted apart on
            // the Xeon VM's run 32 (session 32), their rate came out the cache's.
            net_copy: Rates::of(m.net_copy_bw_cache, m.net_copy_bw_cache, m.net_copy_bw),
            // A third of the traffic (one operand, not two and the result) from memory.
            reduce_folded: fits / m.reduce_bw_cache
                + (1.0 - fits) / (3.0 * m.reduce_bw_mem).min(m.reduce_bw_cache),
            hot,
            cross: 1.0 / m.cross_core_bw,
            migrated: if_oversubscribed(m.oversub_migration),
            elsewhere: 1.0 - 1.0 / m.cores.max(1) as f64,
            net_miss: if_oversubscribed(m.oversub_net_miss),
            stream: 1.0 / m.net_stream_bw,
            spill: 1.0 - fits,
        }
    }

    /// Where no byte's recency is tracked, the share of the working set outside the cache.
    pub(crate) fn spill(&self) -> f64 {
        self.spill
    }

    /// Seconds per byte of `work` on streams of its length, each `(weight, found)`: read
    /// or written `weight` times (a reduction's result is read and written), its bytes
    /// where `found` says; and the bytes drawn on the host's memory per byte.
    pub(crate) fn streams(&self, work: Work, streams: &[(f64, Found)]) -> (f64, f64) {
        let (rates, also_missed) = match work {
            Work::Copy => (self.copy, 0.0),
            Work::Reduce => (self.reduce, 0.0),
            Work::NetCopy => (self.net_copy, self.net_miss),
        };
        let mut weight = 0.0;
        let mut seconds = 0.0;
        let mut memory = 0.0;
        for &(w, found) in streams {
            let shared = 1.0 - found.private;
            let missed = found.missed + (shared - found.missed) * also_missed;
            weight += w;
            memory += w * missed;
            seconds += w
                * (found.private * rates.private
                    + (shared - missed) * rates.cache
                    + missed * rates.memory);
        }
        if weight > 0.0 {
            (seconds / weight, memory)
        } else {
            (0.0, 0.0)
        }
    }

    /// Whether the working set spills from the cache (where no byte's recency is tracked).
    pub(crate) fn spills(&self) -> bool {
        self.spill > 0.0
    }

    /// [`streams`](Self::streams) for a reduction folded into a chunk still in cache where
    /// no byte's recency is tracked (where it is, the destination's recency says so).
    pub(crate) fn folded(&self) -> (f64, f64) {
        (self.reduce_folded, self.spill)
    }

    /// Seconds per byte of work costing `local` per byte, a share `foreign` of whose bytes
    /// (at most 1) another rank wrote last: of those, the share still in that rank's core's
    /// cache crosses between the cores.
    pub(crate) fn per_byte(&self, local: f64, foreign: f64) -> f64 {
        let foreign = (1.0 - self.migrated) * foreign.min(1.0) + self.migrated * self.elsewhere;
        let crossing = self.hot * foreign;
        crossing * self.cross + (1.0 - crossing) * local
    }
}
