//! The flat allreduces (ring, recursive doubling, Rabenseifner, one-shot, single-copy)
//! on the model: every shape and reduction, their staging and notification ids, and the
//! order in which each rank folds its operands.

use super::model::{check_allreduce, check_allreduce_staged, shapes, COUNTS};
use super::symbolic::symbolic_results;
use crate::reduction::Reduction;
use crate::schedule::{
    one_shot, rabenseifner, recursive_doubling, ring, single_copy, Action, Schedule, Shape,
    RING_STAGING_BYTES,
};

#[test]
pub(super) fn ring_reduces_every_shape() {
    for p in 1..=6 {
        for count in COUNTS {
            for chunk in [8, 24, 1 << 20] {
                // Two slots (the fewest), three, and room for every chunk.
                for staging in [0, 3 * chunk, RING_STAGING_BYTES] {
                    check_allreduce_staged(
                        "ring",
                        |sh, avg| vec![ring(sh, avg)],
                        p,
                        count,
                        chunk,
                        staging,
                        Reduction::Sum,
                    );
                }
            }
            check_allreduce(
                "ring",
                |sh, avg| vec![ring(sh, avg)],
                p,
                count,
                16,
                Reduction::Avg,
            );
        }
    }
}

#[test]
pub(super) fn recursive_doubling_reduces_every_shape() {
    for p in 1..=9 {
        for count in COUNTS {
            for op in [Reduction::Sum, Reduction::Max, Reduction::Avg] {
                check_allreduce(
                    "rd",
                    |sh, avg| (0..2).map(|q| recursive_doubling(sh, avg, q)).collect(),
                    p,
                    count,
                    64,
                    op,
                );
            }
        }
    }
}

#[test]
pub(super) fn rabenseifner_reduces_every_shape() {
    for p in 1..=9 {
        for count in COUNTS {
            for op in [Reduction::Sum, Reduction::Min, Reduction::Avg] {
                check_allreduce(
                    "rabenseifner",
                    |sh, avg| vec![rabenseifner(sh, avg)],
                    p,
                    count,
                    64,
                    op,
                );
            }
        }
    }
}

#[test]
pub(super) fn ring_staging_is_a_few_slots_whatever_the_message() {
    for p in [2, 3, 5] {
        let sh = Shape {
            me: 1,
            ranks: p,
            count: 16 << 20,
            elem: 4,
            chunk_bytes: 1 << 20,
            notif_limit: 65536,
            ring_staging_bytes: 4 << 20,
            in_cache: true,
        };
        let s = ring(&sh, false);
        assert_eq!(s.segment_bytes, (64 << 20) + (4 << 20), "p={p}");
        let credits = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Send { len: 0, .. }))
            .count();
        let reduces = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Reduce { .. }))
            .count();
        // Every received chunk but the last four frees its slot with a credit.
        assert!(reduces >= 32, "p={p}: {reduces} chunks");
        assert_eq!(credits, reduces - 4, "p={p}");
    }
}

#[test]
pub(super) fn ring_keeps_notification_ids_within_the_limit() {
    let sh = Shape {
        me: 0,
        ranks: 5,
        count: 1 << 20,
        elem: 4,
        chunk_bytes: 8,
        notif_limit: 1000,
        ring_staging_bytes: RING_STAGING_BYTES,
        in_cache: true,
    };
    let s = ring(&sh, false);
    assert!(s.notifications <= 1000, "{}", s.notifications);
}

#[test]
pub(super) fn one_shot_reduces_every_shape() {
    for p in 1..=9 {
        for count in COUNTS {
            for op in [Reduction::Sum, Reduction::Max, Reduction::Avg] {
                check_allreduce(
                    "one-shot",
                    |sh, avg| (0..2).map(|q| one_shot(sh, avg, q)).collect(),
                    p,
                    count,
                    64,
                    op,
                );
            }
        }
    }
}

/// "Results are bit-identical on every member": every rank computes every element with the
/// same expression (the same operands in the same order and association), so floating-point
/// rounding and the operand order of MIN/MAX agree too.
#[test]
pub(super) fn every_rank_reduces_each_element_along_the_same_expression() {
    type Build = fn(&Shape) -> Schedule;
    let algorithms: [(&str, Build); 6] = [
        ("ring", |sh| ring(sh, false)),
        ("rd", |sh| recursive_doubling(sh, false, 0)),
        ("rabenseifner", |sh| rabenseifner(sh, false)),
        ("one-shot", |sh| one_shot(sh, false, 0)),
        ("single-copy, pushing", |sh| {
            single_copy(
                &Shape {
                    in_cache: true,
                    ..*sh
                },
                false,
            )
        }),
        ("single-copy, pulling", |sh| {
            single_copy(
                &Shape {
                    in_cache: false,
                    ..*sh
                },
                false,
            )
        }),
    ];
    for (name, build) in algorithms {
        for p in 1..=7 {
            for count in [1, 5, 64] {
                let scheds: Vec<Schedule> = shapes(p, count, 16, 32).map(|sh| build(&sh)).collect();
                let results = symbolic_results(&scheds, count);
                for (r, got) in results.iter().enumerate() {
                    assert_eq!(got, &results[0], "{name}: p={p} count={count}: rank {r}");
                }
                for e in &results[0] {
                    for r in 0..p {
                        assert_eq!(
                            e.matches(&format!("x{r}")).count(),
                            1,
                            "{name}: p={p}: {e} uses rank {r}'s input once"
                        );
                    }
                }
            }
        }
    }
}

#[test]
pub(super) fn one_shot_folds_in_rank_order() {
    let scheds: Vec<Schedule> = shapes(4, 3, 64, 64)
        .map(|sh| one_shot(&sh, false, 1))
        .collect();
    for got in symbolic_results(&scheds, 3) {
        assert!(got.iter().all(|e| e == "(((x0∘x1)∘x2)∘x3)"), "{got:?}");
    }
}

#[test]
pub(super) fn single_copy_reduces_every_shape() {
    for p in 1..=7 {
        for count in COUNTS {
            for chunk in [8, 24, 1 << 20] {
                for op in [Reduction::Sum, Reduction::Min, Reduction::Avg] {
                    for in_cache in [true, false] {
                        check_allreduce(
                            if in_cache {
                                "single-copy, pushing"
                            } else {
                                "single-copy, pulling"
                            },
                            |sh, avg| vec![single_copy(&Shape { in_cache, ..*sh }, avg)],
                            p,
                            count,
                            chunk,
                            op,
                        );
                    }
                }
            }
        }
    }
}

#[test]
pub(super) fn single_copy_stages_nothing_and_moves_each_byte_once() {
    for in_cache in [true, false] {
        let sh = Shape {
            me: 1,
            ranks: 4,
            count: 1 << 20,
            elem: 4,
            chunk_bytes: 256 << 10,
            notif_limit: 65536,
            ring_staging_bytes: RING_STAGING_BYTES,
            in_cache,
        };
        let s = single_copy(&sh, false);
        assert_eq!(s.segment_bytes, 4 << 20, "no staging");
        let (mut reduced, mut copied, mut sent) = (0, 0, 0);
        for a in &s.actions {
            match a {
                Action::ReduceFrom { len, .. } => reduced += len,
                Action::CopyFrom { len, .. } => copied += len,
                Action::Send { len, .. } => sent += len,
                _ => {}
            }
        }
        // Our quarter from each of 3 peers; then our quarter written to each of 3 peers
        // (in cache), or the other 3 quarters copied once each (past it).
        let moved = if in_cache { (0, 3 << 20) } else { (3 << 20, 0) };
        assert_eq!(
            (reduced, copied, sent),
            (3 << 20, moved.0, moved.1),
            "{in_cache}"
        );
        assert_eq!(s.notifications, if in_cache { 8 } else { 12 });
    }
}
