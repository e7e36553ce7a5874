//! The job token stays secret: no command line and no `--dry-run` output shows it.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

/// The stdout of a successful `tarantella --dry-run`.
fn dry_run(mut cmd: Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs of 32 or more hex digits in `text`: what a printed token looks like.
fn token_like_runs(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .filter(|run| run.len() >= 32)
        .collect()
}

fn assert_redacted(text: &str, placeholders: usize, mode: &str) {
    assert_eq!(
        text.matches("GASPI_JOB_TOKEN=<redacted>").count(),
        placeholders,
        "{mode}: {text}"
    );
    assert_eq!(token_like_runs(text), Vec::<&str>::new(), "{mode}: {text}");
}

#[test]
fn dry_run_shows_the_job_token_as_redacted_in_every_mode() {
    let run = TempDir::new("dry-token");
    let mut local = tarantella(run.path());
    local.args(["--dry-run", "-n", "2", "--", PROBE]);
    assert_redacted(&dry_run(local), 2, "local");

    let hosts = run.path().join("hosts");
    std::fs::write(&hosts, "127.0.0.1 slots=2\nother-host\n").unwrap();
    let mut ssh = tarantella(run.path());
    ssh.arg("--dry-run").arg("--hostfile").arg(&hosts);
    ssh.args(["--", PROBE]);
    assert_redacted(&dry_run(ssh), 3, "ssh");

    let mut slurm = tarantella(run.path());
    slurm
        .env("SLURM_JOB_ID", "4242")
        .args(["--dry-run", "-n", "2", "--", PROBE]);
    assert_redacted(&dry_run(slurm), 1, "slurm");
}

#[test]
fn local_ranks_get_the_job_token_in_their_environment_only() {
    let mut job = Job::start(&[
        "-n",
        "2",
        "--output-on-all-devices",
        "--",
        PROBE,
        "--rendezvous",
        "--token-on-cmdlines",
    ]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let seen: Vec<(String, String)> = job
        .out
        .iter()
        .filter_map(|l| Some((field(l, "token_in_env")?, field(l, "token_on_cmdlines")?)))
        .collect();
    assert_eq!(
        seen,
        [("1".to_string(), "0".to_string()), ("1".into(), "0".into())],
        "{:?}",
        job.out
    );
}

/// The check of the dry run finds a printed token and nothing else: job ids are 12 hex
/// digits, far below a token's 32.
#[test]
fn token_like_runs_are_found_and_nothing_else() {
    assert_eq!(
        token_like_runs("job 1a2b3c4d5e6f (local)"),
        Vec::<&str>::new()
    );
    assert_eq!(
        token_like_runs("GASPI_JOB_TOKEN=00112233445566778899aabbccddeeff x"),
        ["00112233445566778899aabbccddeeff"]
    );
}
