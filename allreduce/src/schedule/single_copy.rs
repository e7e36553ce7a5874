//! Single-copy allreduce for ranks that share memory: each rank reduces its block straight
//! from its peers' buffers and then writes it into theirs (or, past the cache, lets them
//! copy it), so every byte is copied once per rank instead of being staged and copied again
//! at each ring step.

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
/// 3. *Final*, while the vectors fit the cache (`Shape::in_cache`): `i` writes its final
///    block into every peer's buffer with notification *final*, and waits for every peer's.
///    Past the cache: `i` tells every peer that block `i` is final and copies every peer's
///    final block from it (streaming stores), then *done* both ways.
///
/// Why the two: a block pulled from its owner's buffer was written by the owner's core
/// just before, and reading it back while the owner's core reads ours costs each line
/// twice between the cores; pushed, each line crosses once (single-copy on 2 ranks of a
/// 2-core VM: 2.8× faster at 1 MiB, 1.7× at 4 MiB; docs/allreduce.md). Once the vectors
/// leave the cache the pull with streaming stores moves less memory (1.1–1.25× faster at
/// 64 MiB).
///
/// Why nobody reads memory that is being written: a peer's block `i` is read in step 2 only
/// after the peer's *ready* (its input is in place), and the peer's block `i` changes next
/// only by our final block: pushed by us after our reads, or pulled by the peer after our
/// *final*. Pushing, a peer reads our buffer only as its operand (our block `j`), before it
/// writes its result there and notifies us, so when we have every *final* nobody reads our
/// buffer any more. Pulling, a block `j` is copied after `j`'s *final*, and `j` changes it
/// again only in its next run, after our *done*. A rank starts its next run only after
/// every peer's *final* (pushing) or *done* (pulling), so no read of the last run is
/// pending when the application refills the buffer. No notification id is set again before
/// its last value was consumed: a peer sets our *ready* id of the next run only after it
/// has our *final* (pushing) or *done* (pulling) of this run, which we send after
/// consuming its *ready*; and it sets our *final* and *done* ids of the next run only after
/// it has our *ready* (pushing) or *final* (pulling) of the next run, which we send only
/// after this run ended, so after consuming them.
pub(crate) fn single_copy(sh: &Shape, avg: bool) -> Schedule {
    let p = sh.ranks;
    if p == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let i = sh.me;
    let peers: Vec<usize> = (1..p).map(|k| (i + k) % p).collect();
    let mut a = Vec::new();
    tell(&mut a, &peers, ready(i));
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
    if sh.in_cache {
        push_final(sh, &peers, &mut a);
    } else {
        pull_finals(sh, &peers, &mut a);
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: sh.data_bytes(),
        notifications: if sh.in_cache { 2 * p } else { 3 * p } as u32,
    }
}

/// In cache: our final block into every peer's buffer (a write with its notification),
/// then every peer's into ours. Nobody reads a buffer after its owner's run: a peer reads
/// our block `j` only as its operand, before it writes its result there.
fn push_final(sh: &Shape, peers: &[usize], a: &mut Vec<Action>) {
    let fin = |j| final_id(sh.ranks, j);
    let (off, len) = sh.block(sh.me, sh.ranks);
    for &to in peers {
        a.push(Action::Send {
            to,
            src: off,
            dst: off,
            len,
            notif: fin(sh.me),
        });
    }
    for &j in peers {
        a.push(Action::Recv {
            notif: fin(j),
            from: j,
        });
    }
}

/// Past the cache: every peer's final block copied from its buffer (streaming stores keep
/// the copies from reading the destination first), then a *done* both ways, so that no
/// peer still reads our buffer when the application refills it.
fn pull_finals(sh: &Shape, peers: &[usize], a: &mut Vec<Action>) {
    let (fin, done) = (|j| final_id(sh.ranks, j), |j| done_id(sh.ranks, j));
    tell(a, peers, fin(sh.me));
    for &j in peers {
        let (off, len) = sh.block(j, sh.ranks);
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
    tell(a, peers, done(sh.me));
    for &j in peers {
        a.push(Action::Recv {
            notif: done(j),
            from: j,
        });
    }
}

/// Member `j`'s *ready* notification id.
fn ready(j: usize) -> u32 {
    j as u32
}

/// Member `j`'s *final* notification id, of `p` members.
fn final_id(p: usize, j: usize) -> u32 {
    (p + j) as u32
}

/// Member `j`'s *done* notification id, of `p` members (pulling only).
fn done_id(p: usize, j: usize) -> u32 {
    (2 * p + j) as u32
}

/// A bare notification `notif` to every peer.
fn tell(a: &mut Vec<Action>, peers: &[usize], notif: u32) {
    a.extend(peers.iter().map(|&to| Action::notify(to, notif)));
}
