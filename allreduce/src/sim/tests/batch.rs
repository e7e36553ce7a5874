//! The timed batch that validation replays (`predict_batch`): runs from a common start,
//! the slowest rank's batch time per run, and the runs beyond the replayed ones.

use super::super::program::build;
use super::super::replay::replay;
use super::super::*;
use super::wire_only;
use crate::Algorithm;

/// Three ranks over TCP loopback on the Xeon VM's model: recursive doubling folds one rank
/// into another, so the runs of a batch differ (the first starts every rank at once, the
/// last overlaps no next run).
fn three_over_tcp() -> Cluster {
    Cluster {
        ranks: 3,
        per_host: 3,
        intra: Intra::Tcp,
    }
}

/// Every run of `iters` replayed, the slowest rank's end of the last over `iters`.
fn whole_batch(a: Algorithm, c: &Cluster, bytes: usize, m: &Machine, iters: usize) -> f64 {
    let mut program = build(a, c, bytes, 4, m.llc_bytes).unwrap();
    let timeline = replay(&mut program, m, c, iters).unwrap();
    let last = timeline.ends[iters - 1].iter().copied().fold(0.0, f64::max);
    last / iters as f64
}

#[test]
fn batches_up_to_the_replayed_runs_are_replayed_whole() {
    let (c, m) = (three_over_tcp(), Machine::xeon_tcp());
    for iters in 1..=BATCH_REPLAYED {
        let p = predict_batch(Algorithm::RecursiveDoubling, &c, 16 << 20, 4, &m, iters).unwrap();
        let whole = whole_batch(Algorithm::RecursiveDoubling, &c, 16 << 20, &m, iters);
        assert_eq!(p.seconds, whole, "{iters} runs");
    }
}

#[test]
fn longer_batches_extrapolate_within_three_percent_of_replaying_them_whole() {
    let (c, m) = (three_over_tcp(), Machine::xeon_tcp());
    for (a, bytes) in [
        (Algorithm::RecursiveDoubling, 16 << 10),
        (Algorithm::Rabenseifner, 1 << 20),
        (Algorithm::Ring, 64 << 10),
    ] {
        for iters in [BATCH_REPLAYED + 1, 13, 64] {
            let p = predict_batch(a, &c, bytes, 4, &m, iters).unwrap();
            let whole = whole_batch(a, &c, bytes, &m, iters);
            let off = p.seconds / whole - 1.0;
            assert!(off.abs() < 0.03, "{a:?} {bytes} B, {iters} runs: {off:+.3}");
        }
    }
}

#[test]
fn where_every_run_takes_the_same_time_a_batch_is_the_steady_state() {
    // Two ranks' ring on the wire alone: every run is the same two phases, from a common
    // start or not.
    let (m, c) = (wire_only(), Cluster::new(2, 1));
    let steady = predict(Algorithm::Ring, &c, 64 << 20, 4, &m)
        .unwrap()
        .seconds;
    for iters in [1, 5, BATCH_REPLAYED + 3, 2000] {
        let p = predict_batch(Algorithm::Ring, &c, 64 << 20, 4, &m, iters).unwrap();
        assert!(
            (p.seconds / steady - 1.0).abs() < 1e-9,
            "{iters} runs: {p:?}"
        );
        let busbw = (64 << 20) as f64 / p.seconds;
        assert!((p.busbw / busbw - 1.0).abs() < 1e-9, "{p:?}");
    }
}

#[test]
fn a_batch_of_no_runs_is_an_error() {
    let r = predict_batch(
        Algorithm::Ring,
        &Cluster::new(2, 2),
        1 << 20,
        4,
        &Machine::shm(),
        0,
    );
    assert!(matches!(r, Err(SimError::BadInput(_))), "{r:?}");
}
