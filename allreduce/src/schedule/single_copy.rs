//! Single-copy allreduce for ranks that share memory: each rank reduces its block straight
//! from its peers' buffers and then copies the finished blocks of the others, so every byte
//! is copied once per rank instead of being staged and copied again at each ring step.

use super::action::{Action, Schedule};
use super::shape::{chunks, local_only, Shape};

/// Single-copy allreduce (every member must be reached through shared memory): rank `i`
/// owns block `i` of the vector.
///
/// 1. *Ready*: `i` tells every peer that its input is in place (a bare notification).
/// 2. *Reduce*: once every peer is ready, `i` folds the peers' block `i` into its own, read
///    in place from their segments, chunk by chunk (a cache-sized chunk of our block stays
///    in cache while all `p-1` operands are folded into it), in the order `i+1, i+2, …`.
///    A block is reduced by its owner alone, so every rank gets the same bits.
/// 3. *Final*: `i` tells every peer that block `i` is final, and copies every peer's final
///    block from it once that peer says so.
/// 4. *Done*: `i` tells every peer that it has read all it needed, and the run ends when
///    every peer has said so too.
///
/// Why nobody reads memory that is being written: a peer's block `i` is read in step 2 only
/// after the peer's *ready* (its input is in place) and the peer overwrites it only with our
/// final block, after our *final* (our reads are done). A block `j` is copied in step 3
/// after `j`'s *final*, and `j` changes it again only in its next run, after our *done*. A
/// rank starts its next run only after every peer's *done*, so no read of the last run is
/// pending when the application refills the buffer. The same reasoning orders each
/// notification id's reuse: a peer sets our *ready*/*final*/*done* id of the next run only
/// after it has our *final*/*done* of this one, which we send after consuming the id.
pub(crate) fn single_copy(sh: &Shape, avg: bool) -> Schedule {
    let p = sh.ranks;
    if p == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let i = sh.me;
    let ready = |j: usize| j as u32;
    let fin = |j: usize| (p + j) as u32;
    let done = |j: usize| (2 * p + j) as u32;
    let peers: Vec<usize> = (1..p).map(|k| (i + k) % p).collect();
    let tell = |a: &mut Vec<Action>, notif: u32| {
        for &to in &peers {
            a.push(Action::Send {
                to,
                src: 0,
                dst: 0,
                len: 0,
                notif,
            });
        }
    };
    let mut a = Vec::new();
    tell(&mut a, ready(i));
    for &j in &peers {
        a.push(Action::Recv {
            notif: ready(j),
            from: j,
        });
    }
    let (off, len) = sh.block(i, p);
    let chunk = sh.chunk_bytes.max(sh.elem).next_multiple_of(sh.elem);
    for (_, at, n) in chunks(off, len, chunk) {
        for &from in &peers {
            a.push(Action::ReduceFrom {
                from,
                src: at,
                dst: at,
                len: n,
                src_first: false,
            });
        }
    }
    if avg && len > 0 {
        a.push(Action::Divide { off, len });
    }
    tell(&mut a, fin(i));
    for &j in &peers {
        let (off, len) = sh.block(j, p);
        a.push(Action::Recv {
            notif: fin(j),
            from: j,
        });
        if len > 0 {
            a.push(Action::CopyFrom {
                from: j,
                src: off,
                dst: off,
                len,
            });
        }
    }
    tell(&mut a, done(i));
    for &j in &peers {
        a.push(Action::Recv {
            notif: done(j),
            from: j,
        });
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: sh.data_bytes(),
        notifications: (3 * p) as u32,
    }
}
