//! The broadcasts (tree and chain) on the model, from every root.

use super::model::{shapes, value, Sim};
use crate::reduction::Reduction;
use crate::schedule::{broadcast_chain, broadcast_tree, Schedule, Shape, RING_STAGING_BYTES};

pub(super) type BcastBuilder = fn(&Shape, usize) -> Schedule;

pub(super) fn check_broadcast(
    name: &str,
    build: BcastBuilder,
    p: usize,
    count: usize,
    root: usize,
) {
    for seed in 1..4 {
        let scheds = shapes(p, count, 40, RING_STAGING_BYTES)
            .map(|sh| vec![build(&sh, root)])
            .collect();
        let sim = Sim {
            elem_count: count,
            runs: 3,
            seed,
            op: Reduction::Sum,
        };
        sim.run(
            scheds,
            |rank, run| (rank == root).then(|| (0..count).map(|j| value(root, run, j)).collect()),
            |rank, run, data| {
                for (j, got) in data.iter().enumerate() {
                    assert_eq!(
                        *got,
                        value(root, run, j),
                        "{name}: p={p} count={count} root={root} seed={seed}: \
                         rank {rank} run {run} element {j}"
                    );
                }
            },
        );
    }
}

#[test]
pub(super) fn broadcasts_reach_every_rank_from_any_root() {
    for p in 1..=7 {
        for count in [0, 1, 5, 100] {
            for root in 0..p {
                check_broadcast("tree", broadcast_tree, p, count, root);
                check_broadcast("chain", broadcast_chain, p, count, root);
            }
        }
    }
}
