//! The small allreduce's schedule: recursive doubling with folding for member counts that are
//! not powers of two. Pure arithmetic on member indices; `collectives` runs it.

/// Rounds a collective may need: fold + log2(65536) exchanges + unfold.
pub(super) const MAX_STEPS: usize = 18;

/// The last step of the small allreduce: the result back to a folded-out member.
pub(super) const UNFOLD_STEP: usize = MAX_STEPS - 1;

/// Recursive doubling with folding over `n` members, seen from member `me`: the `rem` extra
/// members (even indices below `2 rem`) fold into their odd neighbours, the remaining
/// power-of-two set exchanges in `exchanges` steps, and the result unfolds.
pub(super) struct Doubling {
    pub me: usize,
    pub rem: usize,
    pub exchanges: usize,
}

impl Doubling {
    pub fn new(n: usize, me: usize) -> Self {
        let p2 = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        Doubling {
            me,
            rem: n - p2,
            exchanges: p2.trailing_zeros() as usize,
        }
    }

    pub fn folded_out(&self) -> bool {
        self.me < 2 * self.rem && self.me.is_multiple_of(2)
    }

    /// Index among the members that exchange.
    pub fn vindex(&self) -> usize {
        if self.me < 2 * self.rem {
            self.me / 2
        } else {
            self.me - self.rem
        }
    }

    /// Member index of exchanging member `v`.
    pub fn real(&self, v: usize) -> usize {
        if v < self.rem {
            2 * v + 1
        } else {
            v + self.rem
        }
    }

    /// Every (step, member index) this member sends to, in step order.
    pub fn sends(&self) -> Vec<(usize, usize)> {
        if self.folded_out() {
            return vec![(0, self.me + 1)];
        }
        let mut out: Vec<(usize, usize)> = (1..=self.exchanges)
            .map(|step| (step, self.real(self.vindex() ^ (1 << (step - 1)))))
            .collect();
        if self.me < 2 * self.rem {
            out.push((UNFOLD_STEP, self.me - 1));
        }
        out
    }
}
