//! Sanity of the model and the replay, and the test that the runtime's automatic choice is
//! the simulator's fastest algorithm.

use super::program::{Op, Program};
use super::replay::replay;
use super::*;
use crate::Algorithm;

/// A machine where only the network's stream bandwidth and latency cost anything.
fn wire_only() -> Machine {
    Machine {
        shm_alpha: 0.0,
        net_post_overhead: 0.0,
        recv_overhead: 0.0,
        reduce_bw_cache: 1e15,
        reduce_bw_mem: 1e15,
        shm_copy_bw_cache: 1e15,
        shm_copy_bw_mem: 1e15,
        host_mem_bw: 1e15,
        nic_bw: 1e15,
        net_on_cpu: false,
        oversub_wake: 0.0,
        ..Machine::cluster_10gbit()
    }
}

#[test]
fn two_rank_ring_takes_the_alpha_beta_time() {
    let m = wire_only();
    let c = Cluster::new(2, 1);
    // Bandwidth term: each rank sends half the vector in each phase, N/B in all.
    let n = 64 << 20;
    let p = predict(Algorithm::Ring, &c, n, 4, &m).unwrap();
    let expect = n as f64 / m.net_stream_bw;
    assert!((p.seconds / expect - 1.0).abs() < 0.05, "{p:?} vs {expect}");
    // Latency term: recursive doubling on two ranks is one exchange, alpha plus 8 bytes.
    let p = predict(Algorithm::RecursiveDoubling, &c, 8, 4, &m).unwrap();
    let expect = m.net_alpha + 8.0 / m.net_stream_bw;
    assert!((p.seconds / expect - 1.0).abs() < 0.05, "{p:?} vs {expect}");
    assert!((p.busbw - 8.0 / p.seconds).abs() < 1e-6 * p.busbw);
}

#[test]
fn more_bandwidth_is_faster() {
    let slow = Machine::netns_2gbit();
    let fast = Machine {
        nic_bw: 4.0 * slow.nic_bw,
        ..slow.clone()
    };
    let c = Cluster::new(4, 2);
    for a in [
        Algorithm::Ring,
        Algorithm::Hierarchical,
        Algorithm::Rabenseifner,
    ] {
        let s = predict(a, &c, 16 << 20, 4, &slow).unwrap();
        let f = predict(a, &c, 16 << 20, 4, &fast).unwrap();
        assert!(f.seconds < 0.8 * s.seconds, "{a:?}: {s:?} {f:?}");
    }
}

#[test]
fn hierarchical_beats_the_flat_ring_on_a_slow_link() {
    let m = Machine::netns_2gbit();
    for k in [2, 3, 4] {
        let c = Cluster::new(2 * k, k);
        let ring = predict(Algorithm::Ring, &c, 64 << 20, 4, &m).unwrap();
        let hier = predict(Algorithm::Hierarchical, &c, 64 << 20, 4, &m).unwrap();
        assert!(
            hier.seconds < 0.8 * ring.seconds,
            "k={k}: {ring:?} {hier:?}"
        );
    }
}

#[test]
fn a_schedule_that_waits_for_nobody_is_a_deadlock() {
    // Both ranks wait before they send.
    let ops = |to| {
        vec![vec![
            Op::Recv { notif: 0 },
            Op::Send {
                to,
                len: 8,
                notif: 0,
            },
        ]]
    };
    let mut program = Program {
        ranks: vec![ops(1), ops(0)],
    };
    let e = replay(&mut program, &Machine::shm(), &Cluster::new(2, 2), 8, 2)
        .err()
        .unwrap();
    assert!(matches!(e, SimError::Deadlock { blocked: 2, .. }), "{e}");
    // The same sends first: it completes.
    let ops = |to| {
        vec![vec![
            Op::Send {
                to,
                len: 8,
                notif: 0,
            },
            Op::Recv { notif: 0 },
        ]]
    };
    let mut program = Program {
        ranks: vec![ops(1), ops(0)],
    };
    assert!(replay(&mut program, &Machine::shm(), &Cluster::new(2, 2), 8, 2).is_ok());
}

#[test]
fn a_notification_set_twice_is_an_overrun() {
    let mut program = Program {
        ranks: vec![
            vec![vec![
                Op::Send {
                    to: 1,
                    len: 0,
                    notif: 3,
                },
                Op::Send {
                    to: 1,
                    len: 0,
                    notif: 3,
                },
            ]],
            // Busy long enough for both to arrive before it looks.
            vec![vec![Op::Reduce { len: 1 << 30 }, Op::Recv { notif: 3 }]],
        ],
    };
    let e = replay(&mut program, &Machine::shm(), &Cluster::new(2, 2), 8, 1)
        .err()
        .unwrap();
    assert!(matches!(e, SimError::Overrun { rank: 1, .. }), "{e}");
}

#[test]
fn infeasible_and_bad_inputs_are_errors() {
    let m = Machine::cluster_10gbit();
    let across = Cluster::new(4, 2);
    assert!(matches!(
        predict(Algorithm::SingleCopy, &across, 1 << 20, 4, &m),
        Err(SimError::Infeasible { .. })
    ));
    // One-shot's p-1 copies of 64 MiB exceed the staging bound at 128 ranks.
    assert!(matches!(
        predict(Algorithm::OneShot, &Cluster::new(128, 8), 64 << 20, 4, &m),
        Err(SimError::Infeasible { .. })
    ));
    assert!(matches!(
        predict(Algorithm::Ring, &Cluster::new(0, 1), 8, 4, &m),
        Err(SimError::BadInput(_))
    ));
    let broken = Machine { nic_bw: 0.0, ..m };
    assert!(matches!(
        predict(Algorithm::Ring, &across, 8, 4, &broken),
        Err(SimError::BadInput(_))
    ));
}

/// Where the runtime's automatic choice ([`runtime_choice`], `Options::pick` with default
/// thresholds) is not the simulator's fastest Auto candidate on the 1024-rank table's
/// machine ([`Machine::cluster_10gbit`]), over `n` = 2..32 ranks, `k` = 1, 2, 4, 8 per host
/// and 1–64 MiB (the sizes where the model's validation is closest; see
/// `docs/allreduce.md`). Two algorithms within 5% of each other's predicted time are a
/// tie and either is accepted.
///
/// Returned as `(n, k, bytes, fastest, runtime's)`, for the test to compare with the
/// disagreements documented in `docs/allreduce.md`.
fn disagreements() -> Vec<(usize, usize, usize, Algorithm, Algorithm)> {
    let m = Machine::cluster_10gbit();
    let mut out = Vec::new();
    for n in [2, 3, 4, 8, 16, 32] {
        for k in [1, 2, 4, 8] {
            for bytes in [1 << 20, 4 << 20, 16 << 20, 64 << 20] {
                let c = Cluster::new(n, k);
                let (fastest, all) = best(&c, bytes, 4, &m).unwrap();
                let runtime = runtime_choice(&c, bytes);
                let rt = all.iter().find(|p| p.algorithm == runtime).unwrap();
                if rt.seconds > 1.05 * fastest.seconds {
                    out.push((n, k, bytes, fastest.algorithm, runtime));
                }
            }
        }
    }
    out
}

/// The runtime's choice equals the simulator's fastest (ties within 5% accepted) on every
/// point of the grid of [`disagreements`]: the rules of `Options::pick` and
/// `Thresholds::flat` were set from the simulator's choice there (single-copy on two ranks
/// of a host, the ring's threshold growing past 16 ranks, the ring on small
/// non-powers of two, the hierarchical allreduce only on few hosts), so a change to either
/// the rules or the model that makes them disagree fails here.
///
/// One exception is pinned: 32 ranks on 4 hosts of 8 at 4 MiB, where the simulator
/// prefers the ring by 9% and the rule takes the hierarchical allreduce, as it does below
/// 16 MiB wherever every host holds several ranks (the simulator agrees at 1 MiB there, and
/// at 4 MiB on 2 hosts of 8).
#[test]
fn the_runtime_choice_is_the_simulators_choice() {
    use Algorithm::{Hierarchical, Ring};
    assert_eq!(disagreements(), vec![(32, 8, 4 << 20, Ring, Hierarchical)]);
}
