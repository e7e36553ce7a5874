//! Options that are refused with a clear message instead of doing harm: `-x` on the
//! launcher's own variables, a hostfile that is not a regular file, more ranks per host
//! than a host's slots, a bad item of `-H`; and hosts written as mpirun and gaspi_run users
//! write them.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Generous: each of these fails at once when all is well.
const LIMIT: Duration = Duration::from_secs(20);

/// Runs `tarantella ARGS` (bounded) and returns its stderr, asserting that it failed.
fn refused(args: &[&str]) -> String {
    let mut job = Job::start(args);
    let status = job.wait(LIMIT);
    assert!(!status.success(), "{args:?} was accepted: {:?}", job.out);
    assert_eq!(status.code(), Some(2), "{args:?}: {}", job.stderr_text());
    job.stderr_text()
}

#[test]
fn exports_of_the_launchers_own_variables_are_refused_by_name() {
    let secret = "00112233445566778899aabbccddeeff";
    for var in [
        "GASPI_RANK",
        "GASPI_JOB_TOKEN",
        "GASPI_RENDEZVOUS",
        "GASPI_NRANKS",
        "TARANTELLA_JOB_ID",
    ] {
        let export = format!("{var}={secret}");
        let err = refused(&["-n", "2", "-x", &export, "--", PROBE]);
        assert!(
            err.contains(&format!("tarantella sets {var} on every rank itself")),
            "{var}: {err}"
        );
        assert!(!err.contains(secret), "{var}: the value is shown: {err}");
        // Nor does the dry run take it.
        refused(&["--dry-run", "-x", &export, "--", PROBE]);
    }
    // A log filter finer than --log-level may still be given.
    let mut job = Job::start(&[
        "-x",
        "GASPI_LOG=gaspi=info",
        "--",
        PROBE,
        "--env",
        "GASPI_LOG",
    ]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    assert!(
        job.out.iter().any(|l| l == "env GASPI_LOG=gaspi=info"),
        "{:?}",
        job.out
    );
}

#[test]
fn a_fifo_a_device_or_a_directory_as_hostfile_is_refused_at_once() {
    let dir = TempDir::new("hostfile-kinds");
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for (path, what) in [
        (fifo.to_str().unwrap(), "a FIFO"),
        ("/dev/null", "a character device"),
        (dir.path().to_str().unwrap(), "a directory"),
    ] {
        let started = Instant::now();
        let err = refused(&["--hostfile", path, "--", "true"]);
        assert!(
            err.contains(&format!("hostfile {path} is {what}"))
                && err.contains("not a regular file"),
            "{path}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{path}: slow");
    }
}

#[test]
fn more_ranks_per_host_than_its_slots_is_refused_not_lowered() {
    let dir = TempDir::new("per-node");
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "big slots=4\nsmall slots=2\n").unwrap();
    let hosts = hosts.to_str().unwrap();
    // The dry run would have shown the quietly lowered placement; now it is an error.
    for flag in ["--n-per-node", "--devices-per-node"] {
        let err = refused(&["--dry-run", "--hostfile", hosts, flag, "3", "--", "true"]);
        assert!(
            err.contains(&format!("{flag} 3 is more than the 2 slots of host small")),
            "{err}"
        );
    }
}

/// The `# rank R on HOST` lines of a dry run, as (rank, host).
fn dry_run_placement(args: &[&str]) -> Vec<(usize, String)> {
    let mut job = Job::start(args);
    assert!(job.wait(LIMIT).success(), "{args:?}: {}", job.stderr_text());
    job.out
        .iter()
        .filter_map(|l| l.strip_prefix("# rank "))
        .map(|l| {
            let (rank, rest) = l.split_once(" on ").unwrap();
            let host = rest.split_whitespace().next().unwrap();
            (rank.parse().unwrap(), host.to_string())
        })
        .collect()
}

#[test]
fn hosts_as_people_write_them_in_hostfiles_and_on_the_command_line() {
    let dir = TempDir::new("hosts");
    let machines = dir.path().join("machines");
    // GPI-2 machine file: a line per rank; Open MPI and MPICH spellings mixed in.
    std::fs::write(
        &machines,
        "# gaspi_run machine file\nn1\nn1\n\nn2 slots=1 max_slots=2\nn3:1\n",
    )
    .unwrap();
    let machines = machines.to_str().unwrap();
    let expected: Vec<(usize, String)> = ["n1", "n1", "n2", "n3"]
        .iter()
        .enumerate()
        .map(|(r, h)| (r, h.to_string()))
        .collect();
    for flag in ["--hostfile", "-m", "--machinefile"] {
        let placed = dry_run_placement(&["--dry-run", flag, machines, "--", "true"]);
        assert_eq!(placed, expected, "{flag}");
    }
    for hosts in [
        &["-H", "n1:2,n2,n3"][..],
        &["--host", "n1,n1,n2", "-H", "n3"],
    ] {
        let mut args = vec!["--dry-run"];
        args.extend(hosts);
        args.extend(["--", "true"]);
        assert_eq!(dry_run_placement(&args), expected, "{hosts:?}");
    }
}

#[test]
fn a_bad_host_is_named_by_its_line_or_its_item() {
    let dir = TempDir::new("badhosts");
    let machines = dir.path().join("machines");
    std::fs::write(&machines, "n1\nn2:0\n").unwrap();
    let machines = machines.to_str().unwrap();
    let err = refused(&["--dry-run", "-m", machines, "--", "true"]);
    assert!(
        err.contains(&format!("hostfile {machines}, line 2: slots=\"0\"")),
        "{err}"
    );
    let err = refused(&["--dry-run", "-H", "n1:2,n2:x", "--", "true"]);
    assert!(
        err.contains("-H item \"n2:x\" (in \"n1:2,n2:x\"): slots=\"x\" is not a positive integer"),
        "{err}"
    );
    let err = refused(&["--dry-run", "-H", "n1", "-m", machines, "--", "true"]);
    assert!(err.contains("cannot be used with"), "{err}");
}
