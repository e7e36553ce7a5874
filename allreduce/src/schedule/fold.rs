//! Folding a non-power-of-two group onto the largest power of two, for the algorithms that
//! pair ranks by the bits of their index (recursive doubling and Rabenseifner).

use super::action::Action;
use super::shape::Shape;

/// Ranks beyond the largest power of two are folded in first: rank `2k+1` (for the first
/// `extra` pairs) hands its data to rank `2k` and gets the result back at the end.
pub(super) struct Fold {
    /// Largest power of two ≤ ranks.
    pub pow2: usize,
    /// Ranks beyond `pow2`: the first `2 * extra` ranks pair up, odd into even.
    pub extra: usize,
    /// Index among the power-of-two ranks, or `None` for a folded-away rank.
    pub virt: Option<usize>,
}

impl Fold {
    /// How rank `me` of `ranks` takes part.
    pub fn new(me: usize, ranks: usize) -> Self {
        let pow2 = 1 << (usize::BITS - 1 - ranks.leading_zeros());
        let extra = ranks - pow2;
        let virt = if me < 2 * extra {
            me.is_multiple_of(2).then_some(me / 2)
        } else {
            Some(me - extra)
        };
        Fold { pow2, extra, virt }
    }

    /// The group index of power-of-two index `v`.
    pub fn real(&self, v: usize) -> usize {
        if v < self.extra {
            2 * v
        } else {
            v + self.extra
        }
    }

    /// Rounds of an algorithm that pairs ranks by one bit of `virt` per round.
    pub fn rounds(&self) -> usize {
        self.pow2.trailing_zeros() as usize
    }
}

/// The fold prologue shared by recursive doubling and Rabenseifner: a folded-away rank
/// sends its vector to its even partner (into `fold_slot`) and then only waits for the
/// result (`done_id`), so its whole schedule is emitted here; the partner receives and
/// reduces it before its first round.
pub(super) fn fold_in(
    sh: &Shape,
    fold: &Fold,
    fold_slot: usize,
    a: &mut Vec<Action>,
    done_id: u32,
) {
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
            a.push(Action::Recv {
                notif: done_id,
                from: me - 1,
            });
        }
        Some(_) if me < 2 * fold.extra => {
            a.push(Action::Recv {
                notif: 0,
                from: me + 1,
            });
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

/// The fold epilogue: the even partner of a folded-away rank sends it the result (with
/// `done_id`); every rank then flushes its sends.
pub(super) fn fold_out(sh: &Shape, fold: &Fold, a: &mut Vec<Action>, done_id: u32) {
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
