//! Rabenseifner allreduce: recursive halving then recursive doubling.

use super::action::{Action, Schedule};
use super::fold::{fold_in, fold_out, Fold};
use super::shape::{align, local_only, Shape};

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
                a.push(Action::Recv {
                    notif: halve_id(k),
                    from: partner,
                });
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
                    from: partner,
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
