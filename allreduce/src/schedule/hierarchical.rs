//! Hierarchical allreduce: reduce-scatter inside each host, an allreduce of each shard
//! between the hosts, allgather inside each host, cut into pieces that overlap the host's
//! link with the work inside the host.

use super::action::{Action, Schedule};
use super::hierarchical_layout::Layout;
use super::shape::{local_only, Shape};

/// How the ranks of one host hand each other their parts of the vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostMemory {
    /// Through the transport: each rank writes its part into the owner's staging, and the
    /// owner writes the result into every rank's data.
    Staged,
    /// In place: the host's ranks map each other's segments (gaspi's shared-memory
    /// transport), so the owner reads its peers' parts where they lie and writes the result
    /// into theirs (or, past the cache, they copy it from the owner), every byte copied
    /// once.
    Shared,
}

/// Hierarchical allreduce over a group laid out on hosts: `hosts[h]` lists the member
/// indices (as [`Shape::me`]) on host `h`, the lists partitioning `0..sh.ranks`. `inter`
/// builds the flat allreduce run between hosts for one unit (given the unit's own
/// [`Shape`], and `avg`); the caller picks the algorithm by the unit's size. `memory` says
/// how this rank's host runs its phases (hosts may differ); `pieces` how many pieces each
/// shard is cut into (fewer if the notification ids would not fit; every rank must pass
/// the same).
///
/// With `k` ranks per host, a flat ring carries `2(p-1)/p` of the vector over every link,
/// including the host's uplink; here only the shards cross, each once per host and
/// direction, so a host sends `2(H-1)/H` of the vector in all over its link, split among
/// its ranks.
///
/// **Units and owners** (see `hierarchical_layout.rs`): the vector is split into `S`
/// shards, `S` the most ranks on one host, and each shard into pieces; a unit is one piece
/// of one shard, and on a host of `k` ranks the rank of local index `s mod k` owns shard
/// `s` and its pieces (hosts of 3 and 2 ranks: 3 shards, the 2-rank host's first rank owns
/// shards 0 and 2). Each rank takes its units in one global order, piece-major.
///
/// **Per unit**, on its owner:
///
/// - *A, reduce*: the owner folds the host peers' parts of the unit into its own, in one
///   fixed order (local index ascending, the lower index's operand first), so the result
///   does not depend on arrival order and is the same from run to run and whichever way
///   the host runs its phases. Staged, the peers wrote their parts into the owner's slots
///   at the start of the run, and the owner reduces them chunk by chunk as they arrive;
///   shared, the owner reads them in place from the peers' segments once every peer said
///   its input is ready.
/// - *B, between hosts*: the owners of the unit, one per host, run `inter`'s allreduce over
///   it, embedded (see `embed.rs`) with its own staging region and notification ids.
/// - *C, hand out*: staged, the owner writes the finished unit into the data of every host
///   peer, chunk by chunk. Shared, while the vectors fit the cache (`Shape::in_cache`) and
///   every rank of the host owns a unit, the owner writes the finished unit into every
///   peer's buffer with its *final* (a push); otherwise it tells the peers the unit is
///   final, and they copy it from the owner (*G*, a pull), the units of earlier pieces as
///   they go, the rest at the end. Why both, as in `single_copy.rs`: a unit pulled from its
///   owner's buffer was written by the owner's core just before, and reading it back while
///   the owner reads the peers' parts costs each line twice between the cores; past the
///   cache the pull's streaming stores move less memory.
///
/// **The pipeline.** The owner runs A and the sends that open B (up to B's first wait) of
/// its next unit before the rest of B of the unit before it: the link carries one unit
/// while the host reduces the next, and the first and last unit's intra-host work is all
/// that is left outside the link's time. Shared and pulling, the end of the run is a *done*
/// from every host peer (all it needed is copied), so no rank refills its buffer while a
/// peer still reads it; pushing, it is every unit's *final*: a peer reads our buffer only
/// for the units it owns, before it writes them into ours.
///
/// AVG divides once, by the group's rank count, where a unit is final: inside the
/// inter-host allreduce (which divides where its own result is final), or, on one host,
/// by the owner before handing it out. One host, or one rank per host, skips the phases that
/// have nobody to talk to.
///
/// **No deadlock.** Every wait of a rank is one of: a host peer's part or *ready* (posted
/// at the start of the peer's run, before any wait); a wait of B(u), for sends of the same
/// allreduce; a *final* or handed-out unit `v` (G or the end), placed after B of a unit
/// later than `v`; a *done* (posted once the peer has all units). Suppose every rank
/// waits, and take the earliest unit `u` whose B some rank waits in (or, if none, note
/// that every rank past all its B waits only for finals and dones, all of which come once
/// their owners are past B). Each member of `u`'s allreduce is at B(u) or past it: before
/// B(u) it only waits for starts of runs or for units earlier than `u`, whose owners are
/// past their B by the choice of `u`. So every member is in B(u) or done with it, and the
/// embedded algorithm, deadlock-free on its own, moves on. Sends never wait, so posting B's
/// first sends early changes nothing here.
///
/// **Across runs.** Staged: a peer writes its run-`r+1` part of unit `u` into the owner's
/// slot only after it received all of run `r`'s hand-out of `u`, which the owner sends after
/// reducing (and so consuming) every slot and notification of `u`; the owner writes run
/// `r+1`'s hand-out into a peer's data only after that peer's run-`r+1` part reached it, so
/// the peer has consumed run `r`'s hand-out and its run-`r+1` sends have read their source.
/// Shared and pulling: as in `single_copy.rs`'s pull, a peer's input is read only after its
/// *ready* and overwritten only after the owner's *final*; a rank starts its next run only
/// after every host peer's *done*, and each id is set again only after its previous value
/// was consumed. Shared and pushing: a peer's part of unit `u` is read by `u`'s owner alone,
/// after the peer's *ready*, and overwritten by the same owner's push after its reads. A
/// rank starts its next run, and sets its *ready* again, only after every unit's *final*,
/// and every host peer owns a unit, whose *final* it sends after taking all *ready*s of the
/// run: so no *ready* is set twice before it is taken (with a host peer owning nothing, the
/// host pulls, and the *done* round gives that order). An owner sets a unit's *final* again
/// only after the peer's next *ready*, which the peer sends after taking this run's.
/// Each unit's inter-host allreduce runs once per run on each of its members, interleaved
/// only with local work on other units' ranges, so its own cross-run argument (and
/// recursive doubling's alternation of slots, by run parity) holds as it does flat. A rank
/// modifies no range it sent from before the final `Flush`, so the embedded schedules' own
/// trailing flushes are dropped.
///
/// **Staging**: staged, one slot per (owned unit, sender), at most `(k-1)/k` of the vector
/// on a rank owning one shard of `k`; shared, none inside the host. Plus each unit's
/// inter-host staging (a ring's few chunks, shrunk by the number of pieces).
pub(crate) fn hierarchical(
    sh: &Shape,
    hosts: &[Vec<usize>],
    pieces: usize,
    memory: HostMemory,
    avg: bool,
    inter: &dyn Fn(&Shape, bool) -> Schedule,
) -> Schedule {
    let place = hosts
        .iter()
        .enumerate()
        .find_map(|(h, m)| m.iter().position(|&r| r == sh.me).map(|l| (h, l)));
    let Some((h, l)) = place else {
        // The caller guarantees a partition (see `collective::set_up`).
        debug_assert!(false, "rank {} is on no host of {hosts:?}", sh.me);
        return inter(sh, avg);
    };
    if sh.ranks == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let lay = Layout::new(sh, hosts, pieces, inter, avg);
    let k = hosts[h].len();
    let (mine, theirs): (Vec<usize>, Vec<usize>) = (0..lay.units())
        .filter(|&u| lay.unit(u).1 > 0)
        .partition(|&u| lay.owner(u, k) == l);
    // Shared, the owners write the finished units into their peers' buffers while the
    // vectors fit the cache, if every rank of the host owns a unit: its *final* is what
    // tells a peer that it has taken the peer's *ready*, before the peer sets it again.
    let every_rank_owns =
        (0..k).all(|j| (0..lay.units()).any(|u| lay.unit(u).1 > 0 && lay.owner(u, k) == j));
    let host = Host {
        lay: &lay,
        members: &hosts[h],
        me: l,
        memory,
        push: memory == HostMemory::Shared && sh.in_cache && every_rank_owns,
    };
    let mut a = Vec::new();
    host.open(&theirs, &mut a);
    let mut gathered = 0;
    // The unit whose B has begun and the rest of its B.
    let mut open: Option<(usize, Vec<Action>)> = None;
    for &u in &mine {
        host.reduce(u, &mut a);
        let mut b = between_hosts(&lay, u, h, avg, inter);
        let rest = b.split_off(
            b.iter()
                .position(|a| matches!(a, Action::Recv { .. }))
                .unwrap_or(b.len()),
        );
        a.extend(b);
        if let Some((v, rest)) = open.replace((u, rest)) {
            a.extend(rest);
            host.hand_out(v, &mut a);
            gathered = host.gather(&theirs, gathered, lay.piece(v), &mut a);
        }
    }
    if let Some((v, rest)) = open {
        a.extend(rest);
        host.hand_out(v, &mut a);
    }
    host.close(&theirs, gathered, &mut a);
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: lay.segment_bytes(memory == HostMemory::Staged),
        notifications: lay.notifications,
    }
}

/// B of unit `u` on host `h`: the allreduce between hosts, or on one host what is left of
/// AVG.
fn between_hosts(
    lay: &Layout,
    u: usize,
    h: usize,
    avg: bool,
    inter: &dyn Fn(&Shape, bool) -> Schedule,
) -> Vec<Action> {
    if lay.hosts.len() > 1 {
        return lay.inter_host(u, h, inter, avg);
    }
    let (off, len) = lay.unit(u);
    if avg {
        vec![Action::Divide { off, len }]
    } else {
        Vec::new()
    }
}

/// One rank's intra-host phases, staged or shared.
struct Host<'a> {
    lay: &'a Layout<'a>,
    /// The host's members (indices into the group), by local index.
    members: &'a [usize],
    /// Our local index.
    me: usize,
    memory: HostMemory,
    /// Shared: the owners write the finished units into their peers' buffers (rather than
    /// the peers copying them), and no *done* round ends the run.
    push: bool,
}

impl Host<'_> {
    fn peers(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.members.len()).filter(move |&j| j != self.me)
    }

    /// Tells every host peer `notif` (a bare notification).
    fn tell(&self, notif: u32, a: &mut Vec<Action>) {
        a.extend(self.peers().map(|j| Action::notify(self.members[j], notif)));
    }

    /// The start of the run: staged, our parts of the units the peers own go to their
    /// owners; shared, we say our input is ready and wait until every peer's is.
    fn open(&self, theirs: &[usize], a: &mut Vec<Action>) {
        let k = self.members.len();
        match self.memory {
            HostMemory::Staged => {
                for &u in theirs {
                    let slot = self.lay.rs_slot(k, u, self.me);
                    for (c, at, n) in self.lay.chunks(u) {
                        a.push(Action::Send {
                            to: self.members[self.lay.owner(u, k)],
                            src: at,
                            dst: self.lay.rs_at(slot, c),
                            len: n,
                            notif: self.lay.rs_id(slot, c),
                        });
                    }
                }
            }
            HostMemory::Shared => {
                self.tell(self.lay.ready_id(self.me), a);
                for j in self.peers() {
                    a.push(Action::Recv {
                        notif: self.lay.ready_id(j),
                        from: self.members[j],
                    });
                }
            }
        }
    }

    /// A: folds the peers' parts of our unit `u` into ours, chunk by chunk.
    fn reduce(&self, u: usize, a: &mut Vec<Action>) {
        let k = self.members.len();
        for (c, at, n) in self.lay.chunks(u) {
            for j in self.peers() {
                let src_first = j < self.me;
                match self.memory {
                    HostMemory::Staged => {
                        let slot = self.lay.rs_slot(k, u, j);
                        a.push(Action::Recv {
                            notif: self.lay.rs_id(slot, c),
                            from: self.members[j],
                        });
                        a.push(Action::Reduce {
                            src: self.lay.rs_at(slot, c),
                            dst: at,
                            len: n,
                            src_first,
                        });
                    }
                    HostMemory::Shared => a.push(Action::ReduceFrom {
                        from: self.members[j],
                        src: at,
                        dst: at,
                        len: n,
                        src_first,
                    }),
                }
            }
        }
    }

    /// C: our unit `u` is final; the peers get it.
    fn hand_out(&self, u: usize, a: &mut Vec<Action>) {
        match self.memory {
            HostMemory::Staged => {
                for j in self.peers() {
                    for (c, at, n) in self.lay.chunks(u) {
                        a.push(Action::Send {
                            to: self.members[j],
                            src: at,
                            dst: at,
                            len: n,
                            notif: self.lay.ag_id(u, c),
                        });
                    }
                }
            }
            HostMemory::Shared if self.push => {
                let (off, len) = self.lay.unit(u);
                for j in self.peers() {
                    a.push(Action::Send {
                        to: self.members[j],
                        src: off,
                        dst: off,
                        len,
                        notif: self.lay.final_id(u),
                    });
                }
            }
            HostMemory::Shared => self.tell(self.lay.final_id(u), a),
        }
    }

    /// G, shared and pulling only: copies the peers' units of pieces before `piece` from
    /// `theirs[from..]` (in order); returns how far it got.
    fn gather(&self, theirs: &[usize], from: usize, piece: usize, a: &mut Vec<Action>) -> usize {
        if self.memory == HostMemory::Staged || self.push {
            return from;
        }
        let upto = from
            + theirs[from..]
                .iter()
                .take_while(|&&v| self.lay.piece(v) < piece)
                .count();
        for &v in &theirs[from..upto] {
            self.copy(v, a);
        }
        upto
    }

    fn copy(&self, v: usize, a: &mut Vec<Action>) {
        let (off, len) = self.lay.unit(v);
        a.push(Action::Recv {
            notif: self.lay.final_id(v),
            from: self.members[self.lay.owner(v, self.members.len())],
        });
        a.push(Action::CopyFrom {
            from: self.members[self.lay.owner(v, self.members.len())],
            src: off,
            dst: off,
            len,
        });
    }

    /// The end of the run: every unit of the peers is in our data, and, shared, every peer
    /// has read all it needed from us.
    fn close(&self, theirs: &[usize], gathered: usize, a: &mut Vec<Action>) {
        match self.memory {
            // A peer reads our buffer only for the units it owns, before it writes them
            // into ours: with every unit's *final*, nobody reads our buffer any more.
            HostMemory::Shared if self.push => {
                for &u in theirs {
                    a.push(Action::Recv {
                        notif: self.lay.final_id(u),
                        from: self.members[self.lay.owner(u, self.members.len())],
                    });
                }
            }
            HostMemory::Staged => {
                for &u in theirs {
                    for (c, _, _) in self.lay.chunks(u) {
                        a.push(Action::Recv {
                            notif: self.lay.ag_id(u, c),
                            from: self.members[self.lay.owner(u, self.members.len())],
                        });
                    }
                }
            }
            HostMemory::Shared => {
                for &v in &theirs[gathered..] {
                    self.copy(v, a);
                }
                self.tell(self.lay.done_id(self.me), a);
                for j in self.peers() {
                    a.push(Action::Recv {
                        notif: self.lay.done_id(j),
                        from: self.members[j],
                    });
                }
            }
        }
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
