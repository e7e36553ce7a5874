//! `tarantella` typed as people type mpirun, srun, torchrun and gaspi_run (no `--` before
//! the program, `-np`, `-x VAR`, a `.py` program, `-d`), and ranks that see the variables
//! torchrun and gaspi_run set.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

/// The `env NAME=value` lines of a job's output, values only.
fn env_values(job: &Job, name: &str) -> Vec<String> {
    let prefix = format!("env {name}=");
    job.out
        .iter()
        .filter_map(|l| l.split_once(&prefix).map(|(_, v)| v.to_string()))
        .collect()
}

/// Runs `tarantella ARGS` (bounded), expecting the usage error status 2; returns stderr.
fn refused(args: &[&str]) -> String {
    let mut job = Job::start(args);
    let status = job.wait(LIMIT);
    assert_eq!(status.code(), Some(2), "{args:?}: {:?}", job.out);
    job.stderr_text()
}

/// A variable of the shell `tarantella` runs in, passed on by a bare `-x VAR`.
const FROM_SHELL: &str = "TNT_FROM_SHELL";
/// A variable given its value on `tarantella`'s command line, by `-x VAR=VALUE`.
const GIVEN: &str = "TNT_GIVEN";

#[test]
fn an_mpirun_command_line_runs_without_double_dash_and_the_program_keeps_its_flags() {
    let run = TempDir::new("mpirun-line");
    let mut cmd = tarantella(run.path());
    let given = format!("{GIVEN}=given");
    cmd.env(FROM_SHELL, "shell value").args([
        "-np",
        "2",
        "-x",
        FROM_SHELL,
        "-x",
        &given,
        "--output-on-all-devices",
        PROBE,
        "--env",
        FROM_SHELL,
        "--env",
        GIVEN,
        // The program's own -n, which tarantella must leave alone.
        "--env",
        "-n",
    ]);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    assert_eq!(
        job.out.iter().filter(|l| l.contains("probe rank=")).count(),
        2,
        "{:?}",
        job.out
    );
    assert_eq!(env_values(&job, FROM_SHELL), ["shell value"; 2]);
    assert_eq!(env_values(&job, GIVEN), ["given"; 2]);
    assert_eq!(env_values(&job, "-n"), ["<unset>"; 2]);
}

#[test]
fn command_line_mistakes_are_explained() {
    let err = refused(&["-x", "A=1", "B=2", "--", PROBE]);
    assert!(
        err.contains("\"B=2\" stands where the program should start")
            && err.contains("(`-x A=1 -x B=2`)"),
        "{err}"
    );
    let err = refused(&["-n", "2", "--epochs", "3", PROBE]);
    assert!(
        err.contains("unexpected argument '--epochs'")
            && err.contains("hint: if --epochs is an option of your program"),
        "{err}"
    );
    let run = TempDir::new("unset");
    let mut cmd = tarantella(run.path());
    cmd.env_remove("TNT_SURELY_UNSET")
        .args(["-x", "TNT_SURELY_UNSET", PROBE]);
    let mut job = Job::spawn(cmd, run);
    assert_eq!(job.wait(LIMIT).code(), Some(2));
    let err = job.stderr_text();
    assert!(
        err.contains(
            "-x TNT_SURELY_UNSET: TNT_SURELY_UNSET is not set in tarantella's environment"
        ),
        "{err}"
    );
}

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_python_script_runs_with_python3_or_the_given_interpreter() {
    // A stand-in python3 first on PATH: it says which script it got, then runs the probe.
    let dir = TempDir::new("python");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_executable(
        &bin.join("python3"),
        &format!("#!/bin/sh\necho \"python3 ran $1\"\nshift\nexec {PROBE} \"$@\"\n"),
    );
    // The script itself is shell, so that `--interpreter sh` can run it too.
    let script = dir.path().join("train.py");
    write_executable(
        &script,
        &format!("#!/bin/sh\necho \"sh ran the script\"\nexec {PROBE} \"$@\"\n"),
    );
    let script = script.to_str().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());

    let run = TempDir::new("py");
    let mut cmd = tarantella(run.path());
    cmd.env("PATH", &path).args([
        "-n",
        "2",
        "--output-on-all-devices",
        script,
        "--env",
        "GASPI_RANK",
    ]);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let ran = format!("python3 ran {script}");
    assert_eq!(
        job.out.iter().filter(|l| l.ends_with(&ran)).count(),
        2,
        "{:?}",
        job.out
    );
    let mut ranks = env_values(&job, "GASPI_RANK");
    ranks.sort();
    assert_eq!(ranks, ["0", "1"]);

    let run = TempDir::new("py-sh");
    let mut cmd = tarantella(run.path());
    cmd.env("PATH", &path).args([
        "-n",
        "2",
        "--output-on-all-devices",
        "--interpreter",
        "sh",
        script,
    ]);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.ends_with("sh ran the script"))
            .count(),
        2,
        "{:?}",
        job.out
    );
    assert!(!job.out.iter().any(|l| l.contains("python3 ran")));
}

const TORCHRUN: [&str; 7] = launcher::plan::TORCHRUN_VARIABLES;

/// `PROBE --env NAME` for every name.
fn probe_showing(names: &[&str]) -> Vec<String> {
    let mut argv = vec![PROBE.to_string()];
    for n in names {
        argv.extend(["--env".to_string(), n.to_string()]);
    }
    argv
}

#[test]
fn local_ranks_get_torchruns_variables_and_a_master_port_of_their_own() {
    let mut args = vec!["-n", "3", "--output-on-all-devices", "--"];
    let probe = probe_showing(&TORCHRUN);
    args.extend(probe.iter().map(String::as_str));
    let mut job = Job::start(&args);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let seen = env_by_rank(&job, 3);
    let port = &seen[0]["MASTER_PORT"];
    assert!(port.parse::<u16>().is_ok_and(|p| p > 0), "{port}");
    assert_ne!(
        seen[0]["rendezvous"],
        format!("127.0.0.1:{port}"),
        "MASTER_PORT is not our rendezvous"
    );
    for (rank, vars) in seen.iter().enumerate() {
        let got: Vec<&str> = TORCHRUN.iter().map(|n| vars[*n].as_str()).collect();
        let r = rank.to_string();
        assert_eq!(
            got,
            [
                r.as_str(),
                "3",
                r.as_str(),
                "3",
                "0",
                "127.0.0.1",
                port.as_str()
            ],
            "rank {rank}"
        );
    }
}

/// The fields of each rank's `gpi2 ...` line (from `PROBE --gpi2`), by rank.
fn gpi2_view_by_rank(job: &Job, nranks: usize) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut by_rank = vec![std::collections::BTreeMap::new(); nranks];
    for line in job
        .out
        .iter()
        .filter_map(|l| l.split_once("] gpi2 ").map(|(_, v)| v))
    {
        let fields: std::collections::BTreeMap<String, String> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let rank: usize = fields["rank"].parse().unwrap();
        by_rank[rank] = fields;
    }
    by_rank
}

#[test]
fn local_ranks_see_the_job_as_gaspi_run_shows_it_to_a_gpi2_program() {
    let id = job_id("machinefile");
    let mut job = Job::start(&[
        "-n",
        "3",
        "--output-on-all-devices",
        "--job-id",
        &id,
        "--",
        PROBE,
        "--gpi2",
    ]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let here = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let machines = job.run_dir.path().join(&id).join("machines");
    for (rank, view) in gpi2_view_by_rank(&job, 3).iter().enumerate() {
        assert_eq!(view.get("socket"), Some(&rank.to_string()), "{view:?}");
        assert_eq!(view["host"], here, "{view:?}");
        assert_eq!(view["master"], here, "{view:?}");
        assert_eq!(view["lines"], "3", "{view:?}");
        assert_eq!(view["mfile"], machines.to_str().unwrap(), "{view:?}");
    }
    assert!(!machines.exists(), "the machine file outlived the job");
    assert!(!job.run_dir.path().join(&id).exists());
}

#[test]
fn gaspi_runs_debug_flag_shows_every_rank_at_debug_level() {
    let mut job = Job::start(&["-n", "2", "-d", PROBE, "--env", "GASPI_LOG"]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let logs: Vec<&str> = job
        .out
        .iter()
        .filter_map(|l| l.split_once("env GASPI_LOG="))
        .map(|(prefix, v)| {
            assert!(prefix.starts_with("[rank "), "not prefixed: {prefix}");
            v
        })
        .collect();
    // Both ranks are shown; rank 0 logs at debug level (the others log errors only unless
    // --log-on-all-devices).
    assert_eq!(logs.len(), 2, "{:?}", job.out);
    assert!(logs.contains(&"debug"), "{logs:?}");
}
