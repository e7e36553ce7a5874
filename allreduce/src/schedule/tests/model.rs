//! The model: every rank of a schedule in one process, each send delivered at a random
//! later point (reading its source then), and the checks of an allreduce's results on it.

use crate::element::Element;
use crate::reduction::Reduction;
use crate::schedule::{Action, Schedule, Shape, RING_STAGING_BYTES};

pub(super) struct Lcg(u64);

impl Lcg {
    pub(super) fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

pub(super) struct Pending {
    pub(super) to: usize,
    pub(super) src: usize,
    pub(super) dst: usize,
    pub(super) len: usize,
    pub(super) notif: u32,
}

pub(super) struct Rank {
    /// Runs cycle through these.
    pub(super) scheds: Vec<Schedule>,
    pub(super) mem: Vec<u8>,
    /// Who set each notification (`None`: not set).
    pub(super) notif: Vec<Option<usize>>,
    pub(super) cursor: usize,
    pub(super) run: usize,
    pub(super) pending: std::collections::VecDeque<Pending>,
}

impl Rank {
    pub(super) fn actions(&self) -> &[Action] {
        &self.scheds[self.run % self.scheds.len()].actions
    }
}

pub(super) fn deliver(ranks: &mut [Rank], from: usize) {
    let Some(s) = ranks[from].pending.pop_front() else {
        return;
    };
    let data = ranks[from].mem[s.src..s.src + s.len].to_vec();
    let target = &mut ranks[s.to];
    target.mem[s.dst..s.dst + s.len].copy_from_slice(&data);
    let slot = &mut target.notif[s.notif as usize];
    assert!(
        slot.is_none(),
        "rank {from} overwrote notification {} of rank {} before it was consumed",
        s.notif,
        s.to
    );
    *slot = Some(from);
}

pub(super) struct Sim {
    pub(super) elem_count: usize,
    pub(super) runs: usize,
    pub(super) seed: u64,
    pub(super) op: Reduction,
}

impl Sim {
    /// Runs `runs` collectives; `input(rank, run)` fills data, `check(rank, run, data)`
    /// checks the result.
    pub(super) fn run(
        &self,
        scheds: Vec<Vec<Schedule>>,
        input: impl Fn(usize, usize) -> Option<Vec<i64>>,
        check: impl Fn(usize, usize, &[i64]),
    ) {
        let p = scheds.len();
        let all = || scheds.iter().flatten();
        let size = all().map(|s| s.segment_bytes).max().unwrap_or(0);
        let notifs = all().map(|s| s.notifications).max().unwrap_or(0) as usize;
        let bytes = self.elem_count * 8;
        let mut ranks: Vec<Rank> = scheds
            .into_iter()
            .map(|scheds| Rank {
                scheds,
                mem: vec![0xAB; size.max(bytes)],
                notif: vec![None; notifs],
                cursor: 0,
                run: 0,
                pending: Default::default(),
            })
            .collect();
        for (i, r) in ranks.iter_mut().enumerate() {
            if let Some(v) = input(i, 0) {
                r.mem[..bytes].copy_from_slice(bytemuck::cast_slice(&v));
            }
        }
        let mut rng = Lcg(self.seed);
        let mut idle_rounds = 0;
        while ranks.iter().any(|r| r.run < self.runs) {
            let i = rng.next() % p;
            if rng.next().is_multiple_of(3) {
                deliver(&mut ranks, rng.next() % p);
            }
            let progressed = ranks[i].run < self.runs && step(&mut ranks, i, self.op);
            if ranks[i].run < self.runs && ranks[i].cursor == ranks[i].actions().len() {
                let data: Vec<i64> = bytemuck::pod_collect_to_vec(&ranks[i].mem[..bytes]);
                check(i, ranks[i].run, &data);
                ranks[i].run += 1;
                ranks[i].cursor = 0;
                if let Some(v) = input(i, ranks[i].run) {
                    ranks[i].mem[..bytes].copy_from_slice(bytemuck::cast_slice(&v));
                }
            }
            idle_rounds = if progressed { 0 } else { idle_rounds + 1 };
            if idle_rounds > 50 * p {
                // Nothing moved for a while: deliver everything; if still stuck, deadlock.
                let before: usize = ranks.iter().map(|r| r.pending.len()).sum();
                for j in 0..p {
                    while !ranks[j].pending.is_empty() {
                        deliver(&mut ranks, j);
                    }
                }
                let moved =
                    (0..p).any(|j| ranks[j].run < self.runs && step(&mut ranks, j, self.op));
                assert!(before > 0 || moved, "deadlock: every rank waits");
                idle_rounds = 0;
            }
        }
        for r in &ranks {
            assert!(r.pending.is_empty(), "sends left after the last flush");
        }
    }
}

/// Advances rank `i` by one action if it can.
pub(super) fn step(ranks: &mut [Rank], i: usize, op: Reduction) -> bool {
    let p = ranks.len();
    let r = &mut ranks[i];
    let Some(action) = r.actions().get(r.cursor).cloned() else {
        return false;
    };
    match action {
        Action::Send {
            to,
            src,
            dst,
            len,
            notif,
        } => {
            assert_ne!(to, i, "send to self");
            r.pending.push_back(Pending {
                to,
                src,
                dst,
                len,
                notif,
            });
        }
        Action::Recv { notif, from } => {
            let Some(sender) = r.notif[notif as usize] else {
                return false;
            };
            // The engine watches `from` while it waits: it must be who sets it.
            assert_eq!(
                sender, from,
                "rank {i}: notification {notif} came from {sender}, the schedule names {from}"
            );
            r.notif[notif as usize] = None;
        }
        Action::Reduce {
            src,
            dst,
            len,
            src_first,
        } => {
            let s: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[src..src + len]);
            let mut d: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[dst..dst + len]);
            i64::combine(op, &mut d, &s, src_first);
            r.mem[dst..dst + len].copy_from_slice(bytemuck::cast_slice(&d));
        }
        Action::ReduceFrom {
            from,
            src,
            dst,
            len,
            src_first,
        } => {
            // Shared memory: the peer's bytes as they are now.
            assert_ne!(from, i, "reduce from self");
            let s: Vec<i64> = bytemuck::pod_collect_to_vec(&ranks[from].mem[src..src + len]);
            let r = &mut ranks[i];
            let mut d: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[dst..dst + len]);
            i64::combine(op, &mut d, &s, src_first);
            r.mem[dst..dst + len].copy_from_slice(bytemuck::cast_slice(&d));
        }
        Action::CopyFrom {
            from,
            src,
            dst,
            len,
        } => {
            assert_ne!(from, i, "copy from self");
            let s = ranks[from].mem[src..src + len].to_vec();
            ranks[i].mem[dst..dst + len].copy_from_slice(&s);
        }
        Action::Divide { off, len } => {
            let mut d: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[off..off + len]);
            i64::divide(&mut d, p);
            r.mem[off..off + len].copy_from_slice(bytemuck::cast_slice(&d));
        }
        Action::Flush => {
            while !ranks[i].pending.is_empty() {
                deliver(ranks, i);
            }
        }
    }
    ranks[i].cursor += 1;
    true
}

pub(super) fn value(rank: usize, run: usize, j: usize) -> i64 {
    let v = (rank as i64 + 1) * 1000 + j as i64 * 7 + run as i64 * 13;
    if j.is_multiple_of(3) {
        -v
    } else {
        v
    }
}

pub(super) fn shapes(
    p: usize,
    count: usize,
    chunk: usize,
    staging: usize,
) -> impl Iterator<Item = Shape> {
    (0..p).map(move |me| Shape {
        me,
        ranks: p,
        count,
        elem: 8,
        chunk_bytes: chunk,
        notif_limit: 65536,
        ring_staging_bytes: staging,
        in_cache: true,
    })
}

pub(super) fn check_allreduce(
    name: &str,
    build: impl Fn(&Shape, bool) -> Vec<Schedule>,
    p: usize,
    count: usize,
    chunk: usize,
    op: Reduction,
) {
    check_allreduce_staged(name, build, p, count, chunk, RING_STAGING_BYTES, op)
}

pub(super) fn check_allreduce_staged(
    name: &str,
    build: impl Fn(&Shape, bool) -> Vec<Schedule>,
    p: usize,
    count: usize,
    chunk: usize,
    staging: usize,
    op: Reduction,
) {
    for seed in 1..4 {
        let scheds = shapes(p, count, chunk, staging)
            .map(|sh| build(&sh, op == Reduction::Avg))
            .collect();
        let sim = Sim {
            elem_count: count,
            runs: 3,
            seed,
            op,
        };
        sim.run(
            scheds,
            |rank, run| Some((0..count).map(|j| value(rank, run, j)).collect()),
            |rank, run, data| {
                for (j, got) in data.iter().enumerate() {
                    let vals = (0..p).map(|r| value(r, run, j));
                    let want = match op {
                        Reduction::Sum => vals.sum::<i64>(),
                        Reduction::Avg => vals.sum::<i64>() / p as i64,
                        Reduction::Max => vals.max().unwrap(),
                        Reduction::Min => vals.min().unwrap(),
                        Reduction::Prod => vals.fold(1i64, |a, b| a.wrapping_mul(b)),
                    };
                    assert_eq!(
                        *got, want,
                        "{name}: p={p} count={count} chunk={chunk} staging={staging} {op:?} \
                         seed={seed}: rank {rank} run {run} element {j}"
                    );
                }
            },
        );
    }
}

/// Element counts of the tests: none, fewer than the ranks, a few, and more than the chunks.
pub(super) const COUNTS: [usize; 7] = [0, 1, 2, 3, 7, 100, 1003];
