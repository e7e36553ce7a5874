//! The model of the machine a simulated allreduce runs on: what a byte and a message cost
//! inside a host (shared memory), between hosts (the network) and in a reduction, and how
//! hosts share their cores and links. Named presets carry the values calibrated on the
//! 2-core VMs the project is developed on: an AMD EPYC's until session 30 (`shm`, `tcp`,
//! `netns-2gbit`), an Intel Xeon's since (`xeon-shm`, `xeon-tcp`); the "Simulator" section
//! of `docs/allreduce.md` gives the measurements behind each number.

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
}

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

/// GB/s as bytes per second.
const GB: f64 = 1e9;
/// Microseconds as seconds.
const US: f64 = 1e-6;

/// The presets [`Machine::preset`] knows, for `--help` texts and errors.
pub const PRESETS: &[&str] = &[
    "shm",
    "tcp",
    "xeon-shm",
    "xeon-tcp",
    "netns-2gbit",
    "cluster-10gbit",
];

impl Machine {
    /// The AMD EPYC VM's shared-memory transport (family 25, model 17; 1 MiB L2 per
    /// core, 32 MiB L3; sessions 12-30): one host of 2 cores (calibrated from
    /// `allreduce-sweep` runs of every algorithm at 2, 3 and 4 ranks; see
    /// `docs/allreduce.md`, "Simulator").
    pub fn shm() -> Machine {
        // Refitted in session 30 on every point (the 4-rank ones too) of session 25's and
        // 26's runs (docs/sim-validation-25.txt and -26.txt, 15 rounds each, single-copy
        // pushing its finished blocks), with benches/sim/fit.py (`--all --objective bar
        // --restarts 3`: a coordinate search on the mean |log error| with the excess past
        // 21% weighed five times, restarted from random perturbations; of the restarts with
        // the lowest cost, the one with the most points within 25%), then rounded; and
        // checked on the six runs it was not fitted to (docs/sim-validation-20.txt, -20b,
        // -21, -22, -24, which measured single-copy pulling: replay them with
        // `--param llc_bytes=0`; and -29).
        // - The last-level cache holds a byte by how many distinct bytes were touched since
        //   (sim/recency.rs): all within about 11 MB, past it a share falling with the
        //   distance to the power 1.1, so some of a loop over 2-3 times the cache stays.
        // - Lines another core has just written move to the reader's core at
        //   `cross_core_bw` while the segments of the ranks on that core fit its private
        //   cache; lines the reader's core wrote itself do not cross (sim/lines.rs), except
        //   as the scheduler moves ranks that take turns (`oversub_migration`).
        // - The kernel copies network bytes twice as fast from the cache as from memory,
        //   but on an oversubscribed host 38% of them come from memory regardless
        //   (`oversub_net_miss`).
        // - `host_mem_bw` does not bind: the two cores' own rates from memory (a copy at
        //   7.2 GB/s, a reduction at 8.4) draw less than it, so the fit leaves it where it
        //   lands.
        Machine {
            name: "shm".into(),
            cores: 2,
            hosts_share_cores: true,
            shm_alpha: 0.13 * US,
            shm_copy_bw_cache: 55.9 * GB,
            shm_copy_bw_mem: 7.24 * GB,
            net_alpha: 0.02 * US,
            net_post_overhead: 1.43 * US,
            net_send_cpu: 1.83 * US,
            net_recv_cpu: 3.06 * US,
            net_stream_bw: 10.0 * GB,
            net_copy_bw: 3.67 * GB,
            net_copy_bw_cache: 7.76 * GB,
            nic_bw: 1e3 * GB,
            net_on_cpu: true,
            recv_overhead: 0.19 * US,
            oversub_wake: 1.97 * US,
            oversub_net_wake: 1.61 * US,
            reduce_bw_cache: 36.5 * GB,
            reduce_bw_mem: 8.44 * GB,
            cache_bytes: 10_810_000,
            host_mem_bw: 151.0 * GB,
            llc_by_reuse: true,
            llc_falloff: 1.09,
            core_cache_bytes: 575 << 10,
            cross_core_bw: 8.67 * GB,
            oversub_migration: 0.13,
            llc_bytes: 32 << 20,
            oversub_net_miss: 0.38,
            private_bytes: 0,
            private_copy_bw: 55.9 * GB,
            private_reduce_bw: 36.5 * GB,
        }
    }

    /// The EPYC VM with every rank talking TCP over loopback (`--transport tcp`): the
    /// shared-memory values of [`Machine::shm`] for the reductions, the network's measured
    /// there.
    pub fn tcp() -> Machine {
        Machine {
            name: "tcp".into(),
            ..Machine::shm()
        }
    }

    /// The 2-core Intel Xeon VM (family 6, model 207: Emerald Rapids; 2 MiB L2 per core,
    /// a 300 MiB L3 as sysfs reports it) the project moved to in session 31, over shared
    /// memory: the model of [`Machine::shm`] with its values fitted there, and a private
    /// tier for each core's L2 (`docs/allreduce.md`, "Simulator", sessions 31 and 32).
    pub fn xeon_shm() -> Machine {
        // Fitted by benches/sim/fit.py (`--all --objective bar`) on every point of session
        // 31's first run on the VM (docs/sim-validation-32.txt), then rounded to three
        // digits; checked on the two runs measured after it (docs/sim-validation-33.txt
        // and -34.txt). Session 32's fits started from one core's rates measured by size
        // (an L2 copy at 38 GB/s, the L3's at 13 GB/s and a reduction at 12.5) and went on
        // from their optimum with restarts (`--restarts 2`), twice: once the private tier
        // was added, and again once its distance counted from each touch's beginning.
        // - The private tier comes out at 1.92 MB, the VM's 2 MiB L2 less what else lives
        //   there; in it a copy runs at 23 GB/s, where a core's plain memcpy reaches 38.
        // - From the L3 a copy runs at 12.4 GB/s, what `vm-speed` and the probe measure.
        // - The tier for lines another core wrote stays small (68 kB at 5.6 GB/s).
        // - A 300 MiB L3 in sysfs: the runtime pushes single-copy's finished blocks at
        //   every size measured, so the replay does. The cache the costs assume is 66 MB.
        Machine {
            name: "xeon-shm".into(),
            shm_alpha: 0.629 * US,
            shm_copy_bw_cache: 12.4 * GB,
            shm_copy_bw_mem: 3.59 * GB,
            net_alpha: 0.00588 * US,
            net_post_overhead: 1.43 * US,
            net_send_cpu: 1.29 * US,
            net_recv_cpu: 2.92 * US,
            net_stream_bw: 6.59 * GB,
            net_copy_bw: 3.70 * GB,
            net_copy_bw_cache: 5.83 * GB,
            recv_overhead: 0.408 * US,
            oversub_wake: 0.907 * US,
            oversub_net_wake: 0.0131 * US,
            reduce_bw_cache: 9.83 * GB,
            reduce_bw_mem: 7.04 * GB,
            cache_bytes: 66_250_000,
            host_mem_bw: 897.0 * GB,
            llc_falloff: 1.12,
            core_cache_bytes: 68_170,
            cross_core_bw: 5.62 * GB,
            oversub_migration: 0.0473,
            llc_bytes: 300 << 20,
            oversub_net_miss: 0.263,
            private_bytes: 1_918_000,
            private_copy_bw: 23.4 * GB,
            private_reduce_bw: 25.3 * GB,
            ..Machine::shm()
        }
    }

    /// [`Machine::xeon_shm`] with every rank talking TCP over loopback.
    pub fn xeon_tcp() -> Machine {
        Machine {
            name: "xeon-tcp".into(),
            ..Machine::xeon_shm()
        }
    }

    /// Two network namespaces on the EPYC VM joined by a veth pair that `tc tbf` limits to
    /// 2 Gbit/s each way (`benches/netns/run.sh`): shared memory inside a namespace, TCP
    /// over the limited link between them, all ranks on the VM's 2 cores.
    pub fn netns_2gbit() -> Machine {
        Machine {
            name: "netns-2gbit".into(),
            nic_bw: 0.25 * GB,
            ..Machine::tcp()
        }
    }

    /// The machine of the automatic-choice table: hosts of 8 cores joined by a 10 Gbit/s
    /// link per host (a NIC of its own, not copied by the host's cores) with 10 µs latency
    /// on the wire and in the stacks. Per core it has the shared-memory, reduction and
    /// per-message CPU costs of the EPYC VM as calibrated in session 12, without the private-cache
    /// tier.
    ///
    /// Why frozen rather than taken from [`Machine::shm`]: the choice table and the rules
    /// of `Options::pick` were derived on these values, and the VM's speed moves by more
    /// than the model's error between sessions (1.5x from session 13 to 20), which says
    /// nothing about a cluster's hosts.
    pub fn cluster_10gbit() -> Machine {
        Machine {
            name: "cluster-10gbit".into(),
            cores: 8,
            hosts_share_cores: false,
            shm_alpha: 0.54 * US,
            shm_copy_bw_cache: 23.0 * GB,
            shm_copy_bw_mem: 6.6 * GB,
            net_alpha: 10.0 * US,
            net_post_overhead: 2.8 * US,
            net_send_cpu: 3.0 * US,
            net_recv_cpu: 2.8 * US,
            net_stream_bw: 2.5 * GB,
            net_copy_bw: 2.84 * GB,
            net_copy_bw_cache: 2.84 * GB,
            nic_bw: 1.25 * GB,
            net_on_cpu: false,
            recv_overhead: 0.26 * US,
            oversub_wake: 2.6 * US,
            oversub_net_wake: 4.5 * US,
            reduce_bw_cache: 14.7 * GB,
            reduce_bw_mem: 8.7 * GB,
            cache_bytes: 17 << 20,
            host_mem_bw: 35.4 * GB,
            // The share of the working set that fits, as the choice table was derived on.
            llc_by_reuse: false,
            llc_falloff: 1.0,
            core_cache_bytes: 0,
            cross_core_bw: 23.0 * GB,
            // No private-cache tier: where a line is does not matter.
            oversub_migration: 0.0,
            // One 32 MiB L3 shared by the host's 8 cores.
            llc_bytes: 32 << 20,
            // Its network bytes are not copied by its cores.
            oversub_net_miss: 0.0,
            private_bytes: 0,
            private_copy_bw: 23.0 * GB,
            private_reduce_bw: 14.7 * GB,
        }
    }

    /// The preset called `name` (one of [`PRESETS`]).
    pub fn preset(name: &str) -> Option<Machine> {
        match name {
            "shm" => Some(Machine::shm()),
            "tcp" => Some(Machine::tcp()),
            "xeon-shm" => Some(Machine::xeon_shm()),
            "xeon-tcp" => Some(Machine::xeon_tcp()),
            "netns-2gbit" => Some(Machine::netns_2gbit()),
            "cluster-10gbit" => Some(Machine::cluster_10gbit()),
            _ => None,
        }
    }

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
