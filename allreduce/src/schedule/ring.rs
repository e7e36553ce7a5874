//! Pipelined ring allreduce with a few cache-sized staging slots and credits.

use super::action::{Action, Schedule};
use super::shape::{align, chunks, local_only, Shape};

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
    // No larger than a block: a slot never needs more.
    let chunk = sh
        .chunk_bytes
        .max(min_chunk)
        .max(sh.elem)
        .next_multiple_of(sh.elem)
        .min(max_block);
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
    // Two at least, for the credits to let one slot fill while the other is reduced;
    // one when there is only one chunk to receive.
    let received_chunks = (p - 1) * per_block;
    let slots = (sh.ring_staging_bytes / chunk)
        .clamp(2, received_chunks.max(2))
        .min(received_chunks);
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
                    from: right,
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
        a.push(Action::Recv {
            notif: rs_id(q),
            from: left,
        });
        a.push(Action::Reduce {
            src: slot(q),
            dst,
            len: n,
            src_first: true,
        });
        if q + slots < received.len() {
            a.push(Action::notify(left, credit_id(q)));
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
                from: left,
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
