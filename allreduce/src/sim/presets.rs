//! The named machines: the values calibrated on the 2-core VMs the project is developed
//! on, an AMD EPYC's until session 30 (`shm`, `tcp`, `netns-2gbit`) and an Intel Xeon's
//! since (`xeon-shm`, `xeon-tcp`), and the frozen cluster of the automatic choice
//! (`cluster-10gbit`). The "Simulator" section of `docs/allreduce.md` gives the
//! measurements behind each number.

use super::machine::Machine;

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
            // Fitted before bare notifications cost their own: as a write.
            shm_notify_alpha: 0.13 * US,
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
            net_buffer_bytes: 0,
            ranks_keep_cores: false,
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
        // was added, and again once its distance counted from each touch's beginning; then
        // once more with `shm_notify_alpha` free (started at 0.3 µs; restarted twice from
        // the result, which found it again). Session 33's fit started from those values
        // with a 140 MB cache and falloff 3 (where single-copy's two 64 MiB vectors stay in
        // the L3, as measured) and kept what it found without restarts: restarts lowered
        // the cost on run 32 further (0.102 against 0.104) but lost 5 points on run 33.
        // Session 34's started from those with each rank's work held to its core
        // (`ranks_keep_cores`: 3 ranks on the 2 cores take turns two on one, as measured)
        // and kept what it found (cost 0.087), but for the socket buffers, left at 64 MiB.
        // Session 35's started from those once the validation replayed each point as the
        // sweep's timed batch that measured it (`predict_batch`: from 16 MiB up 5 runs from
        // a common start, not the steady state) and kept what it found (cost 0.084).
        // - The private tier comes out at 1.91 MB, near the VM's 2 MiB L2; in it a copy
        //   runs at 28.6 GB/s, where a core's plain memcpy reaches 38.
        // - From the L3 a copy runs at 12.1 GB/s, near what `vm-speed` and the probe
        //   measure (12.5-13.5).
        // - The tier for lines another core wrote stays small (73 kB at 5.6 GB/s).
        // - A bare notification costs 0.24 µs, a write 0.57 µs besides its bytes, against
        //   a cache line's trip between the cores of 0.077 µs (`vm-speed`): a write's call,
        //   copy and notification.
        // - A 300 MiB L3 in sysfs: the runtime pushes single-copy's finished blocks at
        //   every size measured, so the replay does. The cache the costs assume holds all
        //   of a byte touched within the last 90.7 MB and `(90.7 MB / distance)^2.02` past
        //   it: 45% of a loop over 128 MiB (single-copy's two 64 MiB vectors on 2 ranks)
        //   and 11% of one over 256 MiB (rd's, with its staging).
        // - TCP messages pass through 64 MiB of socket buffers in that cache: the kernel
        //   autotunes each connection's up to 32 MiB to receive and 4 MiB to send here
        //   (`tcp_rmem`, `tcp_wmem`). From 32 MiB up the points within 25% are the same;
        //   without them rd and Rabenseifner on 3 ranks at 16 MiB over TCP were 21-29% fast,
        //   their vectors and staging (96-144 MiB) held as if nothing else passed there.
        Machine {
            name: "xeon-shm".into(),
            shm_alpha: 0.573 * US,
            shm_notify_alpha: 0.243 * US,
            shm_copy_bw_cache: 12.1 * GB,
            shm_copy_bw_mem: 3.63 * GB,
            net_alpha: 0.0123 * US,
            net_post_overhead: 1.50 * US,
            net_send_cpu: 1.29 * US,
            net_recv_cpu: 2.40 * US,
            net_stream_bw: 7.04 * GB,
            net_copy_bw: 3.94 * GB,
            net_copy_bw_cache: 6.68 * GB,
            recv_overhead: 0.437 * US,
            oversub_wake: 0.676 * US,
            oversub_net_wake: 0.0131 * US,
            reduce_bw_cache: 9.83 * GB,
            reduce_bw_mem: 7.04 * GB,
            cache_bytes: 90_700_000,
            host_mem_bw: 897.0 * GB,
            llc_falloff: 2.02,
            core_cache_bytes: 73_000,
            cross_core_bw: 5.59 * GB,
            oversub_migration: 0.0818,
            llc_bytes: 300 << 20,
            oversub_net_miss: 0.245,
            private_bytes: 1_910_000,
            private_copy_bw: 28.6 * GB,
            private_reduce_bw: 25.3 * GB,
            net_buffer_bytes: 64 << 20,
            ranks_keep_cores: true,
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
            shm_notify_alpha: 0.54 * US,
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
            net_buffer_bytes: 0,
            ranks_keep_cores: false,
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
}
