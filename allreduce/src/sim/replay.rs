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

use super::caches::Caches;
use super::cluster::Cluster;
use super::cores::Cores;
use super::costs::{Costs, Work};
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
    let buckets = machine.pools(cluster);
    let mut memory = vec![0.0f64; buckets];
    let mut cores = Cores::new(buckets, machine.cores);
    let pool = |r: usize| machine.pool_of(cluster, r);
    // Where a rank's own work runs; the threads that carry its messages take any core.
    let homes = machine.home_cores(cluster);
    for (r, home) in homes.iter().enumerate() {
        if let Some(core) = *home {
            cores.home(pool(r), core);
        }
    }
    let mut nic_out = vec![0.0f64; cluster.hosts()];
    let mut nic_in = vec![0.0f64; cluster.hosts()];
    let mut ends = vec![vec![0.0f64; n]; runs];
    // Who wrote what last matters only where lines cross between private caches.
    let mut lines = LastWriters::new(n, costs.hot > 0.0);
    let mut caches = Caches::new(machine, cluster, program, costs.spill());
    let tracking = caches.tracks();
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
            // CPU work on the rank's cores, and the bytes it draws on the host's memory
            // through its bucket; returns when the work ends. Where the working set decides
            // what the cache holds, all work waits behind the bucket once the working set
            // spills, even work that draws nothing on it (a bare notification): the model
            // the choice table was derived on, kept as it was. Where each byte's recency
            // decides, only work that draws on memory waits for it.
            let work = |cpu: f64, drawn: f64, memory: &mut [f64], cores: &mut Cores| -> f64 {
                let end = cores.run_on(pool(r), homes[r], now, cpu);
                if drawn == 0.0 && (tracking || !costs.spills()) {
                    return end;
                }
                let b = pool(r);
                memory[b] = memory[b].max(now) + drawn / machine.host_mem_bw;
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
                        let alpha = if len == 0 {
                            machine.shm_notify_alpha
                        } else {
                            machine.shm_alpha
                        };
                        let f = lines.foreign_share(r, &[(r, src)], bytes);
                        let from = caches.find(r, r, src, bytes);
                        let into = caches.find(r, to, dst, bytes);
                        let (local, drawn) = costs.streams(Work::Copy, &[(1.0, from), (1.0, into)]);
                        caches.touch(r, &[(r, src), (to, dst)], bytes);
                        let end = work(
                            alpha + len as f64 * costs.per_byte(local, f),
                            len as f64 * drawn,
                            &mut memory,
                            &mut cores,
                        );
                        (end, end, end)
                    } else {
                        let posted =
                            cores.run_on(pool(r), homes[r], now, machine.net_post_overhead);
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
                                let side = |found| {
                                    len as f64 * costs.streams(Work::NetCopy, &[(1.0, found)]).0
                                };
                                let out_of = side(caches.find(r, r, src, bytes));
                                let into = side(caches.find(to, to, dst, bytes));
                                end = end.max(cores.run(pool(r), out, out_of));
                                end = end.max(cores.run(pool(to), out, into));
                            }
                            caches.touch(r, &[(r, src)], bytes);
                            caches.touch(to, &[(to, dst)], bytes);
                            caches.pass_through_kernel(r, bytes);
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
                    me.now = cores.run_on(pool(r), homes[r], ready, machine.recv_overhead + wake);
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
                    let (owner, folded) = match op {
                        Op::ReadPeer { from, folded, .. } => (from as usize, folded),
                        _ => (r, false),
                    };
                    // Both operands read, the result written. Into a chunk still in cache,
                    // the peer's operand alone: the schedules fold cache-sized chunks
                    // (256 KiB by default); one larger than the cache is not still there.
                    // Where recency is tracked, the destination's says so itself.
                    let (local, drawn) = if folded && !tracking && len <= machine.cache_bytes {
                        costs.folded()
                    } else {
                        let operand = caches.find(r, owner, src, bytes);
                        let result = caches.find(r, r, dst, bytes);
                        costs.streams(Work::Reduce, &[(1.0, operand), (2.0, result)])
                    };
                    caches.touch(r, &[(owner, src), (r, dst)], bytes);
                    let f = lines.foreign_share(r, &[(owner, src), (r, dst)], bytes);
                    let cpu = len as f64 * costs.per_byte(local, f);
                    ranks[r].now = work(cpu, len as f64 * drawn, &mut memory, &mut cores);
                    lines.wrote(r, dst, bytes, r);
                }
                Op::ReadPeer {
                    from,
                    len: bytes,
                    src,
                    dst,
                    ..
                } => {
                    let (len, from) = (bytes as usize, from as usize);
                    let peer = caches.find(r, from, src, bytes);
                    let into = caches.find(r, r, dst, bytes);
                    let (local, drawn) = costs.streams(Work::Copy, &[(1.0, peer), (1.0, into)]);
                    caches.touch(r, &[(from, src), (r, dst)], bytes);
                    let f = lines.foreign_share(r, &[(from, src)], bytes);
                    let cpu = len as f64 * costs.per_byte(local, f);
                    ranks[r].now = work(cpu, len as f64 * drawn, &mut memory, &mut cores);
                    lines.wrote(r, dst, bytes, r);
                }
                Op::Divide { len: bytes, off } => {
                    let len = bytes as usize;
                    let m = caches.find(r, r, off, bytes);
                    let (local, drawn) = costs.streams(Work::Reduce, &[(2.0, m)]);
                    caches.touch(r, &[(r, off)], bytes);
                    let f = lines.foreign_share(r, &[(r, off)], bytes);
                    let cpu = len as f64 * costs.per_byte(local, f);
                    ranks[r].now = work(cpu, len as f64 * drawn, &mut memory, &mut cores);
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
