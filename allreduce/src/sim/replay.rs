//! The discrete-event replay: every rank executes its own schedule action by action on the
//! [`Machine`] model, in global time order, so that ranks contend for the resources they
//! share (a host's link, its memory, the cores of an oversubscribed host) in the order the
//! real ranks would reach them.
//!
//! Resources are token buckets with a next-free time: a transfer of `b` bytes over a
//! resource of bandwidth `B` occupies it for `b/B` from `max(now, next_free)`, and a
//! transfer crossing several resources (the sender's stream, its host's egress, the
//! receiver's host's ingress, the receiver's stream) ends when the last of them is done.
//! Why buckets and not a fluid-flow network: they keep each event O(1), so 1024 ranks'
//! rings replay in seconds, and on the pipelined schedules here (many equal chunks) they
//! give the same throughput as sharing a link fairly.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::cluster::Cluster;
use super::cores::Cores;
use super::error::SimError;
use super::lines::LastWriters;
use super::machine::Machine;
use super::program::{Op, Program};

/// A simulated time, ordered totally (times are finite by construction).
#[derive(Clone, Copy, Debug, PartialEq)]
struct At(f64);

impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for At {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Where one rank stands.
#[derive(Clone, Debug, Default)]
struct Rank {
    /// When it can perform its next action.
    now: f64,
    /// Run in progress.
    run: usize,
    /// Next action of the run.
    pc: usize,
    /// Notification it waits for, if blocked.
    waiting: Option<u32>,
    /// It blocked on the notification it now takes (it was queued again at its arrival).
    slept: bool,
    /// When every send posted so far is complete locally.
    sent_by: f64,
    /// Notifications arrived and not yet taken: arrival time by (dense) id, NaN if none.
    arrived: Vec<f64>,
    /// Token buckets of its network stream, out and in.
    stream_out: f64,
    stream_in: f64,
}

/// The per-rank costs of the machine for this cluster and vector, fixed for a replay.
struct Costs {
    /// More ranks than cores share the cores: a rank that blocks gives its core away and
    /// spends `oversub_wake` to be switched back in.
    oversubscribed: bool,
    /// Seconds per byte of a copy and of a reduction whose operands its own core wrote last,
    /// from the last-level cache or memory.
    copy: f64,
    reduce: f64,
    /// Seconds per byte of a reduction into a chunk still in cache (`Op::ReadPeer`'s
    /// `folded`): only the peer's operand streams from memory.
    reduce_folded: f64,
    /// Share of what another rank wrote last that is still in its core's private cache
    /// (`Machine::core_cache_bytes`), and seconds per byte of moving it between the cores.
    hot: f64,
    cross: f64,
    /// On an oversubscribed host, the share of a read's lines whose core the scheduler
    /// decided (`Machine::oversub_migration`), and the share of those in another core's
    /// cache.
    migrated: f64,
    elsewhere: f64,
    stream: f64,
    /// Seconds per byte of one side's kernel copy of a network message.
    net_copy: f64,
    /// Share of the working set outside the cache: that share of every copy's and
    /// reduction's traffic draws on the host's memory bandwidth.
    spill: f64,
}

impl Costs {
    fn new(m: &Machine, c: &Cluster, segment_bytes: usize) -> Costs {
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
        let blend = |cache: f64, mem: f64| fits / cache + (1.0 - fits) / mem;
        Costs {
            oversubscribed: on_cores > m.cores,
            copy: blend(m.shm_copy_bw_cache, m.shm_copy_bw_mem),
            reduce: blend(m.reduce_bw_cache, m.reduce_bw_mem),
            // A third of the traffic (one operand, not two and the result) from memory.
            reduce_folded: blend(
                m.reduce_bw_cache,
                (3.0 * m.reduce_bw_mem).min(m.reduce_bw_cache),
            ),
            hot,
            cross: 1.0 / m.cross_core_bw,
            migrated: if on_cores > m.cores {
                m.oversub_migration
            } else {
                0.0
            },
            elsewhere: 1.0 - 1.0 / m.cores.max(1) as f64,
            stream: 1.0 / m.net_stream_bw,
            net_copy: fits / m.net_copy_bw_cache + (1.0 - fits) / m.net_copy_bw,
            spill: 1.0 - fits,
        }
    }

    /// Seconds per byte of work costing `local` per byte, a share `foreign` of whose bytes
    /// (at most 1) another rank wrote last: of those, the share still in that rank's core's
    /// cache crosses between the cores.
    fn per_byte(&self, local: f64, foreign: f64) -> f64 {
        let foreign = (1.0 - self.migrated) * foreign.min(1.0) + self.migrated * self.elsewhere;
        let crossing = self.hot * foreign;
        crossing * self.cross + (1.0 - crossing) * local
    }
}

/// Time at which each rank finished each run (`ends[run][rank]`).
pub(crate) struct Timeline {
    /// Per run, per rank.
    pub ends: Vec<Vec<f64>>,
}

/// The replay of `runs` back-to-back runs of `program` on `machine` and `cluster`.
pub(crate) fn replay(
    program: &mut Program,
    machine: &Machine,
    cluster: &Cluster,
    runs: usize,
) -> Result<Timeline, SimError> {
    let n = cluster.ranks;
    let costs = Costs::new(machine, cluster, program.segment_bytes);
    let ids = program.densify();
    let mut ranks: Vec<Rank> = ids
        .iter()
        .map(|&k| Rank {
            arrived: vec![f64::NAN; k],
            ..Rank::default()
        })
        .collect();
    let buckets = if machine.hosts_share_cores {
        1
    } else {
        cluster.hosts()
    };
    let mut memory = vec![0.0f64; buckets];
    let mut cores = Cores::new(buckets, machine.cores);
    let pool = |r: usize| {
        if machine.hosts_share_cores {
            0
        } else {
            cluster.host_of(r)
        }
    };
    let mut nic_out = vec![0.0f64; cluster.hosts()];
    let mut nic_in = vec![0.0f64; cluster.hosts()];
    let mut ends = vec![vec![0.0f64; n]; runs];
    // Who wrote what last matters only where lines cross between private caches.
    let mut lines = LastWriters::new(n, costs.hot > 0.0);
    let mut heap: BinaryHeap<Reverse<(At, usize)>> =
        (0..n).map(|r| Reverse((At(0.0), r))).collect();
    let mut last = 0.0f64;
    let mut finished = 0;

    while let Some(Reverse((At(t), r))) = heap.pop() {
        last = last.max(t);
        cores.advance(t);
        ranks[r].now = ranks[r].now.max(t);
        loop {
            let me = &ranks[r];
            let schedules = &program.ranks[r];
            let ops = &schedules[me.run % schedules.len()];
            let Some(&op) = ops.get(me.pc) else {
                // End of a run: the next starts at once, as the sweep's batch loop does.
                let me = &mut ranks[r];
                ends[me.run][r] = me.now;
                me.run += 1;
                me.pc = 0;
                if me.run == runs {
                    finished += 1;
                    break;
                }
                continue;
            };
            let now = ranks[r].now;
            // CPU work on the rank's cores, and its memory traffic through the host's
            // bucket when the working set spills; returns when the work ends.
            let work = |cpu: f64, traffic: usize, memory: &mut [f64], cores: &mut Cores| -> f64 {
                let end = cores.run(pool(r), now, cpu);
                if costs.spill == 0.0 {
                    return end;
                }
                let b = pool(r);
                memory[b] = memory[b].max(now) + traffic as f64 * costs.spill / machine.host_mem_bw;
                end.max(memory[b])
            };
            match op {
                Op::Send {
                    to,
                    len: bytes,
                    notif,
                    src,
                    dst,
                } => {
                    let (to, len) = (to as usize, bytes as usize);
                    // When the send is complete locally, when it arrives, and when the
                    // sender can go on.
                    let (done, arrive, free) = if cluster.shm_between(r, to) {
                        // One synchronous memcpy by the sender, then the notification.
                        let f = lines.foreign_share(r, &[(r, src)], bytes);
                        let end = work(
                            machine.shm_alpha + len as f64 * costs.per_byte(costs.copy, f),
                            2 * len,
                            &mut memory,
                            &mut cores,
                        );
                        (end, end, end)
                    } else {
                        let posted = cores.run(pool(r), now, machine.net_post_overhead);
                        // On an oversubscribed host the threads that carry a message sleep
                        // between messages, and each is switched in for it.
                        let wake = if costs.oversubscribed {
                            machine.oversub_net_wake
                        } else {
                            0.0
                        };
                        // The sending thread takes the message on.
                        let out = cores.run(pool(r), posted, machine.net_send_cpu);
                        let mut end = out;
                        if len > 0 {
                            let (hs, hd) = (cluster.host_of(r), cluster.host_of(to));
                            let stream = len as f64 * costs.stream;
                            let link = len as f64 / machine.nic_bw;
                            let mut take = |free: &mut f64, d: f64| {
                                *free = free.max(out) + d;
                                end = end.max(*free);
                            };
                            take(&mut ranks[r].stream_out, stream);
                            // Between hosts the bytes also cross the sender's host's link
                            // out and the receiver's host's link in.
                            if hs != hd {
                                take(&mut nic_out[hs], link);
                                take(&mut nic_in[hd], link);
                            }
                            take(&mut ranks[to].stream_in, stream);
                            if machine.net_on_cpu {
                                // Loopback and veth bytes are copied by this machine's
                                // cores, once into the kernel and once out of it.
                                let copy = len as f64 * costs.net_copy;
                                end = end.max(cores.run(pool(r), out, copy));
                                end = end.max(cores.run(pool(to), out, copy));
                            }
                        }
                        // The receiver's progress thread takes it in once it is there.
                        let taken = cores.run(
                            pool(to),
                            end + machine.net_alpha,
                            machine.net_recv_cpu + wake,
                        );
                        (end, taken, posted)
                    };
                    // Over the network too the sender is recorded: the receiver's progress
                    // thread, not the receiving rank, copies the bytes in, on whichever
                    // core is free. (Recording the receiver instead moved each run's count
                    // within 25% by -1 to +3 of 168, without a refit: within the noise.)
                    lines.wrote(to, dst, bytes, r);
                    let me = &mut ranks[r];
                    me.sent_by = me.sent_by.max(done);
                    me.now = free;
                    let peer = &mut ranks[to];
                    let slot = &mut peer.arrived[notif as usize];
                    if !slot.is_nan() {
                        return Err(SimError::Overrun { rank: to, notif });
                    }
                    *slot = arrive;
                    if peer.waiting == Some(notif) {
                        peer.waiting = None;
                        heap.push(Reverse((At(peer.now.max(arrive)), to)));
                    }
                }
                Op::Recv { notif } => {
                    let me = &mut ranks[r];
                    let at = std::mem::replace(&mut me.arrived[notif as usize], f64::NAN);
                    if at.is_nan() {
                        me.waiting = Some(notif);
                        me.slept = true;
                        break;
                    }
                    // A rank that found its notification waiting never slept; one that
                    // slept (it blocked, or the notification is still on its way) on an
                    // oversubscribed host is switched back in.
                    let slept = std::mem::take(&mut me.slept) || at > me.now;
                    let wake = if slept && costs.oversubscribed {
                        machine.oversub_wake
                    } else {
                        0.0
                    };
                    let ready = me.now.max(at);
                    me.now = cores.run(pool(r), ready, machine.recv_overhead + wake);
                }
                Op::Reduce {
                    len: bytes,
                    src,
                    dst,
                }
                | Op::ReadPeer {
                    len: bytes,
                    reduce: true,
                    src,
                    dst,
                    ..
                } => {
                    let len = bytes as usize;
                    // Both operands read, the result written; into a chunk still in cache,
                    // the peer's operand alone. The schedules fold cache-sized chunks
                    // (256 KiB by default); one larger than the cache is not still there.
                    let (local, traffic, owner) = match op {
                        Op::ReadPeer {
                            folded: true, from, ..
                        } if len <= machine.cache_bytes => (costs.reduce_folded, len, from),
                        Op::ReadPeer { from, .. } => (costs.reduce, 3 * len, from),
                        _ => (costs.reduce, 3 * len, r as u32),
                    };
                    let f = lines.foreign_share(r, &[(owner as usize, src), (r, dst)], bytes);
                    let cpu = len as f64 * costs.per_byte(local, f);
                    ranks[r].now = work(cpu, traffic, &mut memory, &mut cores);
                    lines.wrote(r, dst, bytes, r);
                }
                Op::ReadPeer {
                    from,
                    len: bytes,
                    src,
                    dst,
                    ..
                } => {
                    let len = bytes as usize;
                    let f = lines.foreign_share(r, &[(from as usize, src)], bytes);
                    let cpu = len as f64 * costs.per_byte(costs.copy, f);
                    ranks[r].now = work(cpu, 2 * len, &mut memory, &mut cores);
                    lines.wrote(r, dst, bytes, r);
                }
                Op::Divide { len: bytes, off } => {
                    let len = bytes as usize;
                    let f = lines.foreign_share(r, &[(r, off)], bytes);
                    let cpu = len as f64 * costs.per_byte(costs.reduce, f);
                    ranks[r].now = work(cpu, 2 * len, &mut memory, &mut cores);
                    lines.wrote(r, off, bytes, r);
                }
                Op::Flush => {
                    let me = &mut ranks[r];
                    me.now = me.now.max(me.sent_by);
                }
            }
            ranks[r].pc += 1;
            // Go on with this rank while it is still the earliest; otherwise queue it so
            // that resources are taken in time order.
            if let Some(Reverse((At(next), _))) = heap.peek() {
                if *next < ranks[r].now {
                    heap.push(Reverse((At(ranks[r].now), r)));
                    break;
                }
            }
        }
    }
    if finished < n {
        let blocked: Vec<usize> = (0..n).filter(|&r| ranks[r].run < runs).collect();
        let rank = blocked[0];
        return Err(SimError::Deadlock {
            at_s: last,
            blocked: blocked.len(),
            rank,
            notif: ranks[rank].waiting.unwrap_or(u32::MAX),
        });
    }
    Ok(Timeline { ends })
}
