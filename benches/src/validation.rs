//! The simulator's validation files and what several of them say together.
//!
//! A file (written by `benches/sim/measure.sh`) holds one measured point per line:
//! `machine ranks per_host shm|tcp algorithm bytes measured_us [round_us,round_us,...]`,
//! `#` starting a comment. On the AMD EPYC VM of sessions 12-30 one run's medians did not
//! reproduce: its speed drifted between runs, uniformly and by the second, so a point's
//! median lay more than 25% from the other runs' on about one point in ten; on the Intel
//! Xeon VM since, two runs agreed at every point (docs/allreduce.md, "Simulator", session
//! 31). Pooled over several runs (the geometric mean of their medians) a point's time is
//! steadier, and [`reproduced`] says how far the runs themselves agree: the bound any model
//! of one machine meets against a single run.
//!
//! ```
//! use tarantella_benches::validation::{pool, reproduced, Compared};
//!
//! let point = |measured_us| Compared {
//!     point: "shm 2 2 shm ring 1M".into(),
//!     measured_us,
//!     predicted_us: 100.0,
//! };
//! let runs = vec![vec![point(80.0)], vec![point(125.0)], vec![point(100.0)]];
//! let pooled = pool(&runs);
//! assert_eq!(pooled[0].runs, 3);
//! assert!((pooled[0].measured_us - 100.0).abs() < 1e-9);
//! assert_eq!((pooled[0].lo_us, pooled[0].hi_us), (80.0, 125.0));
//! // Each run against the other two's pooled time: 80 is 28% below 111.8, 125 is 40%
//! // above 89.4, and 100 is the 100 of 80 and 125.
//! assert_eq!(reproduced(&runs, 0.25), vec![(0, 1), (0, 1), (1, 1)]);
//! ```

use std::collections::HashMap;

/// The `--budget` that `benches/sim/measure.sh` gives `allreduce-sweep`: a measured point is
/// the time per run of a timed batch of `iterations(bytes, MEASURED_BUDGET)` runs (5 from
/// 16 MiB up, 2000 at the smallest sizes), which the validation replays as such
/// (`allreduce::sim::predict_batch`). `benches/netns/run.sh` times its 16 and 64 MiB points
/// in batches of `-n 5`: the same.
pub const MEASURED_BUDGET: usize = 64 << 20;

/// Runs in the timed batch that measured a point of `bytes`.
pub fn measured_batch(bytes: usize) -> usize {
    crate::iterations(bytes, MEASURED_BUDGET)
}

/// One measured point of a validation file.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// The line as written, for errors.
    pub text: String,
    /// `machine ranks per_host transport algorithm bytes`, as written.
    pub point: String,
    /// The machine preset (`shm`, `tcp`, `netns-2gbit`).
    pub machine: String,
    /// Ranks in the group.
    pub ranks: usize,
    /// Ranks per host.
    pub per_host: usize,
    /// `shm` or `tcp`.
    pub transport: String,
    /// As `--algorithm` spells it.
    pub algorithm: String,
    /// As written (`4096`, `1M`).
    pub bytes: String,
    /// Median time, microseconds.
    pub measured_us: f64,
    /// Every round's time, in the order they ran, where the line lists them.
    pub rounds: Option<Vec<f64>>,
}

/// Reads a validation file's lines; `path` names it in errors.
pub fn parse(path: &str, text: &str) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let bad = || format!("{path}: cannot read line {line:?}");
        let f: Vec<&str> = line.split_whitespace().collect();
        let (m, n, k, t, a, b, us, rounds) = match f[..] {
            [m, n, k, t, a, b, us] => (m, n, k, t, a, b, us, None),
            [m, n, k, t, a, b, us, rounds] => (m, n, k, t, a, b, us, Some(rounds)),
            _ => return Err(bad()),
        };
        let measured_us: f64 = us.parse().map_err(|_| bad())?;
        let rounds: Option<Vec<f64>> = rounds
            .map(|r| r.split(',').map(str::parse).collect::<Result<_, _>>())
            .transpose()
            .map_err(|_| bad())?;
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let bad_rounds = |r: &Vec<f64>| r.is_empty() || !r.iter().copied().all(positive);
        if !positive(measured_us) || rounds.as_ref().is_some_and(bad_rounds) {
            return Err(bad());
        }
        lines.push(Line {
            text: line.to_string(),
            point: f[..6].join(" "),
            machine: m.into(),
            ranks: n.parse().map_err(|_| bad())?,
            per_host: k.parse().map_err(|_| bad())?,
            transport: t.into(),
            algorithm: a.into(),
            bytes: b.into(),
            measured_us,
            rounds,
        });
    }
    Ok(lines)
}

/// A validation file named on the command line, `PATH[:NAME=VALUE,...]`: the machine
/// parameters after the colon apply to this run alone (a run measured before a change to
/// the runtime that a parameter stands for). Returns the path and the `NAME=VALUE`s.
pub fn split_run(arg: &str) -> (&str, Vec<String>) {
    match arg.rsplit_once(':') {
        Some((path, params)) if !path.is_empty() && params.contains('=') => {
            (path, params.split(',').map(str::to_string).collect())
        }
        _ => (arg, Vec::new()),
    }
}

/// A point's measured and predicted time in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    /// `machine ranks per_host transport algorithm bytes`.
    pub point: String,
    /// Median time, microseconds.
    pub measured_us: f64,
    /// The simulator's time, microseconds.
    pub predicted_us: f64,
}

/// A point over several runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Pooled {
    /// `machine ranks per_host transport algorithm bytes`.
    pub point: String,
    /// Runs that measured it.
    pub runs: usize,
    /// Geometric mean of the runs' medians.
    pub measured_us: f64,
    /// Geometric mean of the runs' predictions (they differ where a run has its own
    /// parameters).
    pub predicted_us: f64,
    /// The lowest of the runs' medians.
    pub lo_us: f64,
    /// The highest of the runs' medians.
    pub hi_us: f64,
}

/// Geometric mean of positive values (at least one).
fn geomean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v.ln(), n + 1));
    (sum / n as f64).exp()
}

/// Every point of `runs`, in the order first measured, pooled over the runs that measured it.
pub fn pool(runs: &[Vec<Compared>]) -> Vec<Pooled> {
    let mut order = Vec::new();
    let mut by_point: HashMap<&str, Vec<&Compared>> = HashMap::new();
    for c in runs.iter().flatten() {
        by_point
            .entry(&c.point)
            .or_insert_with(|| {
                order.push(c.point.as_str());
                Vec::new()
            })
            .push(c);
    }
    order
        .into_iter()
        .map(|point| {
            let cs = &by_point[point];
            let measured = || cs.iter().map(|c| c.measured_us);
            Pooled {
                point: point.to_string(),
                runs: cs.len(),
                measured_us: geomean(measured()),
                predicted_us: geomean(cs.iter().map(|c| c.predicted_us)),
                lo_us: measured().fold(f64::INFINITY, f64::min),
                hi_us: measured().fold(0.0, f64::max),
            }
        })
        .collect()
}

/// How far the runs reproduce each other: per run, of its points that another run also
/// measured, how many lie within `tolerance` (0.25: 25%) of the other runs' pooled time,
/// and how many there are. No model meets a single run better than the runs meet each
/// other, short of following the drift it cannot know.
pub fn reproduced(runs: &[Vec<Compared>], tolerance: f64) -> Vec<(usize, usize)> {
    // Per point, the sum of the logs of every run's median and their count: the other
    // runs' geometric mean is what remains once a run's own is taken out.
    let mut logs: HashMap<&str, (f64, usize)> = HashMap::new();
    for c in runs.iter().flatten() {
        let (sum, n) = logs.entry(&c.point).or_default();
        *sum += c.measured_us.ln();
        *n += 1;
    }
    runs.iter()
        .map(|run| {
            run.iter()
                .filter_map(|c| {
                    let (sum, n) = logs[c.point.as_str()];
                    let own = c.measured_us.ln();
                    (n > 1).then(|| (own - (sum - own) / (n - 1) as f64).exp())
                })
                .fold((0, 0), |(within, all), ratio| {
                    let close = (ratio - 1.0).abs() <= tolerance;
                    (within + usize::from(close), all + 1)
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_with_their_rounds_and_bad_ones_name_themselves() {
        let text = "# comment\nshm 2 2 shm ring 1M 100 90,100,120\n\ntcp 3 3 tcp rd 4096 7.5\n";
        let lines = parse("f", text).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].point, "shm 2 2 shm ring 1M");
        assert_eq!(lines[0].rounds, Some(vec![90.0, 100.0, 120.0]));
        assert_eq!((lines[1].ranks, lines[1].per_host), (3, 3));
        assert_eq!(lines[1].rounds, None);
        let err = parse("f", "shm 2 2 shm ring 1M -1\n").unwrap_err();
        assert!(
            err.contains("f: cannot read line") && err.contains("1M -1"),
            "{err}"
        );
    }

    #[test]
    fn a_run_may_carry_its_own_parameters() {
        assert_eq!(split_run("a.txt"), ("a.txt", vec![]));
        assert_eq!(
            split_run("docs/a.txt:llc_bytes=0,cores=2"),
            ("docs/a.txt", vec!["llc_bytes=0".into(), "cores=2".into()])
        );
        // A colon without a parameter after it is part of the path.
        assert_eq!(split_run("c:/a.txt"), ("c:/a.txt", vec![]));
    }

    #[test]
    fn points_measured_by_some_runs_only_pool_over_those() {
        let c = |point: &str, measured_us, predicted_us| Compared {
            point: point.into(),
            measured_us,
            predicted_us,
        };
        let runs = vec![
            vec![c("a", 10.0, 9.0), c("b", 4.0, 4.0)],
            vec![c("a", 40.0, 36.0)],
        ];
        let pooled = pool(&runs);
        assert_eq!(pooled.len(), 2);
        assert_eq!((pooled[0].point.as_str(), pooled[0].runs), ("a", 2));
        assert!((pooled[0].measured_us - 20.0).abs() < 1e-9);
        assert!((pooled[0].predicted_us - 18.0).abs() < 1e-9);
        assert_eq!((pooled[1].point.as_str(), pooled[1].runs), ("b", 1));
        // "b" has no other run to be compared with.
        assert_eq!(reproduced(&runs, 0.25), vec![(0, 1), (0, 1)]);
    }
}
