//! Predictions: an algorithm's time and bus bandwidth on a cluster, the fastest algorithm
//! the automatic choice could take, and what the runtime's automatic choice takes.

use crate::algorithm::Algorithm;
use crate::options::Options;

use super::cluster::Cluster;
use super::error::SimError;
use super::machine::Machine;
use super::program::build;
use super::replay::replay;

/// Back-to-back runs [`predict`] replays; the first is the warm-up whose start is not
/// steady (every rank starts at once), the prediction is the mean of the others. The
/// automatic choice's table was derived on it; what one of the sweep's timed batches
/// measures is [`predict_batch`].
pub const RUNS: usize = 3;

/// The algorithms [`Algorithm::Auto`] chooses among, which [`best`] compares. One-shot is
/// left out: Auto never takes it (its `p-1` messages per rank lost to recursive doubling
/// over TCP), though [`predict`] simulates it.
pub const AUTO_CANDIDATES: &[Algorithm] = &[
    Algorithm::RecursiveDoubling,
    Algorithm::Rabenseifner,
    Algorithm::Ring,
    Algorithm::Hierarchical,
    Algorithm::SingleCopy,
];

/// Every algorithm the simulator can replay (what `allreduce-sim` prints).
pub const ALL: &[Algorithm] = &[
    Algorithm::RecursiveDoubling,
    Algorithm::Rabenseifner,
    Algorithm::Ring,
    Algorithm::Hierarchical,
    Algorithm::SingleCopy,
    Algorithm::OneShot,
];

/// A predicted allreduce.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// The algorithm simulated.
    pub algorithm: Algorithm,
    /// Steady-state time of one allreduce, seconds.
    pub seconds: f64,
    /// nccl-tests' bus bandwidth, bytes/s: `bytes / seconds * 2(n-1)/n`.
    pub busbw: f64,
}

/// The predicted steady-state time of `algorithm` for a vector of `bytes` bytes of
/// `elem`-byte elements on `cluster` and `machine`: every rank's real schedule, replayed
/// for [`RUNS`] back-to-back runs.
pub fn predict(
    algorithm: Algorithm,
    cluster: &Cluster,
    bytes: usize,
    elem: usize,
    machine: &Machine,
) -> Result<Prediction, SimError> {
    let end = run_ends(algorithm, cluster, bytes, elem, machine, RUNS)?;
    let seconds = (end[RUNS - 1] - end[0]) / (RUNS - 1) as f64;
    Ok(Prediction::new(algorithm, cluster, bytes, seconds))
}

/// Runs of a batch that [`predict_batch`] replays; the steady runs between them stand for
/// the ones beyond. Why 8: the periods of 6 middle runs (an even number, so that the
/// schedules that alternate between two sets of slots weigh alike) extrapolate the whole
/// batches of session 32's run within 3% of replaying every run, where the smallest
/// sizes' batches of 2000 runs would cost 250 times as much.
pub const BATCH_REPLAYED: usize = 8;
// The extrapolation takes the period of the runs between the first and the last.
const _: () = assert!(BATCH_REPLAYED >= 3);

/// The predicted time per run of a timed batch of `iters` runs, as `allreduce-sweep`
/// measures it: every rank leaves a barrier and starts its first run at once, runs the
/// batch back to back, and the slowest rank's batch time over `iters` is the result.
///
/// Unlike [`predict`]'s steady state this counts the batch's two ends: the first run,
/// where every rank sends at once (3 ranks' recursive doubling: the folded rank's vector
/// and the partner's arrive at the same rank together), and the last, which no next run
/// overlaps. The sweep's batches of 16 and 64 MiB hold 5 runs, so those two are 2 of 5;
/// from 64 runs on they weigh nothing. Validation compares measured batches with this.
pub fn predict_batch(
    algorithm: Algorithm,
    cluster: &Cluster,
    bytes: usize,
    elem: usize,
    machine: &Machine,
    iters: usize,
) -> Result<Prediction, SimError> {
    if iters == 0 {
        return Err(SimError::BadInput("a batch has at least one run"));
    }
    let replayed = iters.min(BATCH_REPLAYED);
    let end = run_ends(algorithm, cluster, bytes, elem, machine, replayed)?;
    let last = end[replayed - 1];
    let total = if iters > replayed {
        // The runs beyond take the middle runs' period; the last replayed stays the last.
        let period = (end[replayed - 2] - end[0]) / (replayed - 2) as f64;
        last + (iters - replayed) as f64 * period
    } else {
        last
    };
    Ok(Prediction::new(
        algorithm,
        cluster,
        bytes,
        total / iters as f64,
    ))
}

/// When each of `runs` back-to-back runs ended on its slowest rank, from a start on every
/// rank at time 0.
fn run_ends(
    algorithm: Algorithm,
    cluster: &Cluster,
    bytes: usize,
    elem: usize,
    machine: &Machine,
    runs: usize,
) -> Result<Vec<f64>, SimError> {
    check(cluster, elem, machine)?;
    let mut program = build(algorithm, cluster, bytes, elem, machine.llc_bytes)?;
    let timeline = replay(&mut program, machine, cluster, runs)?;
    Ok(timeline
        .ends
        .iter()
        .map(|ranks| ranks.iter().copied().fold(0.0, f64::max))
        .collect())
}

impl Prediction {
    /// `algorithm` taking `seconds` for `bytes` on `cluster`, with its bus bandwidth.
    fn new(algorithm: Algorithm, cluster: &Cluster, bytes: usize, seconds: f64) -> Self {
        let n = cluster.ranks as f64;
        let busbw = if seconds > 0.0 {
            bytes as f64 / seconds * 2.0 * (n - 1.0) / n
        } else {
            0.0
        };
        Prediction {
            algorithm,
            seconds,
            busbw,
        }
    }
}

/// Rejects inputs the simulation cannot mean anything for.
fn check(cluster: &Cluster, elem: usize, machine: &Machine) -> Result<(), SimError> {
    if cluster.ranks == 0 || cluster.per_host == 0 {
        return Err(SimError::BadInput(
            "a cluster needs ranks and ranks per host",
        ));
    }
    if elem == 0 {
        return Err(SimError::BadInput("elements have a size"));
    }
    if !machine.is_valid() {
        return Err(SimError::BadInput(
            "machine needs cores, positive bandwidths and latencies",
        ));
    }
    Ok(())
}

/// The predictions of every algorithm of [`AUTO_CANDIDATES`] that can run here, and the
/// fastest of them. Infeasible algorithms are skipped; any other error is returned.
pub fn best(
    cluster: &Cluster,
    bytes: usize,
    elem: usize,
    machine: &Machine,
) -> Result<(Prediction, Vec<Prediction>), SimError> {
    let mut all = Vec::new();
    for &a in AUTO_CANDIDATES {
        match predict(a, cluster, bytes, elem, machine) {
            Ok(p) => all.push(p),
            Err(SimError::Infeasible { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let fastest = all
        .iter()
        .copied()
        .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .ok_or(SimError::BadInput("no algorithm can run here"))?;
    Ok((fastest, all))
}

/// What the runtime's [`Algorithm::Auto`] takes for `bytes` on `cluster`, with default
/// options (`Options::pick` on the layout and transport the runtime would see).
pub fn runtime_choice(cluster: &Cluster, bytes: usize) -> Algorithm {
    Options::default().pick(bytes, &cluster.layout(), cluster.shared_memory())
}
