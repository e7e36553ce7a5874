//! The soak's summary table and its per-job CSV.

use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use crate::job::{KillOutcome, Outcome, Sent};
use crate::leftovers::Left;
use crate::plan::{Kind, Point, Target};

/// The `p`-th percentile (nearest rank) of `v`, sorted ascending.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// `tarantella`'s exit as the report writes it: `0`, `1`, `SIGKILL`...
pub fn status(s: Option<ExitStatus>) -> String {
    match s {
        None => "none".into(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => c.to_string(),
            (None, Some(sig)) => nix::sys::signal::Signal::try_from(sig)
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|_| format!("signal {sig}")),
            _ => "?".into(),
        },
    }
}

/// Where a kill landed: before any rank entered `main`, while the ranks were in
/// `Context::init` (not every rank past it), while they ran, or after every rank was done.
pub fn landed(s: &Sent, ranks: usize) -> &'static str {
    if s.started == 0 {
        "before-main"
    } else if s.ready < ranks {
        "init"
    } else if s.done < ranks {
        "run"
    } else {
        "after-done"
    }
}

fn ms(us: Option<u64>) -> String {
    us.map_or("-".into(), |u| format!("{:.1}", u as f64 / 1000.0))
}

fn stats(label: &str, mut v: Vec<u64>, out: &mut String) {
    v.sort_unstable();
    let _ = writeln!(
        out,
        "{label:<44} {:>5}  {:>8}  {:>8}  {:>8}",
        v.len(),
        ms(percentile(&v, 50.0)),
        ms(percentile(&v, 99.0)),
        ms(v.last().copied())
    );
}

#[derive(Default)]
struct Sum {
    procs: usize,
    files: usize,
    records: usize,
}

impl Sum {
    fn add(&mut self, l: &Left) {
        self.procs += l.procs.len();
        self.files += l.files.len();
        self.records += l.records.len();
    }

    fn cell(&self) -> String {
        format!("{}/{}/{}", self.procs, self.files, self.records)
    }

    fn is_zero(&self) -> bool {
        self.procs + self.files + self.records == 0
    }
}

/// What the run concluded.
pub struct Verdict {
    /// The summary table.
    pub text: String,
    /// Whether nothing was left after cleanup, nothing hung and no unkilled job failed.
    pub pass: bool,
}

/// The summary of a run: `header` lines first, then the tables.
pub fn summary(header: &str, jobs: &[Outcome], ranks: usize, sweep: &Left) -> Verdict {
    let mut out = String::new();
    out += header;
    let unkilled: Vec<&Outcome> = jobs.iter().filter(|j| j.unkilled()).collect();
    let killed = jobs.len() - unkilled.len();
    let failed: Vec<&Outcome> = jobs
        .iter()
        .filter(|j| j.failed_unexpectedly(ranks))
        .collect();
    let hung = jobs.iter().filter(|j| j.hung).count();
    let missed = jobs
        .iter()
        .filter(|j| matches!(j.kill, KillOutcome::Missed(_)))
        .count();
    let _ = writeln!(out, "jobs run                  {}", jobs.len());
    let _ = writeln!(
        out,
        "killed                    {killed}   (kill planned but missed, run as unkilled: {missed})"
    );
    let _ = writeln!(
        out,
        "failed unexpectedly       {}   (unkilled jobs with exit != 0 or a rank not done, and hung jobs)",
        failed.len()
    );
    let _ = writeln!(out, "hung (past --job-timeout) {hung}");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<44} {:>5}  {:>8}  {:>8}  {:>8}",
        "times of unkilled jobs that succeeded, ms", "n", "p50", "p99", "max"
    );
    let ok: Vec<&&Outcome> = unkilled
        .iter()
        .filter(|j| !j.failed_unexpectedly(ranks))
        .collect();
    stats(
        "start: spawn -> every rank past init",
        ok.iter().filter_map(|j| j.start_us).collect(),
        &mut out,
    );
    stats(
        "  launch: spawn -> first rank in main",
        ok.iter().filter_map(|j| j.launch_us).collect(),
        &mut out,
    );
    stats(
        "  Context::init, slowest rank",
        ok.iter().filter_map(|j| j.init_us).collect(),
        &mut out,
    );
    stats(
        "job wall time (spawn -> tarantella exit)",
        ok.iter().map(|j| j.wall.as_micros() as u64).collect(),
        &mut out,
    );
    stats(
        "wall time of killed jobs",
        jobs.iter()
            .filter(|j| !j.unkilled())
            .map(|j| j.wall.as_micros() as u64)
            .collect(),
        &mut out,
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<17} {:<6} {:>4} {:>4} {:>9} {:<26} {:>14} {:>13}",
        "kill",
        "point",
        "sent",
        "miss",
        "exit!=0",
        "landed (main/init/run/done)",
        "left before*",
        "left after*"
    );
    for kind in Kind::ALL {
        for point in Point::ALL {
            let rows: Vec<&Outcome> = jobs
                .iter()
                .filter(|j| {
                    j.plan
                        .kill
                        .is_some_and(|k| k.kind() == kind && k.point == point)
                })
                .collect();
            if rows.is_empty() {
                continue;
            }
            let sent: Vec<(&Outcome, &Sent)> = rows
                .iter()
                .filter_map(|j| match &j.kill {
                    KillOutcome::Sent(s) => Some((*j, s)),
                    _ => None,
                })
                .collect();
            let count = |what: &str| {
                sent.iter()
                    .filter(|(_, s)| landed(s, ranks) == what)
                    .count()
            };
            let (mut before, mut after) = (Sum::default(), Sum::default());
            for (j, _) in &sent {
                before.add(&j.before);
                after.add(&j.after);
            }
            let _ = writeln!(
                out,
                "{:<17} {:<6} {:>4} {:>4} {:>9} {:<26} {:>14} {:>13}",
                kind.to_string(),
                point.name(),
                sent.len(),
                rows.len() - sent.len(),
                sent.iter()
                    .filter(|(j, _)| j.exit.is_none_or(|s| !s.success()))
                    .count(),
                format!(
                    "{}/{}/{}/{}",
                    count("before-main"),
                    count("init"),
                    count("run"),
                    count("after-done")
                ),
                before.cell(),
                after.cell()
            );
        }
    }
    let _ = writeln!(
        out,
        "* processes/shm files/job records; before: once the job's processes settled (at most \
         --grace + 2 s after tarantella exited); after: after `tarantella --cleanup`"
    );
    let _ = writeln!(out);
    let (mut kb, mut ka, mut ub, mut ua) = (
        Sum::default(),
        Sum::default(),
        Sum::default(),
        Sum::default(),
    );
    for j in jobs {
        if j.unkilled() {
            ub.add(&j.before);
            ua.add(&j.after);
        } else {
            kb.add(&j.before);
            ka.add(&j.after);
        }
    }
    let cleanups = jobs.iter().filter(|j| j.cleanup.is_some()).count();
    let unknown = jobs
        .iter()
        .filter(|j| matches!(&j.cleanup, Some((s, t)) if cleanup_unknown(*s, t)))
        .count();
    let bad_cleanups = jobs
        .iter()
        .filter(|j| {
            matches!(&j.cleanup, Some((s, t)) if s.is_none_or(|s| !s.success()) && !cleanup_unknown(*s, t))
        })
        .count();
    let zombies: usize = jobs.iter().map(|j| j.zombies).sum();
    let orphans: usize = jobs.iter().map(|j| j.orphans).sum();
    let _ = writeln!(
        out,
        "leftovers (processes/shm files/job records)   before cleanup   after cleanup"
    );
    let _ = writeln!(
        out,
        "  killed jobs                                 {:>14}   {:>13}",
        kb.cell(),
        ka.cell()
    );
    let _ = writeln!(
        out,
        "  unkilled jobs                               {:>14}   {:>13}",
        ub.cell(),
        ua.cell()
    );
    let _ = writeln!(
        out,
        "tarantella --cleanup runs: {cleanups}; \"job is unknown\" (exit 2: torn down, run \
         directory gone): {unknown}; other failures: {bad_cleanups}"
    );
    let _ = writeln!(
        out,
        "orphaned processes reaped by soak (their launcher died; soak is their subreaper): {orphans}"
    );
    let _ = writeln!(
        out,
        "rank zombies (dead, not reaped by the process that inherited them): {zombies}"
    );
    let _ = writeln!(
        out,
        "final sweep of the run (processes/shm files/job records): {}/{}/{}",
        sweep.procs.len(),
        sweep.files.len(),
        sweep.records.len()
    );
    let problems: Vec<&Outcome> = jobs
        .iter()
        .filter(|j| j.failed_unexpectedly(ranks) || !j.after.is_empty())
        .collect();
    if !problems.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "problem jobs ({}; the first 20):", problems.len());
        for j in problems.iter().take(20) {
            let _ = writeln!(out, "  {}", describe(j, ranks));
            for l in j.stderr_tail.iter().rev().take(5).rev() {
                let _ = writeln!(out, "      | {l}");
            }
        }
    }
    let pass = failed.is_empty() && ka.is_zero() && ua.is_zero() && sweep.is_empty();
    let _ = writeln!(out);
    let _ = writeln!(out, "result: {}", if pass { "PASS" } else { "FAIL" });
    Verdict { text: out, pass }
}

/// Whether `tarantella --cleanup` refused the job as unknown: it was torn down and its run
/// directory removed (nothing was left to record), so there is nothing to clean.
fn cleanup_unknown(status: Option<ExitStatus>, text: &str) -> bool {
    status.and_then(|s| s.code()) == Some(2) && text.contains("is unknown")
}

/// One line about a job, for the progress log and the problem list.
pub fn describe(j: &Outcome, ranks: usize) -> String {
    let kill = match (&j.kill, j.plan.kill) {
        (KillOutcome::Sent(s), Some(k)) => format!(
            "{}{} at {} ({:.1} ms, landed {})",
            k.kind(),
            match k.target {
                Target::Rank(r) => format!(" to rank {r}"),
                Target::Launcher => String::new(),
            },
            k.point.name(),
            s.at_us as f64 / 1000.0,
            landed(s, ranks)
        ),
        (KillOutcome::Missed(why), Some(k)) => {
            format!("{} at {}: missed ({why})", k.kind(), k.point.name())
        }
        _ => "not killed".into(),
    };
    let mut s = format!(
        "job {} {}: {kill}; exit {}{}; start {} ms; wall {:.1} ms; ranks done {}/{ranks}; left {}",
        j.index,
        j.id,
        status(j.exit),
        if j.hung { " (HUNG)" } else { "" },
        ms(j.start_us),
        j.wall.as_secs_f64() * 1000.0,
        j.done,
        j.before.describe(),
    );
    if let Some((st, text)) = &j.cleanup {
        let _ = write!(
            s,
            "; cleanup exit {} -> left {}",
            status(*st),
            j.after.describe()
        );
        if !st.is_some_and(|s| s.success()) && !cleanup_unknown(*st, text) {
            let _ = write!(s, " ({text})");
        }
    }
    s
}

/// The CSV header of [`csv_row`].
pub const CSV_HEADER: &str = "index,job,run_ms,kill,target,point,kill_result,kill_at_us,landed,exit,hung,start_us,launch_us,init_us,wall_us,ranks_done,procs_before,files_before,records_before,settle_us,cleanup_exit,procs_after,files_after,records_after,orphans,zombies";

/// One job as a CSV row.
pub fn csv_row(j: &Outcome, ranks: usize) -> String {
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    let (kind, target, point) = match j.plan.kill {
        Some(k) => (
            k.kind().to_string(),
            format!("{:?}", k.target),
            k.point.name().to_string(),
        ),
        None => Default::default(),
    };
    let (result, at, land) = match &j.kill {
        KillOutcome::None => (String::new(), String::new(), String::new()),
        KillOutcome::Sent(s) => ("sent".into(), s.at_us.to_string(), landed(s, ranks).into()),
        KillOutcome::Missed(_) => ("missed".into(), String::new(), String::new()),
    };
    format!(
        "{},{},{},{kind},{target},{point},{result},{at},{land},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        j.index,
        j.id,
        j.plan.run_ms,
        status(j.exit),
        j.hung,
        opt(j.start_us),
        opt(j.launch_us),
        opt(j.init_us),
        j.wall.as_micros(),
        j.done,
        j.before.procs.len(),
        j.before.files.len(),
        j.before.records.len(),
        j.settle.as_micros(),
        j.cleanup.as_ref().map_or(String::new(), |(s, _)| status(*s)),
        j.after.procs.len(),
        j.after.files.len(),
        j.after.records.len(),
        j.orphans,
        j.zombies
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
