//! One-shot allreduce: every rank sends its whole vector to every other rank and reduces all
//! of them itself. One round of latency whatever the group size, with no folding for
//! non-powers of two: the choice for tiny vectors, where a round trip costs far more than
//! the `p-1` copies.

use super::action::{Action, Schedule};
use super::shape::{align, local_only, Shape};

/// One-shot allreduce: rank `i` writes its vector into slot `i` of every peer, then folds
/// the `p` vectors in rank order, `((x0 ∘ x1) ∘ x2) ∘ …`, on every rank alike, so the
/// result is bit-identical everywhere (the association of a float sum is the same).
///
/// The fold runs in two places so that it ends in `data` without a copy: the operands of
/// ranks below `i` are accumulated in slot 0 (staging), then `data = acc ∘ data` brings in
/// our own vector with the accumulated prefix first, and the operands of ranks above `i`
/// are folded into `data` after it. Our vector is sent before it is overwritten: the
/// `Flush` before the first reduce into `data` waits for those sends to leave it.
///
/// Like recursive doubling, a rank's last step is a reduce nobody waits for, so a peer may
/// finish and start the next run while we still read its slot. Runs alternate between two
/// sets of slots and notification ids (`parity`); a peer cannot get two runs ahead, since
/// each of its runs needs our vector of the run before.
pub(crate) fn one_shot(sh: &Shape, avg: bool, parity: usize) -> Schedule {
    let p = sh.ranks;
    if p == 1 || sh.count == 0 {
        return local_only(sh, avg);
    }
    let i = sh.me;
    let bytes = sh.data_bytes();
    let slot_bytes = align(bytes);
    // Slot 0 is `data`; then `p` slots per parity, one per sending rank (ours unused).
    let slot = |from: usize| slot_bytes * (1 + parity * p + from);
    let id = |from: usize| (parity * p + from) as u32;
    let mut a = Vec::new();
    // Peers in the order i+1, i+2, …: every rank starts on a different target.
    for k in 1..p {
        let to = (i + k) % p;
        a.push(Action::Send {
            to,
            src: 0,
            dst: slot(i),
            len: bytes,
            notif: id(i),
        });
    }
    if i == 0 {
        // Our vector is the head of the fold: the sends must have left `data` first.
        a.push(Action::Flush);
    } else {
        a.push(Action::Recv {
            notif: id(0),
            from: 0,
        });
        for from in 1..i {
            a.push(Action::Recv {
                notif: id(from),
                from,
            });
            a.push(Action::Reduce {
                src: slot(from),
                dst: slot(0),
                len: bytes,
                src_first: false,
            });
        }
        a.push(Action::Flush);
        a.push(Action::Reduce {
            src: slot(0),
            dst: 0,
            len: bytes,
            src_first: true,
        });
    }
    for from in i + 1..p {
        a.push(Action::Recv {
            notif: id(from),
            from,
        });
        a.push(Action::Reduce {
            src: slot(from),
            dst: 0,
            len: bytes,
            src_first: false,
        });
    }
    if avg {
        a.push(Action::Divide { off: 0, len: bytes });
    }
    Schedule {
        actions: a,
        segment_bytes: slot_bytes * (1 + 2 * p),
        notifications: (2 * p) as u32,
    }
}
