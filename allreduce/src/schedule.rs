//! Collective algorithms as per-rank schedules: flat lists of sends, receives and local
//! reductions over byte ranges of one segment, built once per collective and replayed by
//! the [`engine`](crate::engine) on every run. Keeping the algorithms free of I/O lets the
//! unit tests run all ranks of a schedule in one process against a model of asynchronous
//! delivery (see the tests at the bottom).
//!
//! Segment layout: `[data | staging]`. `data` holds the user's `count` elements (input and,
//! in place, the result); `staging` receives partial results that are reduced into `data`.
//!
//! Flow control: within one run, only the ring reuses staging (it cycles through a few
//! cache-sized slots, with credits; see [`ring`]). Across runs, every write into a peer's
//! staging slot or data range is causally after that peer has consumed the previous run's
//! use of it (each algorithm's last receive on a rank depends on every peer having finished
//! its reduce phase), and every range a rank sends from is not modified by that rank until
//! the data has reached its target or a `Flush` made the send complete. Broadcast receivers
//! do not contribute data, so there each child first tells its parent that it is ready.

/// One step of a schedule. Offsets and lengths are in bytes within the segment; ranks are
/// indices into the group's member list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// `write_notify` of `[src, src+len)` to `to`'s `[dst, dst+len)` with notification
    /// `notif`; `len == 0` sends the notification alone.
    Send {
        to: usize,
        src: usize,
        dst: usize,
        len: usize,
        notif: u32,
    },
    /// Waits for notification `notif` and resets it.
    Recv { notif: u32 },
    /// `data[dst..dst+len] = op(staging[src..], data[dst..])`, with the staging operand first
    /// when `src_first`.
    Reduce {
        src: usize,
        dst: usize,
        len: usize,
        src_first: bool,
    },
    /// Divides `[off, off+len)` by the number of ranks (the last step of AVG).
    Divide { off: usize, len: usize },
    /// Waits until every send posted so far is complete locally (its source may change).
    Flush,
}

/// A rank's part of a collective.
#[derive(Clone, Debug, Default)]
pub(crate) struct Schedule {
    pub actions: Vec<Action>,
    /// Segment bytes the schedule touches (data and staging).
    pub segment_bytes: usize,
    /// Notification ids used: `0..notifications`.
    pub notifications: u32,
}

/// The shape of one collective on one rank.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// This rank's index in the group.
    pub me: usize,
    /// Ranks in the group.
    pub ranks: usize,
    /// Elements.
    pub count: usize,
    /// Bytes per element.
    pub elem: usize,
    /// Pipelining granularity in bytes.
    pub chunk_bytes: usize,
    /// Highest notification id count the segment offers.
    pub notif_limit: u32,
    /// Bytes of staging the ring cycles through ([`RING_STAGING_BYTES`]; at least 2 chunks).
    pub ring_staging_bytes: usize,
}

impl Shape {
    fn data_bytes(&self) -> usize {
        self.count * self.elem
    }

    /// Byte range of block `j` when the elements are split into `parts` balanced blocks.
    fn block(&self, j: usize, parts: usize) -> (usize, usize) {
        let start = self.count * j / parts;
        let end = self.count * (j + 1) / parts;
        (start * self.elem, (end - start) * self.elem)
    }

    fn max_block_bytes(&self, parts: usize) -> usize {
        self.count.div_ceil(parts) * self.elem
    }
}

/// Staging and data regions start on cache-line boundaries.
fn align(bytes: usize) -> usize {
    bytes.next_multiple_of(64)
}

/// Splits `[off, off+len)` into chunks of `chunk` bytes (the last may be shorter).
fn chunks(off: usize, len: usize, chunk: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..len.div_ceil(chunk)).map(move |c| (c, off + c * chunk, chunk.min(len - c * chunk)))
}

/// Staging bytes the ring's reduce-scatter cycles through. Small enough to stay in cache
/// between the write that fills a slot and the reduce that reads it (a staging area as large
/// as the message made every byte go to memory and back once more: measured on 2 ranks at
/// 64 MiB in alternating rounds, 2.0-2.5 GB/s busbw over TCP against 1.9-2.4 with a
/// whole-message staging area, and 9.6-11.4 against 7.6-8.2 over shared memory).
pub(crate) const RING_STAGING_BYTES: usize = 4 << 20;

/// Ring allreduce: reduce-scatter then allgather around the ring `i -> i+1`, each block cut
/// into chunks so that forwarding chunk `c` overlaps receiving and reducing chunk `c+1`.
///
/// Reduce-scatter step `s` sends block `i-s` and receives block `i-s-1`, which is reduced
/// into `data` and forwarded in the next step; after `ranks-1` steps rank `i` holds the
/// full result of block `i+1`, which the allgather passes around the ring in place.
///
/// The reduce-scatter chunks a rank receives, numbered in order, land in a ring of `K`
/// staging slots (see [`RING_STAGING_BYTES`]): chunk `q` in slot `q mod K`. A rank sends
/// its right neighbour chunk `q >= K` only after that neighbour has reported slot
/// `q - K` free (a credit, a bare notification sent after the reduce), and only once it has
/// itself reduced chunk `q - K + 1`, so every wait is for a chunk numbered lower than any
/// the waiter still has to reduce: the rank holding the lowest unreduced chunk can always
/// go on, hence no deadlock.
pub(crate) fn ring(sh: &Shape, avg: bool) -> Schedule {
    let (p, i) = (sh.ranks, sh.me);
    if p == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let max_block = sh.max_block_bytes(p);
    // Ids: one per reduce-scatter chunk, one per allgather chunk, one per credit.
    let ids_per_chunk = 3 * (p - 1);
    // Enough chunks per block to pipeline, few enough notification ids for the segment.
    let min_chunk = max_block.div_ceil((sh.notif_limit as usize / ids_per_chunk).max(1));
    let chunk = sh
        .chunk_bytes
        .max(min_chunk)
        .max(sh.elem)
        .next_multiple_of(sh.elem);
    let per_block = max_block.div_ceil(chunk);
    let right = (i + 1) % p;
    let left = (i + p - 1) % p;
    let block = |j: usize| sh.block(j % p, p);
    let back = |s: usize| (i + p - s) % p;

    // Reduce-scatter chunks in the order they travel, as (step, chunk, offset, len): this
    // rank sends blocks back(0..p-1) and receives blocks back(1..p), and the right neighbour
    // receives in the order this rank sends, so sequence numbers agree on both ends.
    let in_order = |steps: std::ops::Range<usize>| -> Vec<(usize, usize, usize, usize)> {
        steps
            .flat_map(|s| {
                let (off, len) = block(back(s));
                chunks(off, len, chunk).map(move |(c, at, n)| (s, c, at, n))
            })
            .collect()
    };
    let sent = in_order(0..p - 1);
    let received = in_order(1..p);
    // The same on every rank (the sender picks the slot the receiver reads).
    let slots = (sh.ring_staging_bytes / chunk).clamp(2, ((p - 1) * per_block).max(2));
    let staging = align(sh.data_bytes());
    let slot = |q: usize| staging + (q % slots) * chunk;
    let rs_id = |q: usize| q as u32;
    let credit_id = |q: usize| ((p - 1) * per_block + q) as u32;
    let ag_id = |s: usize, c: usize| (2 * (p - 1) * per_block + s * per_block + c) as u32;

    let mut a = Vec::new();
    // Sends the chunks of `sent` from `next` up to (not including) `end`, each after the
    // credit for its slot.
    let mut next = 0;
    let send_until = |a: &mut Vec<Action>, end: usize, next: &mut usize| {
        while *next < end.min(sent.len()) {
            let q = *next;
            if q >= slots {
                a.push(Action::Recv {
                    notif: credit_id(q - slots),
                });
            }
            let (_, _, src, n) = sent[q];
            a.push(Action::Send {
                to: right,
                src,
                dst: slot(q),
                len: n,
                notif: rs_id(q),
            });
            *next += 1;
        }
    };
    // Own block first, as far as the slots go; forwarded chunks are not ready yet.
    let own = block(i).1.div_ceil(chunk);
    send_until(&mut a, own.min(slots), &mut next);
    for (q, &(s, c, dst, n)) in received.iter().enumerate() {
        a.push(Action::Recv { notif: rs_id(q) });
        a.push(Action::Reduce {
            src: slot(q),
            dst,
            len: n,
            src_first: true,
        });
        if q + slots < received.len() {
            a.push(Action::Send {
                to: left,
                src: 0,
                dst: 0,
                len: 0,
                notif: credit_id(q),
            });
        }
        // Chunk q (received at step s) is forwarded as sent chunk `own + q` when s < p-1;
        // keep sending in order up to what this reduce has made ready and allowed.
        let ready = if s < p - 1 { own + q + 1 } else { sent.len() };
        send_until(&mut a, ready.min(q + slots), &mut next);
        if s == p - 1 {
            if avg {
                a.push(Action::Divide { off: dst, len: n });
            }
            a.push(Action::Send {
                to: right,
                src: dst,
                dst,
                len: n,
                notif: ag_id(0, c),
            });
        }
    }
    debug_assert_eq!(next, sent.len(), "every reduce-scatter chunk is sent");
    for s in 1..p {
        let (off, len) = block(back(s - 1));
        for (c, at, n) in chunks(off, len, chunk) {
            a.push(Action::Recv {
                notif: ag_id(s - 1, c),
            });
            if s < p - 1 {
                a.push(Action::Send {
                    to: right,
                    src: at,
                    dst: at,
                    len: n,
                    notif: ag_id(s, c),
                });
            }
        }
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: staging + slots * chunk,
        notifications: (3 * (p - 1) * per_block) as u32,
    }
}

fn local_only(sh: &Shape, avg: bool) -> Schedule {
    let mut actions = Vec::new();
    if avg && sh.count > 0 && sh.ranks > 1 {
        actions.push(Action::Divide {
            off: 0,
            len: sh.data_bytes(),
        });
    }
    Schedule {
        actions,
        segment_bytes: sh.data_bytes(),
        notifications: 0,
    }
}

/// Ranks beyond the largest power of two are folded in first: rank `2k+1` (for the first
/// `extra` pairs) hands its data to rank `2k` and gets the result back at the end.
struct Fold {
    /// Largest power of two ≤ ranks.
    pow2: usize,
    extra: usize,
    /// Index among the power-of-two ranks, or `None` for a folded-away rank.
    virt: Option<usize>,
}

impl Fold {
    fn new(me: usize, ranks: usize) -> Self {
        let pow2 = 1 << (usize::BITS - 1 - ranks.leading_zeros());
        let extra = ranks - pow2;
        let virt = if me < 2 * extra {
            me.is_multiple_of(2).then_some(me / 2)
        } else {
            Some(me - extra)
        };
        Fold { pow2, extra, virt }
    }

    fn real(&self, v: usize) -> usize {
        if v < self.extra {
            2 * v
        } else {
            v + self.extra
        }
    }

    fn rounds(&self) -> usize {
        self.pow2.trailing_zeros() as usize
    }
}

/// The fold prologue/epilogue shared by recursive doubling and Rabenseifner. Returns the
/// power-of-two index, or `None` after emitting the whole schedule of a folded-away rank.
fn fold_in(sh: &Shape, fold: &Fold, fold_slot: usize, a: &mut Vec<Action>, done_id: u32) {
    let me = sh.me;
    match fold.virt {
        None => {
            a.push(Action::Send {
                to: me - 1,
                src: 0,
                dst: fold_slot,
                len: sh.data_bytes(),
                notif: 0,
            });
            a.push(Action::Recv { notif: done_id });
        }
        Some(_) if me < 2 * fold.extra => {
            a.push(Action::Recv { notif: 0 });
            a.push(Action::Reduce {
                src: fold_slot,
                dst: 0,
                len: sh.data_bytes(),
                src_first: false,
            });
        }
        Some(_) => {}
    }
}

fn fold_out(sh: &Shape, fold: &Fold, a: &mut Vec<Action>, done_id: u32) {
    if fold.virt.is_some() && sh.me < 2 * fold.extra {
        a.push(Action::Send {
            to: sh.me + 1,
            src: 0,
            dst: 0,
            len: sh.data_bytes(),
            notif: done_id,
        });
    }
    a.push(Action::Flush);
}

/// Recursive doubling: in round `k` each rank exchanges its whole vector with the rank
/// whose index differs in bit `k` and combines (lower rank's operand first, so both sides
/// get the same bits). `log2(p)` rounds of latency: the choice for small messages.
///
/// Unlike the other algorithms, a rank's last step is a reduce that nobody waits for, so
/// its partner may finish and start the next run while the rank still reads the staging
/// slot. Runs therefore alternate between two sets of slots and notification ids
/// (`parity`); the partner cannot get two runs ahead, since each run needs our data.
pub(crate) fn recursive_doubling(sh: &Shape, avg: bool, parity: usize) -> Schedule {
    if sh.ranks == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let fold = Fold::new(sh.me, sh.ranks);
    let bytes = sh.data_bytes();
    let slot_bytes = align(bytes);
    let rounds = fold.rounds();
    // Slot 0 = data, then the fold slot, then one slot per round and parity.
    let round_slot = |k: usize| slot_bytes * (2 + k + parity * rounds);
    let round_id = |k: usize| (1 + k + parity * rounds) as u32;
    let done_id = 1 + 2 * rounds as u32;
    let mut a = Vec::new();
    fold_in(sh, &fold, slot_bytes, &mut a, done_id);
    if let Some(v) = fold.virt {
        for k in 0..rounds {
            let partner = fold.real(v ^ (1 << k));
            a.push(Action::Send {
                to: partner,
                src: 0,
                dst: round_slot(k),
                len: bytes,
                notif: round_id(k),
            });
            a.push(Action::Recv { notif: round_id(k) });
            // Our vector is about to change: the send above must have left it.
            a.push(Action::Flush);
            a.push(Action::Reduce {
                src: round_slot(k),
                dst: 0,
                len: bytes,
                src_first: partner < sh.me,
            });
        }
        if avg {
            a.push(Action::Divide { off: 0, len: bytes });
        }
    }
    fold_out(sh, &fold, &mut a, done_id);
    Schedule {
        actions: a,
        segment_bytes: slot_bytes * (2 + 2 * rounds),
        notifications: done_id + 1,
    }
}

/// Rabenseifner: reduce-scatter by recursive halving (each round exchanges half of the
/// current range and keeps reducing the other half), then allgather by recursive doubling
/// in the reverse order. Moves `2(p-1)/p` of the data like the ring but in `2 log2(p)`
/// rounds: the choice for mid sizes.
pub(crate) fn rabenseifner(sh: &Shape, avg: bool) -> Schedule {
    if sh.ranks == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let fold = Fold::new(sh.me, sh.ranks);
    let (pow2, rounds) = (fold.pow2, fold.rounds());
    let max_block = sh.max_block_bytes(pow2);
    let fold_slot = align(sh.data_bytes());
    // Round k receives at most pow2 >> (k+1) blocks.
    let mut slots = Vec::with_capacity(rounds);
    let mut next = fold_slot + align(sh.data_bytes());
    for k in 0..rounds {
        slots.push(next);
        next += align((pow2 >> (k + 1)) * max_block);
    }
    let halve_id = |k: usize| 1 + k as u32;
    let double_id = |k: usize| 1 + (rounds + k) as u32;
    let done_id = 1 + 2 * rounds as u32;
    let range = |lo: usize, hi: usize| {
        let (start, _) = sh.block(lo, pow2);
        let (end, last) = sh.block(hi - 1, pow2);
        (start, end + last - start)
    };

    let mut a = Vec::new();
    fold_in(sh, &fold, fold_slot, &mut a, done_id);
    if let Some(v) = fold.virt {
        let (mut lo, mut hi) = (0, pow2);
        for (k, &slot) in slots.iter().enumerate() {
            let mask = pow2 >> (k + 1);
            let partner = fold.real(v ^ mask);
            let mid = lo + (hi - lo) / 2;
            let (keep, give) = if v & mask == 0 {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            let (give_off, give_len) = range(give.0, give.1);
            let (keep_off, keep_len) = range(keep.0, keep.1);
            if give_len > 0 {
                a.push(Action::Send {
                    to: partner,
                    src: give_off,
                    dst: slot,
                    len: give_len,
                    notif: halve_id(k),
                });
            }
            if keep_len > 0 {
                a.push(Action::Recv { notif: halve_id(k) });
                a.push(Action::Reduce {
                    src: slot,
                    dst: keep_off,
                    len: keep_len,
                    src_first: partner < sh.me,
                });
            }
            (lo, hi) = keep;
        }
        if avg {
            let (off, len) = range(lo, hi);
            if len > 0 {
                a.push(Action::Divide { off, len });
            }
        }
        for k in (0..rounds).rev() {
            let mask = pow2 >> (k + 1);
            let partner = fold.real(v ^ mask);
            let width = hi - lo;
            let (off, len) = range(lo, hi);
            if len > 0 {
                a.push(Action::Send {
                    to: partner,
                    src: off,
                    dst: off,
                    len,
                    notif: double_id(k),
                });
            }
            let theirs = if v & mask == 0 {
                (hi, hi + width)
            } else {
                (lo - width, lo)
            };
            if range(theirs.0, theirs.1).1 > 0 {
                a.push(Action::Recv {
                    notif: double_id(k),
                });
            }
            (lo, hi) = (lo.min(theirs.0), hi.max(theirs.1));
        }
    }
    fold_out(sh, &fold, &mut a, done_id);
    Schedule {
        actions: a,
        segment_bytes: next,
        notifications: done_id + 1,
    }
}

/// Position in a broadcast relative to the root.
fn relative(me: usize, root: usize, ranks: usize) -> usize {
    (me + ranks - root) % ranks
}

/// Binomial-tree broadcast: `log2(p)` rounds, the whole message per edge. Each child first
/// notifies its parent that its buffer may be overwritten (notification `1 + child`).
pub(crate) fn broadcast_tree(sh: &Shape, root: usize) -> Schedule {
    let p = sh.ranks;
    let bytes = sh.data_bytes();
    if p == 1 || bytes == 0 {
        return local_only(sh, false);
    }
    let v = relative(sh.me, root, p);
    let real = |u: usize| (u + root) % p;
    let mut a = Vec::new();
    // The lowest set bit of v is the edge from the parent; children hang off lower bits.
    let mut mask = 1;
    while mask < p {
        if v & mask != 0 {
            a.push(Action::Send {
                to: real(v - mask),
                src: 0,
                dst: 0,
                len: 0,
                notif: 1 + v as u32,
            });
            a.push(Action::Recv { notif: 0 });
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        let child = v + mask;
        if child < p {
            a.push(Action::Recv {
                notif: 1 + child as u32,
            });
            a.push(Action::Send {
                to: real(child),
                src: 0,
                dst: 0,
                len: bytes,
                notif: 0,
            });
        }
        mask >>= 1;
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: bytes,
        notifications: 1 + p as u32,
    }
}

/// Pipelined chain broadcast `root -> root+1 -> ...`, in chunks: each rank forwards chunk
/// `c` as soon as it arrives, so the time is about one message time plus `p-2` chunk
/// times. Notification 0 is the child's "ready", `1 + c` carries chunk `c`.
pub(crate) fn broadcast_chain(sh: &Shape, root: usize) -> Schedule {
    let p = sh.ranks;
    let bytes = sh.data_bytes();
    if p == 1 || bytes == 0 {
        return local_only(sh, false);
    }
    let v = relative(sh.me, root, p);
    let limit = (sh.notif_limit as usize).saturating_sub(1).max(1);
    let chunk = sh
        .chunk_bytes
        .max(bytes.div_ceil(limit))
        .max(sh.elem)
        .next_multiple_of(sh.elem);
    let mut a = Vec::new();
    if v > 0 {
        a.push(Action::Send {
            to: (sh.me + p - 1) % p,
            src: 0,
            dst: 0,
            len: 0,
            notif: 0,
        });
    }
    let child = (v + 1 < p).then_some((sh.me + 1) % p);
    if child.is_some() {
        a.push(Action::Recv { notif: 0 });
    }
    for (c, off, n) in chunks(0, bytes, chunk) {
        if v > 0 {
            a.push(Action::Recv {
                notif: 1 + c as u32,
            });
        }
        if let Some(to) = child {
            a.push(Action::Send {
                to,
                src: off,
                dst: off,
                len: n,
                notif: 1 + c as u32,
            });
        }
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: bytes,
        notifications: 1 + bytes.div_ceil(chunk) as u32,
    }
}

#[cfg(test)]
mod tests;
