//! Hierarchical allreduce: reduce-scatter inside each host, an allreduce of each shard
//! between the hosts, allgather inside each host.

use super::action::{Action, Schedule};
use super::embed::Embedding;
use super::shape::{align, chunks, local_only, Shape};

/// Hierarchical allreduce over a group laid out on hosts: `hosts[h]` lists the member
/// indices (as [`Shape::me`]) on host `h`, the lists partitioning `0..sh.ranks`. `inter`
/// builds the flat allreduce run between hosts for one shard (given the shard's own
/// [`Shape`], and `avg`); the caller picks the algorithm by the shard's size.
///
/// With `k` ranks per host, a flat ring carries `2(p-1)/p` of the vector over every link,
/// including the host's uplink; here only the shards cross, each once per host and
/// direction, so a host sends `2(H-1)/H` of the vector in all over its link, split among
/// its ranks.
///
/// **Shards and owners.** The vector is split into `S` balanced shards, `S` the largest
/// number of ranks on one host. On host `h` with `k_h` ranks, shard `s` is owned by the
/// rank of local index `s mod k_h`; on a host with fewer ranks than `S` a rank owns several
/// shards (hosts of 3 and 2 ranks: 3 shards, the 2-rank host's first rank owns shards 0
/// and 2).
///
/// **Phases**, each cut into chunks of `chunk_bytes` (fewer, larger ones if the
/// notification ids would not fit in half of `notif_limit`):
///
/// 1. Reduce-scatter inside the host: every rank writes its part of each shard it does not
///    own into the owner's staging (one slot per sender and owned shard), all at once. The
///    owner reduces the operands into its data in one fixed order (local index
///    ascending, the lower index's operand first), so the result does not depend on
///    arrival order and is the same from run to run.
/// 2. Between hosts: the owners of shard `s`, one per host, run `inter`'s allreduce over
///    the shard, embedded (see `embed.rs`) with its own staging region and notification
///    ids, so different shards' allreduces never share a slot or an id.
/// 3. Allgather inside the host: the owner writes the finished shard into the data range of
///    every other rank of its host, which waits for every shard it does not own.
///
/// AVG divides once, by the group's rank count, where a shard is final: inside the
/// inter-host allreduce (which divides where its own result is final), or, on one host,
/// by the owner before the allgather. One host, or one rank per host, skips the phases that
/// have nobody to talk to.
///
/// **No deadlock.** On every rank the schedule runs in the same global order of stages:
/// the reduce-scatter sends (which never wait), then, for each shard in ascending order,
/// its reduce-scatter receives, inter-host allreduce and allgather sends (only on the
/// shard's owners), then the allgather receives. Every wait in a stage is for a send
/// of the same run posted in that stage or an earlier one: reduce-scatter receives for the
/// sends that open every rank's schedule, allgather receives for the owner's shard stage,
/// and an inter-host allreduce's receives for sends of the same allreduce. Take the lowest
/// (run, stage) where some rank waits: a peer whose send it needs from an earlier stage
/// has posted it (the peer is at that stage or later), and in a shard stage every member of
/// that shard's allreduce has either finished it or is in it, so the embedded algorithm,
/// deadlock-free on its own, moves on. Shards are taken in ascending order on every rank,
/// so two ranks owning shards of two common allreduces (uneven hosts) never wait for each
/// other in opposite orders.
///
/// **Across runs.** A sender writes its run-`r+1` operand of shard `s` into the owner's
/// slot only after it received all of run `r`'s allgather of `s`, which the owner sends
/// after reducing (and so consuming) every slot and notification of `s`; the owner writes
/// run `r+1`'s allgather into a rank's data only after that rank's run-`r+1` operands
/// reached it, so the rank has consumed run `r`'s allgather and its run-`r+1` sends have
/// read their source. The inter-host allreduce of a shard runs as one contiguous piece of
/// every run on each of its members, so its own cross-run argument (and recursive
/// doubling's alternation of slots, by run parity) holds as it does flat. A rank modifies
/// no range it sent from before the final `Flush`, so the embedded schedules' own trailing
/// flushes are dropped.
///
/// **Staging**: one slot per (owned shard, sender), at most `(k-1)/k` of the vector on a
/// rank owning one shard of `k`, the shards not sent further; plus each shard's inter-host
/// staging (the ring's stays a few chunks). The layout is computed from the group's
/// layout alone, so every rank computes the same addresses and ids.
pub(crate) fn hierarchical(
    sh: &Shape,
    hosts: &[Vec<usize>],
    avg: bool,
    inter: &dyn Fn(&Shape, bool) -> Schedule,
) -> Schedule {
    let place = hosts
        .iter()
        .enumerate()
        .find_map(|(h, m)| m.iter().position(|&r| r == sh.me).map(|l| (h, l)));
    let Some((h, l)) = place else {
        // The caller guarantees a partition (see `collective::shape_of`).
        debug_assert!(false, "rank {} is on no host of {hosts:?}", sh.me);
        return inter(sh, avg);
    };
    if sh.ranks == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let lay = Layout::new(sh, hosts, inter, avg);
    let k = hosts[h].len();
    let mut a = Vec::new();

    // 1. Reduce-scatter sends: our part of every shard another rank of the host owns.
    for s in 0..lay.shards {
        let (off, len) = lay.shard(s);
        if s % k == l || len == 0 {
            continue;
        }
        let slot = lay.rs_slot(k, s, l);
        for (c, at, n) in chunks(off, len, lay.chunk) {
            a.push(Action::Send {
                to: hosts[h][s % k],
                src: at,
                dst: lay.rs_at(slot, c),
                len: n,
                notif: lay.rs_id(slot, c),
            });
        }
    }
    // 2. Our shards, in ascending order: reduce, allreduce between hosts, hand out.
    for s in (l..lay.shards).step_by(k) {
        let (off, len) = lay.shard(s);
        if len == 0 {
            continue;
        }
        for (c, at, n) in chunks(off, len, lay.chunk) {
            for j in (0..k).filter(|&j| j != l) {
                let slot = lay.rs_slot(k, s, j);
                a.push(Action::Recv {
                    notif: lay.rs_id(slot, c),
                });
                a.push(Action::Reduce {
                    src: lay.rs_at(slot, c),
                    dst: at,
                    len: n,
                    src_first: j < l,
                });
            }
        }
        if hosts.len() == 1 {
            if avg {
                a.push(Action::Divide { off, len });
            }
        } else {
            lay.inter_host(s, h, inter, avg, &mut a);
        }
        for j in (0..k).filter(|&j| j != l) {
            for (c, at, n) in chunks(off, len, lay.chunk) {
                a.push(Action::Send {
                    to: hosts[h][j],
                    src: at,
                    dst: at,
                    len: n,
                    notif: lay.ag_id(s, c),
                });
            }
        }
    }
    // 3. Allgather receives: every shard another rank of the host owns.
    for s in (0..lay.shards).filter(|s| s % k != l) {
        let (off, len) = lay.shard(s);
        for (c, _, _) in chunks(off, len, lay.chunk) {
            a.push(Action::Recv {
                notif: lay.ag_id(s, c),
            });
        }
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: lay.segment_bytes,
        notifications: lay.notifications,
    }
}

/// A layout [`hierarchical()`] can be built on from member indices grouped by host (as the
/// runtime reports them): indices out of `0..ranks` or already placed are dropped, empty
/// hosts too, and a member no host lists becomes a host of its own, so the result
/// partitions `0..ranks` whatever it was given.
pub(crate) fn host_layout(hosts: Vec<Vec<usize>>, ranks: usize) -> Vec<Vec<usize>> {
    let mut placed = vec![false; ranks];
    let mut out: Vec<Vec<usize>> = hosts
        .into_iter()
        .map(|m| {
            m.into_iter()
                .filter(|&r| r < ranks && !std::mem::replace(&mut placed[r], true))
                .collect::<Vec<_>>()
        })
        .filter(|m| !m.is_empty())
        .collect();
    out.extend((0..ranks).filter(|&r| !placed[r]).map(|r| vec![r]));
    out
}

/// Where everything of a hierarchical allreduce lies (segment offsets, notification ids),
/// computed from the group's layout alone: the same on every rank.
struct Layout<'a> {
    sh: &'a Shape,
    hosts: &'a [Vec<usize>],
    /// Shards: the most ranks on one host.
    shards: usize,
    /// Chunk of the two intra-host phases.
    chunk: usize,
    /// Chunks of the largest shard.
    per_shard: usize,
    /// Reduce-scatter slots of the host that needs the most (see [`Layout::rs_slot`]).
    rs_slots: usize,
    /// Segment offset of the first reduce-scatter slot.
    rs_base: usize,
    /// Bytes per reduce-scatter slot.
    rs_bytes: usize,
    /// Per shard: its inter-host shape (member 0's), staging offset and first id.
    inter: Vec<(Shape, usize, u32)>,
    segment_bytes: usize,
    notifications: u32,
}

impl<'a> Layout<'a> {
    fn new(
        sh: &'a Shape,
        hosts: &'a [Vec<usize>],
        inter: &dyn Fn(&Shape, bool) -> Schedule,
        avg: bool,
    ) -> Self {
        let shards = hosts.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let max_shard = sh.max_block_bytes(shards);
        // A rank of a host of `k` owns up to ceil(S/k) shards, each with k-1 senders.
        let rs_slots = hosts
            .iter()
            .map(|m| shards.div_ceil(m.len().max(1)) * (m.len().saturating_sub(1)))
            .max()
            .unwrap_or(0);
        // Half of the ids for the intra-host phases, as few chunks as that takes.
        let ids_per_chunk = rs_slots + shards;
        let budget = (sh.notif_limit / 2) as usize;
        let min_chunk = max_shard.div_ceil((budget / ids_per_chunk).max(1));
        let chunk = sh
            .chunk_bytes
            .max(min_chunk)
            .max(sh.elem)
            .next_multiple_of(sh.elem);
        let per_shard = max_shard.div_ceil(chunk).max(1);
        let intra_ids = (ids_per_chunk * per_shard) as u32;
        // The rest of the ids shared among the shards' inter-host allreduces.
        let share = sh.notif_limit.saturating_sub(intra_ids) / shards as u32;
        let mut next_byte = align(sh.data_bytes());
        let mut next_id = intra_ids;
        let mut inter_at = Vec::with_capacity(shards);
        for s in 0..shards {
            let (_, len) = sh.block(s, shards);
            let sub = Shape {
                me: 0,
                ranks: hosts.len(),
                count: len / sh.elem,
                notif_limit: share,
                ..*sh
            };
            inter_at.push((sub, next_byte, next_id));
            if hosts.len() > 1 && len > 0 {
                // Sized by member 0's schedule: the builders' staging and ids do not depend
                // on the member (checked when a member builds its own).
                let sized = inter(&sub, avg);
                next_byte += align(Embedding::staging_bytes(&sized, len));
                next_id += sized.notifications;
            }
        }
        let rs_bytes = align(max_shard);
        Layout {
            sh,
            hosts,
            shards,
            chunk,
            per_shard,
            rs_slots,
            rs_base: next_byte,
            rs_bytes,
            inter: inter_at,
            segment_bytes: next_byte + rs_slots * rs_bytes,
            notifications: next_id,
        }
    }

    /// Byte range of shard `s`.
    fn shard(&self, s: usize) -> (usize, usize) {
        self.sh.block(s, self.shards)
    }

    /// The owner's slot for shard `s` from local rank `j` on a host of `k`: the owner
    /// (local `s mod k`) numbers its shards `t = s / k` and its senders skipping itself.
    fn rs_slot(&self, k: usize, s: usize, j: usize) -> usize {
        let owner = s % k;
        (s / k) * (k - 1) + if j < owner { j } else { j - 1 }
    }

    /// Segment offset of chunk `c` of reduce-scatter slot `slot`.
    fn rs_at(&self, slot: usize, c: usize) -> usize {
        self.rs_base + slot * self.rs_bytes + c * self.chunk
    }

    fn rs_id(&self, slot: usize, c: usize) -> u32 {
        (slot * self.per_shard + c) as u32
    }

    fn ag_id(&self, s: usize, c: usize) -> u32 {
        ((self.rs_slots + s) * self.per_shard + c) as u32
    }

    /// Appends host `h`'s part of the allreduce of shard `s` between the hosts.
    fn inter_host(
        &self,
        s: usize,
        h: usize,
        inter: &dyn Fn(&Shape, bool) -> Schedule,
        avg: bool,
        a: &mut Vec<Action>,
    ) {
        let (sized, staging, first_id) = self.inter[s];
        let (off, len) = self.shard(s);
        let sub = inter(&Shape { me: h, ..sized }, avg);
        let members: Vec<usize> = self.hosts.iter().map(|m| m[s % m.len()]).collect();
        debug_assert!(
            sub.segment_bytes <= align(len) + self.staging_room(s)
                && first_id + sub.notifications <= self.notifications,
            "an inter-host schedule outgrew member 0's"
        );
        let body = match sub.actions.split_last() {
            // Our own final flush covers it (see above).
            Some((Action::Flush, rest)) => rest,
            _ => &sub.actions[..],
        };
        Embedding {
            members: &members,
            data: off,
            data_bytes: len,
            staging,
            first_id,
        }
        .append(body, a);
    }

    /// Bytes of shard `s`'s inter-host staging region.
    fn staging_room(&self, s: usize) -> usize {
        let end = self.inter.get(s + 1).map_or(self.rs_base, |x| x.1);
        end - self.inter[s].1
    }
}
