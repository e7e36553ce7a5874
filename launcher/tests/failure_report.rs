//! When a rank fails, the summary shows why: the last lines the rank wrote, labelled with
//! its rank and host, unless they were on the terminal already.

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

fn this_host() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The lines of `job`'s stderr that show line `k` of the probe's numbered stderr lines.
fn shown_lines(job: &Job, rank: usize, k: usize) -> usize {
    let line = format!("[rank {rank}] probe stderr line {k} of 30");
    job.err.iter().filter(|l| **l == line).count()
}

#[test]
fn the_last_twenty_stderr_lines_of_a_failed_rank_are_shown_with_its_rank_and_host() {
    let id = job_id("tail");
    let mut job = Job::start(&[
        "-n",
        "3",
        "--job-id",
        &id,
        "--",
        PROBE,
        "--stderr-then-fail",
        "2:30:3",
    ]);
    let status = job.wait(LIMIT);
    let err = job.stderr_text();
    assert_eq!(status.code(), Some(3), "{err}");
    let header = format!("last 20 line(s) of its stderr, rank 2 on {} ", this_host());
    assert!(err.contains(&header), "no {header:?} in {err}");
    for k in 11..=30 {
        assert_eq!(shown_lines(&job, 2, k), 1, "line {k}: {err}");
    }
    assert_eq!(
        shown_lines(&job, 2, 10),
        0,
        "line 10 is one too many: {err}"
    );
    // The log still has all of them.
    let log = job.run_dir.path().join(&id).join("rank-2.log");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("probe stderr line 1 of 30\n"), "{log}");
}

#[test]
fn output_that_was_on_the_terminal_is_not_repeated() {
    for (rank, extra) in [(0, None), (2, Some("--output-on-all-devices"))] {
        let spec = format!("{rank}:30:3");
        let mut args = vec!["-n", "3"];
        args.extend(extra);
        args.extend(["--", PROBE, "--stderr-then-fail", &spec]);
        let mut job = Job::start(&args);
        let status = job.wait(LIMIT);
        let err = job.stderr_text();
        assert_eq!(status.code(), Some(3), "{err}");
        assert!(
            err.contains(&format!(
                "the output of rank {rank} on {} is on the terminal, see above",
                this_host()
            )),
            "{err}"
        );
        assert!(!err.contains("last 20 line(s)"), "{err}");
        // Once, as the rank wrote it (rank 0 unprefixed unless every rank's output is shown).
        let line = |k| match extra {
            Some(_) => format!("[rank {rank}] probe stderr line {k} of 30"),
            None => format!("probe stderr line {k} of 30"),
        };
        for k in [1, 30] {
            assert_eq!(
                job.err.iter().filter(|l| **l == line(k)).count(),
                1,
                "{err}"
            );
        }
    }
}
