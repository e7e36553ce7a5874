//! The model of the machine a simulated allreduce runs on: what a byte and a message cost
//! inside a host (shared memory), between hosts (the network) and in a reduction, and how
//! hosts share their cores and links; its parameters by name, for calibration. The named
//! machines calibrated on the project's VMs are in `presets.rs`.

/// Costs and limits of the machine a simulated allreduce runs on. Times in seconds,
/// bandwidths in bytes per second.
///
/// Why these parameters: they are the resources the runtime's transports actually occupy.
/// gaspi's shared-memory write is one synchronous `memcpy` by the sending rank into the
/// peer's segment (the sender's CPU is busy for its length), the TCP write is handed to a
/// per-peer sending thread (the sender's CPU only posts it; the bytes then cross the rank's
/// stream and the hosts' links), and every `Reduce` is CPU work on the rank's core.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Short name (the preset's).
    pub name: String,
    /// Cores per host (or, with `hosts_share_cores`, of the one machine all hosts run on).
    pub cores: usize,
    /// All hosts run on one physical machine and share its `cores` (network namespaces on
    /// one VM): oversubscription is counted over every rank, not per host.
    pub hosts_share_cores: bool,
    /// Latency of a shared-memory write: posting, the notification store and the peer's
    /// wake-up, paid once per message whatever its length.
    pub shm_alpha: f64,
    /// The same for a bare notification (`gaspi_notify`, no data): single-copy's *ready*.
    pub shm_notify_alpha: f64,
    /// One core's copy bandwidth into a peer's segment while the host's working set fits
    /// in the last-level cache.
    pub shm_copy_bw_cache: f64,
    /// The same once the working set spills to memory.
    pub shm_copy_bw_mem: f64,
    /// Latency of a network message from posting to the receiver seeing its notification
    /// (sending thread, kernel, progress thread).
    pub net_alpha: f64,
    /// CPU time the sending rank spends to post a network write (it does not copy).
    pub net_post_overhead: f64,
    /// CPU time the sender's host spends on each network message past the post: the
    /// sending thread's wake-up and its system calls.
    pub net_send_cpu: f64,
    /// CPU time the receiver's host spends on each network message: the progress thread's
    /// wake-up, its reads, the notification and the waiter's wake-up call.
    pub net_recv_cpu: f64,
    /// Bandwidth of one rank's stream to the network, each way (its sending thread out,
    /// its progress thread in).
    pub net_stream_bw: f64,
    /// Bandwidth at which one core copies network bytes into the kernel or out of it, where
    /// this machine's cores do (`net_on_cpu`): each side of a message spends its length at
    /// this rate on a core of its host. Why apart from the stream: a stream also waits on
    /// the kernel's window and wake-ups, and spends the cores of both sides.
    pub net_copy_bw: f64,
    /// The same for the share of the host's working set that fits its last-level cache
    /// (`cache_bytes`): on the VM the kernel copies a 1 MiB exchange over loopback at about
    /// twice the rate per byte of a 64 MiB one, whose bytes come from memory.
    pub net_copy_bw_cache: f64,
    /// A host's link, each way (egress and ingress apart), shared by the host's ranks.
    pub nic_bw: f64,
    /// Network bytes are copied by this machine's own cores (TCP loopback, veth between
    /// namespaces) at `net_copy_bw`, so an oversubscribed host moves them slower.
    pub net_on_cpu: bool,
    /// CPU time to take one notification (wait returns, reset).
    pub recv_overhead: f64,
    /// CPU time of a wait that blocked on an oversubscribed host (where waits do not spin):
    /// the waiter gave its core away and is switched back in.
    pub oversub_wake: f64,
    /// CPU time a network message adds on an oversubscribed host, where the threads that
    /// carry it sleep between messages and are switched in for each.
    pub oversub_net_wake: f64,
    /// Reduction throughput of one core, bytes of result per second, working set in cache.
    pub reduce_bw_cache: f64,
    /// The same from memory.
    pub reduce_bw_mem: f64,
    /// Last-level cache of a host, as much as the allreduce may use of it. With
    /// `llc_by_reuse`, a byte is in it while fewer distinct bytes than this were touched
    /// on the host since the byte was; otherwise the share of the working set (every
    /// segment of the ranks sharing it: vector and staging) that fits runs at the cache
    /// bandwidths, the rest at the memory ones.
    pub cache_bytes: usize,
    /// Memory traffic a host sustains in all (bytes read plus written), shared by every
    /// copy and reduction of its ranks once the working set spills from the cache.
    pub host_mem_bw: f64,
    /// The last-level cache holds, byte by byte, what the host's ranks touched within the
    /// last `cache_bytes` bytes they touched (a least-recently-used cache, `recency.rs`),
    /// instead of the share of the working set that fits. Why: at one size the ring
    /// reduces what a peer just wrote into a few staging slots it reuses, where recursive
    /// doubling stages the whole vector, and a vector is read again only a run later.
    pub llc_by_reuse: bool,
    /// With `llc_by_reuse`, how fast the share of a line's bytes the cache holds falls
    /// once more distinct bytes than `cache_bytes` were touched since: `(cache_bytes /
    /// distance)^llc_falloff` (1: a cache that evicts at random; the larger, the closer
    /// to least-recently-used, which keeps nothing past its size).
    pub llc_falloff: f64,
    /// Private cache of one core (its L2) as another core reads it. Of a segment of `s`
    /// bytes, the share
    /// `min(1, core_cache_bytes / (s * c))` is still in the cache of the core that wrote it
    /// when a rank on the other core copies or reduces it, `c` being the ranks per core
    /// (at least 1: the segments of all ranks that take turns on a core share its cache),
    /// and those bytes move between the cores at `cross_core_bw`; the rest goes through the
    /// last-level cache or memory as above. `0` leaves the tier out. Why it matters: on the
    /// EPYC VM, moving lines from one core's cache to the other's is slower than reading the
    /// shared L3, so a 256 KiB allreduce costs four times as much per byte as a 2 MiB one.
    pub core_cache_bytes: usize,
    /// Bandwidth of a copy or reduction whose bytes come from the other core's private
    /// cache.
    pub cross_core_bw: f64,
    /// On an oversubscribed host, the share (0 to 1) of the lines a rank reads whose core
    /// the scheduler decided rather than their writer: the ranks that take turns on the
    /// cores move between them, so of those lines `1 - 1/cores` are in another core's
    /// cache whoever wrote them. The rest cross as on a host with a core per rank: those
    /// another rank wrote.
    pub oversub_migration: f64,
    /// The last-level cache the runtime finds on a host (in sysfs, all instances its
    /// ranks may use): it decides how single-copy hands out its finished blocks
    /// (`Shape::in_cache`), where `cache_bytes` is the share of it the costs assume.
    pub llc_bytes: usize,
    /// On an oversubscribed host, the share (0 to 1) of the kernel's copies of network
    /// bytes (`net_on_cpu`) that come from memory although the replay finds them in the
    /// cache. Why: over TCP on the VM, the ring on 4 ranks moves its bytes through the
    /// kernel at 1-4 MiB at the rate of 64 MiB (3.9-4.1 GB/s per core), where 2 ranks run
    /// at 5.7-9.3 GB/s at those sizes (3 ranks in between), while the ranks' own segments
    /// fit the cache either way. What takes the cache is not tracked: most likely the
    /// messages that wait in the socket buffers of receivers switched out, memory outside
    /// the ranks' segments.
    pub oversub_net_miss: f64,
    /// Private cache of one core (its L2) as its own core reads and writes it, faster than
    /// the last-level cache: a byte is in it while fewer distinct bytes than this were
    /// touched by the same rank since, and nobody else touched it (`caches.rs`; ranks that
    /// take turns on a core split it). `0` leaves the tier out. Why: on the Xeon VM a core
    /// copies 38 GB/s within its 2 MiB L2 and 13 GB/s from the L3; on the EPYC VM it
    /// copied 44 GB/s from the L3, and its presets leave the tier out.
    pub private_bytes: usize,
    /// One core's copy bandwidth for bytes in its private cache.
    pub private_copy_bw: f64,
    /// One core's reduction throughput (bytes of result) for bytes in its private cache.
    pub private_reduce_bw: f64,
    /// Bytes of socket buffers through which a host's network messages pass in its
    /// last-level cache, where its cores copy them (`net_on_cpu`): each message's bytes
    /// are touched there too, the next message after it. `0` leaves them out.
    pub net_buffer_bytes: usize,
    /// On a host with more ranks than cores, each rank's own work (its copies, reductions,
    /// posts and wake-ups) stays on one core, the ranks dealt to the cores in blocks of
    /// consecutive ranks, where `false` lets any free core take it. The threads that carry
    /// network messages (and the kernel's copies of their bytes) run on whichever core is
    /// free either way. Why: on the Xeon VM, 3 ranks bound to the 2 cores in each of the
    /// three ways run the ring at 16 MiB in 5.8-6.3 ms, and free ranks in 6.3
    /// (docs/sim-placement-34.txt), where ranks whose work any core could take would
    /// finish in 4.6: Linux keeps a rank that waits in short steps (yielding, never idle
    /// long enough for the balancer) on its core, so two ranks take turns on one core for
    /// the whole run.
    pub ranks_keep_cores: bool,
}

use super::cluster::Cluster;
use super::error::SimError;

/// A parameter of [`Machine`] as `Machine::set` takes it.
enum Field<'a> {
    /// Seconds, bytes per second, or a plain number.
    Value(&'a mut f64),
    /// A share, 0 to 1.
    Share(&'a mut f64),
    /// Bytes or a count.
    Count(&'a mut usize),
    /// `0` or `1`.
    Flag(&'a mut bool),
}

impl Machine {
    /// Every parameter [`set`](Self::set) takes, by name, with its value in the unit `set`
    /// takes (`0`/`1` for the flags): what `allreduce-sim --show-params` prints, so that
    /// a fit starts from a preset without copying its values.
    pub fn params(&self) -> Vec<(&'static str, f64)> {
        let mut copy = self.clone();
        copy.fields()
            .into_iter()
            .map(|(name, field)| {
                let value = match field {
                    Field::Value(v) | Field::Share(v) => *v,
                    Field::Count(n) => *n as f64,
                    Field::Flag(b) => f64::from(u8::from(*b)),
                };
                (name, value)
            })
            .collect()
    }

    /// Sets the parameter called `name` (a field name, e.g. `net_alpha`) to `value`, in
    /// the field's unit (seconds, bytes per second, bytes, a count; `0`/`1` for the
    /// flags), so that a machine can be calibrated without rebuilding (`allreduce-sim
    /// --param`). An unknown name or a value that is not a number is an error.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), SimError> {
        let bad = || SimError::BadParameter {
            name: name.to_string(),
            value: value.to_string(),
        };
        let v: f64 = value.trim().parse().map_err(|_| bad())?;
        if !v.is_finite() || v < 0.0 {
            return Err(bad());
        }
        let (_, field) = self
            .fields()
            .into_iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(bad)?;
        match field {
            Field::Value(f) => *f = v,
            Field::Share(f) if v <= 1.0 => *f = v,
            Field::Count(f) => *f = v as usize,
            Field::Flag(f) if v == 0.0 || v == 1.0 => *f = v == 1.0,
            Field::Share(_) | Field::Flag(_) => return Err(bad()),
        }
        Ok(())
    }

    /// Every parameter by name, with its kind: the one list [`params`](Self::params) and
    /// [`set`](Self::set) read.
    fn fields(&mut self) -> Vec<(&'static str, Field<'_>)> {
        use Field::{Count, Flag, Share, Value};
        vec![
            ("cores", Count(&mut self.cores)),
            ("hosts_share_cores", Flag(&mut self.hosts_share_cores)),
            ("shm_alpha", Value(&mut self.shm_alpha)),
            ("shm_notify_alpha", Value(&mut self.shm_notify_alpha)),
            ("shm_copy_bw_cache", Value(&mut self.shm_copy_bw_cache)),
            ("shm_copy_bw_mem", Value(&mut self.shm_copy_bw_mem)),
            ("net_alpha", Value(&mut self.net_alpha)),
            ("net_post_overhead", Value(&mut self.net_post_overhead)),
            ("net_send_cpu", Value(&mut self.net_send_cpu)),
            ("net_recv_cpu", Value(&mut self.net_recv_cpu)),
            ("net_stream_bw", Value(&mut self.net_stream_bw)),
            ("net_copy_bw", Value(&mut self.net_copy_bw)),
            ("net_copy_bw_cache", Value(&mut self.net_copy_bw_cache)),
            ("nic_bw", Value(&mut self.nic_bw)),
            ("net_on_cpu", Flag(&mut self.net_on_cpu)),
            ("recv_overhead", Value(&mut self.recv_overhead)),
            ("oversub_wake", Value(&mut self.oversub_wake)),
            ("oversub_net_wake", Value(&mut self.oversub_net_wake)),
            ("reduce_bw_cache", Value(&mut self.reduce_bw_cache)),
            ("reduce_bw_mem", Value(&mut self.reduce_bw_mem)),
            ("cache_bytes", Count(&mut self.cache_bytes)),
            ("host_mem_bw", Value(&mut self.host_mem_bw)),
            ("llc_by_reuse", Flag(&mut self.llc_by_reuse)),
            ("llc_falloff", Value(&mut self.llc_falloff)),
            ("core_cache_bytes", Count(&mut self.core_cache_bytes)),
            ("cross_core_bw", Value(&mut self.cross_core_bw)),
            ("oversub_migration", Share(&mut self.oversub_migration)),
            ("llc_bytes", Count(&mut self.llc_bytes)),
            ("oversub_net_miss", Share(&mut self.oversub_net_miss)),
            ("private_bytes", Count(&mut self.private_bytes)),
            ("private_copy_bw", Value(&mut self.private_copy_bw)),
            ("private_reduce_bw", Value(&mut self.private_reduce_bw)),
            ("net_buffer_bytes", Count(&mut self.net_buffer_bytes)),
            ("ranks_keep_cores", Flag(&mut self.ranks_keep_cores)),
        ]
    }

    /// Whether the model is usable: positive cores, bandwidths and cache, finite
    /// non-negative latencies.
    pub(crate) fn is_valid(&self) -> bool {
        let bws = [
            self.shm_copy_bw_cache,
            self.shm_copy_bw_mem,
            self.net_stream_bw,
            self.net_copy_bw,
            self.net_copy_bw_cache,
            self.nic_bw,
            self.reduce_bw_cache,
            self.reduce_bw_mem,
            self.host_mem_bw,
            self.cross_core_bw,
            self.private_copy_bw,
            self.private_reduce_bw,
        ];
        let lats = [
            self.shm_alpha,
            self.shm_notify_alpha,
            self.net_alpha,
            self.net_post_overhead,
            self.net_send_cpu,
            self.net_recv_cpu,
            self.recv_overhead,
            self.oversub_wake,
            self.oversub_net_wake,
        ];
        self.cores > 0
            && (0.0..=1.0).contains(&self.oversub_migration)
            && (0.0..=1.0).contains(&self.oversub_net_miss)
            && self.llc_falloff.is_finite()
            && self.llc_falloff >= 0.0
            && bws.iter().all(|b| b.is_finite() && *b > 0.0)
            && lats.iter().all(|l| l.is_finite() && *l >= 0.0)
    }
}

/// Where the ranks of a cluster run on this machine: which of them share cores, memory and
/// a last-level cache (a pool: a host, or the one machine that hosts share).
impl Machine {
    /// The pools of `cluster`.
    pub(crate) fn pools(&self, cluster: &Cluster) -> usize {
        if self.hosts_share_cores {
            1
        } else {
            cluster.hosts()
        }
    }

    /// The pool of rank `r`.
    pub(crate) fn pool_of(&self, cluster: &Cluster, r: usize) -> usize {
        if self.hosts_share_cores {
            0
        } else {
            cluster.host_of(r)
        }
    }

    /// The ranks that share one pool's cores (the most any pool has).
    pub(crate) fn ranks_on_cores(&self, cluster: &Cluster) -> usize {
        if self.hosts_share_cores {
            cluster.ranks
        } else {
            cluster.per_host.max(1).min(cluster.ranks)
        }
    }

    /// The core each rank's own work runs on (`ranks_keep_cores`), by rank: `None` where
    /// any free core of its pool takes it (that pool has a core for each of its ranks, or
    /// the machine lets work move). A pool's ranks, in rank order, are dealt to its cores
    /// in blocks.
    pub(crate) fn home_cores(&self, cluster: &Cluster) -> Vec<Option<usize>> {
        let mut homes = vec![None; cluster.ranks];
        if !self.ranks_keep_cores {
            return homes;
        }
        let mut members = vec![Vec::new(); self.pools(cluster)];
        for r in 0..cluster.ranks {
            members[self.pool_of(cluster, r)].push(r);
        }
        for pool in members.iter().filter(|m| m.len() > self.cores) {
            for (i, &r) in pool.iter().enumerate() {
                homes[r] = Some(i * self.cores / pool.len());
            }
        }
        homes
    }

    /// Ranks per core of a pool, at least 1: ranks that take turns on a core share its
    /// private cache.
    pub(crate) fn ranks_per_core(&self, cluster: &Cluster) -> f64 {
        (self.ranks_on_cores(cluster) as f64 / self.cores.max(1) as f64).max(1.0)
    }
}
