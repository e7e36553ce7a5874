//! Recursive-doubling allreduce: the whole vector per round, `log2(p)` rounds.

use super::action::{Action, Schedule};
use super::fold::{fold_in, fold_out, Fold};
use super::shape::{align, local_only, Shape};

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
            a.push(Action::Recv {
                notif: round_id(k),
                from: partner,
            });
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
