//! What a byte of a copy, a reduction or a network message costs in a replay: the
//! machine's rates blended by where the bytes come from (the last-level cache or memory,
//! another core's private cache), fixed per replay except for what the replay tracks.

use super::cluster::Cluster;
use super::machine::Machine;
use super::recency::Recency;

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

/// Seconds per byte from the last-level cache and from memory.
#[derive(Clone, Copy)]
pub(crate) struct Rates {
    cache: f64,
    memory: f64,
}

impl Rates {
    fn of(cache_bw: f64, memory_bw: f64) -> Rates {
        Rates {
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
        let k = c.per_host.max(1).min(c.ranks);
        let on_cores = if m.hosts_share_cores { c.ranks } else { k };
        // Why this working set: the ranks of a host (or of the one VM) read and write each
        // other's segments (vector and staging) through one cache.
        let set = on_cores as f64 * segment_bytes as f64;
        let fits = (m.cache_bytes as f64 / set.max(1.0)).min(1.0);
        // The share of a segment still in the writing core's private cache moves between
        // the cores at their own rate, whatever the last-level cache holds
        // (`Machine::core_cache_bytes`). Ranks that take turns on a core share its cache.
        let per_core = (on_cores as f64 / m.cores.max(1) as f64).max(1.0);
        let hot = (m.core_cache_bytes as f64 / (per_core * segment_bytes as f64).max(1.0)).min(1.0);
        let oversubscribed = on_cores > m.cores;
        let if_oversubscribed = |share: f64| if oversubscribed { share } else { 0.0 };
        Costs {
            oversubscribed,
            copy: Rates::of(m.shm_copy_bw_cache, m.shm_copy_bw_mem),
            reduce: Rates::of(m.reduce_bw_cache, m.reduce_bw_mem),
            net_copy: Rates::of(m.net_copy_bw_cache, m.net_copy_bw),
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

    /// The share of `owner`'s range `[at, at+len)` that pool `pool` takes from memory: per
    /// byte where `recency` tracks them, the working set's spill otherwise.
    pub(crate) fn missed(
        &self,
        recency: &Recency,
        pool: usize,
        owner: usize,
        at: u64,
        len: u32,
    ) -> f64 {
        if recency.tracks() {
            recency.missed(pool, owner, at, len)
        } else {
            self.spill
        }
    }

    /// Seconds per byte of `work` on streams of its length, each `(weight, missed)`: read
    /// or written `weight` times (a reduction's result is read and written), the share
    /// `missed` from memory; and the bytes drawn on the host's memory per byte.
    pub(crate) fn streams(&self, work: Work, streams: &[(f64, f64)]) -> (f64, f64) {
        let (rates, also_missed) = match work {
            Work::Copy => (self.copy, 0.0),
            Work::Reduce => (self.reduce, 0.0),
            Work::NetCopy => (self.net_copy, self.net_miss),
        };
        let weight: f64 = streams.iter().map(|s| s.0).sum();
        let memory: f64 = streams
            .iter()
            .map(|s| s.0 * (s.1 + (1.0 - s.1) * also_missed))
            .sum();
        let missed = if weight > 0.0 { memory / weight } else { 0.0 };
        let per_byte = (1.0 - missed) * rates.cache + missed * rates.memory;
        (per_byte, memory)
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
