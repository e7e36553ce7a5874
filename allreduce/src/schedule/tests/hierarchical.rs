//! The hierarchical allreduce on the model: every host layout, staged, shared and mixed,
//! its pieces, its choice of algorithm between hosts, and its bounds on ids, staging and
//! traffic.

use super::model::{check_allreduce, check_allreduce_staged, shapes, COUNTS};
use super::symbolic::symbolic_results;
use crate::reduction::Reduction;
use crate::schedule::{
    hierarchical, host_layout, rabenseifner, recursive_doubling, ring, Action, HostMemory,
    Schedule, Shape, RING_STAGING_BYTES,
};

/// Layouts of the hierarchical tests: even, uneven both ways, interleaved placement, one
/// host, one rank per host, three hosts.
pub(super) const LAYOUTS: [&[&[usize]]; 8] = [
    &[&[0, 1], &[2, 3]],
    &[&[0, 1, 2], &[3, 4]],
    &[&[0], &[1, 2, 3, 4]],
    &[&[0, 2], &[1, 3]],
    &[&[0, 1, 2, 3]],
    &[&[0], &[1], &[2]],
    &[&[0, 1], &[2, 3], &[4, 5]],
    &[&[0, 3], &[1, 4], &[2]],
];

pub(super) fn layout(hosts: &[&[usize]]) -> Vec<Vec<usize>> {
    hosts.iter().map(|m| m.to_vec()).collect()
}

/// An inter-host builder: a flat allreduce given its shape, `avg` and the run's parity.
pub(super) type Inter = fn(&Shape, bool, usize) -> Schedule;

pub(super) const INTERS: [(&str, Inter); 3] = [
    ("ring", |sh, avg, _| ring(sh, avg)),
    ("rd", recursive_doubling),
    ("rabenseifner", |sh, avg, _| rabenseifner(sh, avg)),
];

/// How the hosts of a hierarchical test run their intra-host phases: all staged, all
/// shared (pushing the finished units where every rank of a host owns one), all shared and
/// pulling them (the vectors past the cache), or alternating staged and shared by host
/// (hosts may differ in the runtime).
#[derive(Clone, Copy, Debug)]
pub(super) enum Memories {
    Staged,
    Shared,
    Pulled,
    Mixed,
}

/// Every way hosts run their phases.
pub(super) const MEMORIES: [Memories; 4] = [
    Memories::Staged,
    Memories::Shared,
    Memories::Pulled,
    Memories::Mixed,
];

impl Memories {
    pub(super) fn of(self, host: usize) -> HostMemory {
        match self {
            Memories::Staged => HostMemory::Staged,
            Memories::Shared | Memories::Pulled => HostMemory::Shared,
            Memories::Mixed if host.is_multiple_of(2) => HostMemory::Shared,
            Memories::Mixed => HostMemory::Staged,
        }
    }
}

/// The hierarchical schedules of both parities (recursive doubling between hosts
/// alternates its slots from run to run), `pieces` per shard, hosts running their phases
/// as `memories` says.
pub(super) fn hier(
    hosts: &[Vec<usize>],
    pieces: usize,
    memories: Memories,
    inter: Inter,
) -> impl Fn(&Shape, bool) -> Vec<Schedule> + '_ {
    move |sh, avg| {
        let host = hosts.iter().position(|m| m.contains(&sh.me)).unwrap();
        let sh = &Shape {
            in_cache: !matches!(memories, Memories::Pulled),
            ..*sh
        };
        (0..2)
            .map(|q| {
                let inter = |sub: &Shape, avg| inter(sub, avg, q);
                hierarchical(sh, hosts, pieces, memories.of(host), avg, &inter)
            })
            .collect()
    }
}

pub(super) const OPS: [Reduction; 5] = [
    Reduction::Sum,
    Reduction::Max,
    Reduction::Min,
    Reduction::Prod,
    Reduction::Avg,
];

#[test]
pub(super) fn hierarchical_reduces_every_layout() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in COUNTS {
            for (inter_name, inter) in INTERS {
                for op in OPS {
                    let name = format!("hierarchical {hosts:?} over {inter_name}");
                    check_allreduce(
                        &name,
                        hier(&hosts, 1, Memories::Staged, inter),
                        p,
                        count,
                        16,
                        op,
                    );
                }
            }
        }
    }
}

/// Pieces and intra-host phases in every combination: several pieces per shard (more than
/// some counts have elements for), staged, shared and mixed hosts, chunks of one and three
/// elements, two and three ring slots.
#[test]
pub(super) fn hierarchical_pipelines_pieces_staged_and_shared() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in COUNTS {
            for memories in MEMORIES {
                for pieces in [1, 3, 8, 16] {
                    let name = format!("hierarchical {hosts:?} {memories:?} {pieces} pieces");
                    for (_, inter) in INTERS {
                        for op in [Reduction::Sum, Reduction::Avg] {
                            let build = hier(&hosts, pieces, memories, inter);
                            check_allreduce(&name, build, p, count, 16, op);
                        }
                    }
                    for chunk in [8, 24] {
                        for staging in [0, 3 * chunk] {
                            check_allreduce_staged(
                                &name,
                                hier(&hosts, pieces, memories, INTERS[0].1),
                                p,
                                count,
                                chunk,
                                staging,
                                Reduction::Min,
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Through the plan, as the collective builds it: each shard's algorithm between hosts
/// picked by its size (thresholds low enough that the counts here meet all three).
#[test]
pub(super) fn hierarchical_plan_mixes_algorithms_between_hosts() {
    use crate::algorithm::Algorithm;
    use crate::plan::{allreduce_plan, Averaging};
    use crate::thresholds::Thresholds;
    let thresholds = Thresholds {
        small_max: 64,
        ring_min: 1024,
        single_copy_min: usize::MAX,
        single_copy_min_two_ranks: usize::MAX,
    };
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in [5, 17, 40, 150, 1003] {
            for op in [Reduction::Sum, Reduction::Avg] {
                check_allreduce(
                    &format!("plan {hosts:?}"),
                    |sh, avg| {
                        let host = hosts.iter().position(|m| m.contains(&sh.me)).unwrap();
                        let memory = Memories::Mixed.of(host);
                        allreduce_plan(
                            Algorithm::Hierarchical,
                            sh,
                            &hosts,
                            memory,
                            &thresholds,
                            if avg {
                                Averaging::After
                            } else {
                                Averaging::None
                            },
                        )
                        .schedules
                    },
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
pub(super) fn hierarchical_keeps_notification_ids_within_the_limit() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for (name, inter) in INTERS {
            for me in 0..p {
                let sh = Shape {
                    me,
                    ranks: p,
                    count: 1 << 20,
                    elem: 4,
                    chunk_bytes: 8,
                    notif_limit: 1000,
                    ring_staging_bytes: RING_STAGING_BYTES,
                    in_cache: true,
                };
                let inter = |sub: &Shape, avg| inter(sub, avg, 0);
                for memory in [HostMemory::Staged, HostMemory::Shared] {
                    let s = hierarchical(&sh, &hosts, 8, memory, false, &inter);
                    assert!(
                        s.notifications <= 1000,
                        "{hosts:?} {name} {memory:?}: {}",
                        s.notifications
                    );
                }
            }
        }
    }
}

/// Staging: the reduce-scatter slots of the units a rank owns (staged: under the vector;
/// shared: none) and the units' ring slots between hosts, a few pieces' worth; what crosses
/// hosts is only the shards.
#[test]
pub(super) fn hierarchical_staging_and_traffic_are_bounded() {
    let hosts = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
    let data = 64 << 20;
    for me in 0..8 {
        let sh = Shape {
            me,
            ranks: 8,
            count: data / 4,
            elem: 4,
            chunk_bytes: 1 << 20,
            notif_limit: 65536,
            ring_staging_bytes: RING_STAGING_BYTES,
            in_cache: true,
        };
        for (memory, intra) in [(HostMemory::Staged, 3 * data / 4), (HostMemory::Shared, 0)] {
            let s = hierarchical(&sh, &hosts, 8, memory, false, &|sub: &Shape, avg| {
                ring(sub, avg)
            });
            // 8 pieces of 2 MiB per shard, each ring's single slot a 1 MiB block.
            assert_eq!(
                s.segment_bytes,
                data + intra + 8 * (1 << 20),
                "rank {me} {memory:?}"
            );
            let off_host: usize = s
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Send { to, len, .. } if (*to < 4) != (me < 4) => Some(*len),
                    _ => None,
                })
                .sum();
            // A ring of two hosts over a quarter of the vector: the quarter, once.
            assert_eq!(off_host, data / 4, "rank {me} {memory:?}");
        }
    }
}

#[test]
pub(super) fn host_layouts_partition_the_group() {
    assert_eq!(
        host_layout(vec![vec![0, 1], vec![2, 3]], 4),
        [vec![0, 1], vec![2, 3]]
    );
    // Out of range, repeated and empty entries go; members no host lists get their own.
    assert_eq!(
        host_layout(vec![vec![0, 7, 0], vec![], vec![2]], 4),
        [vec![0], vec![2], vec![1], vec![3]]
    );
    assert_eq!(host_layout(Vec::new(), 2), [vec![0], vec![1]]);
}

/// The hierarchical allreduce folds every element along one expression on every rank, and
/// the same whether hosts run their phases staged, shared or mixed: the runtime may pick
/// either per host and the result keeps its bits.
#[test]
pub(super) fn hierarchical_results_do_not_depend_on_how_hosts_run_their_phases() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in [1, 5, 64] {
            // The first (staged) result per piece count: pieces change how the ring between
            // hosts splits its blocks, and so the operand order, not the phases inside hosts.
            let mut seen: [Option<Vec<String>>; 2] = [None, None];
            for memories in MEMORIES {
                for (i, pieces) in [1, 3].into_iter().enumerate() {
                    let build = hier(&hosts, pieces, memories, INTERS[0].1);
                    let scheds: Vec<Schedule> = shapes(p, count, 16, 32)
                        .map(|sh| build(&sh, false).swap_remove(0))
                        .collect();
                    let results = symbolic_results(&scheds, count);
                    let name = format!("{hosts:?} {memories:?} {pieces} pieces count={count}");
                    for (r, got) in results.iter().enumerate() {
                        assert_eq!(got, &results[0], "{name}: rank {r}");
                    }
                    let first = seen[i].get_or_insert_with(|| results[0].clone());
                    assert_eq!(&results[0], first, "{name} against staged");
                }
            }
        }
    }
}

/// Shared hosts push the finished units while the vectors fit the cache and every rank of
/// the host owns a unit, and pull them otherwise: past the cache, or where a rank owns
/// nothing (one element on a host of three), whose peers' *ready* only the *done* round
/// orders.
#[test]
pub(super) fn shared_hosts_push_finished_units_in_cache_where_every_rank_owns_one() {
    let copies = |hosts: &[Vec<usize>], me: usize, count: usize, in_cache: bool| {
        let sh = Shape {
            me,
            ranks: hosts.iter().map(Vec::len).sum(),
            count,
            elem: 4,
            chunk_bytes: 64,
            notif_limit: 65536,
            ring_staging_bytes: RING_STAGING_BYTES,
            in_cache,
        };
        let s = hierarchical(&sh, hosts, 2, HostMemory::Shared, false, &|sub, avg| {
            ring(sub, avg)
        });
        let pulled = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::CopyFrom { .. }))
            .count();
        let pushed = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Send { to, len, .. } if *len > 0 && hosts[0].contains(to) == hosts[0].contains(&me)))
            .count();
        (pulled, pushed)
    };
    let two = layout(&[&[0, 1], &[2, 3]]);
    // Two pieces of the shard rank 0 owns, to its one host peer; two of rank 1's it copies.
    assert_eq!(copies(&two, 0, 1000, true), (0, 2));
    assert_eq!(copies(&two, 0, 1000, false), (2, 0));
    let uneven = layout(&[&[0, 1, 2], &[3, 4]]);
    // Rank 0 owns shard 0 of three: its two pieces, to each of two host peers.
    assert_eq!(copies(&uneven, 0, 1000, true), (0, 4));
    // One element: one shard has it, so two of the host's three ranks own nothing, and
    // they copy it.
    let one: Vec<_> = (0..3).map(|me| copies(&uneven, me, 1, true)).collect();
    assert_eq!(one.iter().map(|c| c.0).sum::<usize>(), 2, "{one:?}");
    assert!(one.iter().all(|c| c.1 == 0), "{one:?}");
}
