//! Through a private `sshd` on 127.0.0.1: ranks on hosts given with `-H`, and ssh ranks that
//! see the variables torchrun and GPI-2's gaspi_run set (the machine file written on each
//! rank's host). Skipped (with the reason printed) when `sshd` is missing.

mod common;

use launcher::plan::TORCHRUN_VARIABLES;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::sshd::*;
use common::*;

const LIMIT: Duration = Duration::from_secs(90);

/// Runs `program` as two ranks on 127.0.0.1 through a private sshd (`-H 127.0.0.1:2`) and
/// waits for its success; `None` (skipped) without sshd.
fn two_ssh_ranks_of(name: &str, program: &[&str]) -> Option<Job> {
    let dir = TempDir::new(name);
    let sshd = loopback_sshd(&dir)?;
    let run = TempDir::new(&format!("{name}-run"));
    let mut cmd = tarantella(run.path());
    cmd.env(tnt_env::SSH, &sshd.ssh)
        .args(["-H", "127.0.0.1:2", "--output-on-all-devices", "--"])
        .args(program);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    Some(job)
}

#[test]
fn ssh_ranks_from_a_host_list_on_the_command_line() {
    let Some(job) = two_ssh_ranks_of("ssh-H", &[PROBE, "--rendezvous"]) else {
        return;
    };
    job.assert_rendezvous_ok(2);
    let rdv: Vec<String> = job
        .out
        .iter()
        .filter_map(|l| field(l, "rendezvous"))
        .collect();
    assert!(
        rdv.len() == 2 && rdv.iter().all(|r| r.starts_with("127.0.0.1:")),
        "{rdv:?}"
    );
}

/// A hostfile naming this host twice, as two hosts: `127.0.0.1` (`slots` ranks) and
/// `USER@localhost` (one rank), both reaching the private sshd.
fn two_names_for_this_host(dir: &TempDir, slots: usize) -> PathBuf {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_else(|| "root".into())
        });
    hostfile(dir, &format!("127.0.0.1 slots={slots}\n{user}@localhost\n"))
}

#[test]
fn ssh_ranks_get_torchruns_variables() {
    let dir = TempDir::new("ssh-torchrun");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = two_names_for_this_host(&dir, 2);
    let mut args = vec!["--output-on-all-devices", "--", PROBE, "--rendezvous"];
    for var in TORCHRUN_VARIABLES {
        args.extend(["--env", var]);
    }
    let mut job = ssh_job(&sshd, &hf, &args);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let seen = env_by_rank(&job, 3);
    let port = seen[0]["MASTER_PORT"].clone();
    assert!(port.parse::<u16>().is_ok(), "{port}");
    assert_ne!(seen[0]["rendezvous"], format!("127.0.0.1:{port}"));
    let row = |r: usize| -> Vec<&str> {
        TORCHRUN_VARIABLES
            .iter()
            .map(|v| seen[r][*v].as_str())
            .collect()
    };
    assert_eq!(
        row(0),
        ["0", "3", "0", "2", "0", "127.0.0.1", port.as_str()]
    );
    assert_eq!(
        row(1),
        ["1", "3", "1", "2", "0", "127.0.0.1", port.as_str()]
    );
    assert_eq!(
        row(2),
        ["2", "3", "0", "1", "1", "127.0.0.1", port.as_str()]
    );
}

/// `PROBE --gpi2`'s view of each rank, by rank: (socket, host, master, mfile).
fn gpi2_views(job: &Job, nranks: usize) -> Vec<(String, String, String, String)> {
    let mut views = vec![Default::default(); nranks];
    for line in job
        .out
        .iter()
        .filter_map(|l| l.split_once("] gpi2 ").map(|(_, v)| v))
    {
        let f = |k: &str| field(line, k).unwrap_or_default();
        let rank: usize = f("rank").parse().unwrap();
        views[rank] = (f("socket"), f("host"), f("master"), f("mfile"));
    }
    views
}

#[test]
fn ssh_ranks_see_the_job_as_gaspi_run_shows_it_to_a_gpi2_program() {
    let dir = TempDir::new("ssh-gpi2");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let two_hosts = two_names_for_this_host(&dir, 2);
    // A GPI-2 machine file: a line per rank.
    let machines = dir.path().join("machines");
    std::fs::write(&machines, "127.0.0.1\n127.0.0.1\nlocalhost\n").unwrap();
    let (a, b) = ("127.0.0.1", "localhost");
    for (hosts_flag, hosts, map_by, expected) in [
        ("--hostfile", &two_hosts, "slot", [(0, a), (1, a), (0, b)]),
        ("-m", &machines, "slot", [(0, a), (1, a), (0, b)]),
        ("--hostfile", &two_hosts, "node", [(0, a), (0, b), (1, a)]),
    ] {
        let run = TempDir::new("sshrun");
        let mut cmd = tarantella(run.path());
        cmd.env(tnt_env::SSH, &sshd.ssh)
            .arg(hosts_flag)
            .arg(hosts)
            .args([
                "--map-by",
                map_by,
                "--output-on-all-devices",
                "--",
                PROBE,
                "--rendezvous",
                "--gpi2",
            ]);
        let mut job = Job::spawn(cmd, run);
        let what = format!("{hosts_flag} --map-by {map_by}");
        assert!(job.wait(LIMIT).success(), "{what}: {}", job.stderr_text());
        let views = gpi2_views(&job, 3);
        let seen: Vec<(usize, &str)> = views
            .iter()
            .map(|(socket, host, _, _)| (socket.parse().unwrap(), host.as_str()))
            .collect();
        assert_eq!(seen, expected, "{what}: {:?}", job.out);
        for (_, _, master, mfile) in &views {
            assert_eq!(master, a, "{what}");
            // Each rank's wrapper wrote its own copy, and removed it when the rank ended.
            assert!(mfile.contains("-machines."), "{what}: {mfile}");
            assert!(!Path::new(mfile).exists(), "{what}: {mfile} left behind");
        }
    }
}

/// SIGINT and SIGQUIT are at their default action in an ssh rank, as in a local one (and
/// under mpirun or srun). The wrapper's shell starts the rank as a background job, which a
/// shell without job control starts with both ignored; a Python rank would then never raise
/// `KeyboardInterrupt`.
#[test]
fn ssh_ranks_start_with_sigint_and_sigquit_at_their_default_action() {
    let program = ["grep", "SigIgn", "/proc/self/status"];
    let Some(job) = two_ssh_ranks_of("ssh-sigint", &program) else {
        return;
    };
    let ignored: Vec<u64> = job
        .out
        .iter()
        .filter_map(|l| l.split("SigIgn:").nth(1))
        .map(|mask| u64::from_str_radix(mask.trim(), 16).expect("a hexadecimal mask"))
        .collect();
    assert_eq!(ignored.len(), 2, "one mask per rank: {:?}", job.out);
    // Bit N - 1 stands for signal N: SIGINT is 2, SIGQUIT 3.
    for mask in ignored {
        assert_eq!(
            mask & 0b110,
            0,
            "SIGINT or SIGQUIT ignored: SigIgn {mask:#x}"
        );
    }
}
