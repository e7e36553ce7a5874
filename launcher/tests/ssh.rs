//! `tarantella --hostfile` through a private `sshd` on 127.0.0.1, and across two network
//! namespaces joined by a veth pair. Skipped (with the reason printed) when `sshd` or the
//! permissions are missing.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::sshd::*;
use common::*;
use gaspi::testing::TwoHosts;
use nix::sys::signal::Signal;

const LIMIT: Duration = Duration::from_secs(90);

#[test]
fn ssh_ranks_on_loopback_get_the_environment() {
    let dir = TempDir::new("ssh1");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "# private sshd\n127.0.0.1 slots=3\n");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "-x",
            "TNT_X=a b",
            "-x",
            "CUDA_VISIBLE_DEVICES=3,5",
            "--",
            PROBE,
            "--rendezvous",
            "--env",
            "TNT_X",
            "--env",
            "CUDA_VISIBLE_DEVICES",
        ],
    );
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    job.assert_rendezvous_ok(3);
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.ends_with("env TNT_X=a b"))
            .count(),
        3
    );
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.ends_with("env CUDA_VISIBLE_DEVICES=3,5"))
            .count(),
        3,
        "-x CUDA_VISIBLE_DEVICES reaches every remote rank unchanged: {:?}",
        job.out
    );
    for r in 0..3 {
        assert!(job
            .out
            .iter()
            .any(|l| l.starts_with(&format!("[rank {r}] probe rank={r} "))));
    }
}

#[test]
fn ssh_failure_and_ctrl_c_tear_everything_down() {
    let dir = TempDir::new("ssh2");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");

    let id = job_id("sshfail");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--job-id",
            &id,
            "--",
            PROBE,
            "--touch-shm",
            "--child",
            "--rendezvous",
            "--fail-rank",
            "1:3",
            "--sleep",
        ],
    );
    let st = job.wait(LIMIT);
    assert_eq!(st.code(), Some(3), "{}", job.stderr_text());
    let err = job.stderr_text();
    assert!(
        err.contains("rank 1 on 127.0.0.1 exited with status 3"),
        "{err}"
    );
    let pids = pids_of(&job);
    assert_eq!(pids.len(), 4, "{:?}", job.out);
    assert_torn_down(&pids, &id, Duration::from_secs(5));

    let id = job_id("sshint");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--job-id",
            &id,
            "--",
            PROBE,
            "--touch-shm",
            "--child",
            "--sleep",
        ],
    );
    job.wait_lines("probe ready", 2, LIMIT);
    signal(job.child.id(), Signal::SIGINT);
    assert_eq!(job.wait(LIMIT).code(), Some(130), "{}", job.stderr_text());
    assert_eq!(
        wait_dead(&pids_of(&job), Duration::from_secs(5)),
        Vec::<i32>::new(),
        "left behind"
    );
    assert!(shm_files(&id).is_empty());
}

/// Rank 1 leaves a process in a session of its own that holds its output, then fails: the
/// failure is known from the wrapper's report and stops the job at once (before, the job
/// waited for the ssh session to close, which that process kept open for its minute).
#[test]
fn an_ssh_rank_that_fails_is_not_held_up_by_a_detached_child() {
    let dir = TempDir::new("ssh-detached");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");
    let started = std::time::Instant::now();
    let rank = "if [ \"$RANK\" = 1 ]; then setsid sleep 60 & echo detached=$!; exit 3; fi; \
                exec sleep 60";
    let mut job = ssh_job(
        &sshd,
        &hf,
        &["--output-on-all-devices", "--", "sh", "-c", rank],
    );
    let st = job.wait(LIMIT);
    let took = started.elapsed();
    let detached: Vec<i32> = job
        .out
        .iter()
        .filter_map(|l| field(l, "detached"))
        .map(|p| p.parse().unwrap())
        .collect();
    for &pid in &detached {
        signal(pid as u32, Signal::SIGKILL);
    }
    assert_eq!(st.code(), Some(3), "{}", job.stderr_text());
    assert_eq!(detached.len(), 1, "{:?}", job.out);
    assert!(
        took < Duration::from_secs(30),
        "took {took:?}: {}",
        job.stderr_text()
    );
}

#[test]
fn ssh_ranks_stop_when_tarantella_dies_and_cleanup_removes_shm() {
    let dir = TempDir::new("ssh3");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");
    let id = job_id("sshkill");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--job-id",
            &id,
            "--",
            PROBE,
            "--touch-shm",
            "--child",
            "--sleep",
        ],
    );
    job.wait_lines("probe ready", 2, LIMIT);
    let pids = pids_of(&job);
    signal(job.child.id(), Signal::SIGKILL);
    job.wait(LIMIT);
    // The ssh connections close, and the remote wrappers stop their ranks.
    assert_eq!(
        wait_dead(&pids, Duration::from_secs(15)),
        Vec::<i32>::new(),
        "left behind"
    );
    assert_eq!(shm_files(&id).len(), 2);
    let out = tarantella(job.run_dir.path())
        .env(tnt_env::SSH, &sshd.ssh)
        .args(["--cleanup", "--job-id", &id, "--grace", "0.5"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shm_files(&id).is_empty());
}

/// Two network namespaces joined by a veth pair, an sshd in each; deleted on drop (the
/// sshds first: fields drop in order).
struct Namespaces {
    sshds: Vec<Sshd>,
    hosts: TwoHosts,
}

fn namespaces(dir: &TempDir) -> Result<Namespaces, String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("network namespaces need root".into());
    }
    let hosts = TwoHosts::create("s")?;
    let mut sshds = Vec::new();
    for (h, addr) in TwoHosts::ADDRESSES.iter().enumerate() {
        sshds.push(start_sshd(
            dir.path(),
            &addr.to_string(),
            2222,
            Some(hosts.name(h)),
        )?);
    }
    Ok(Namespaces { sshds, hosts })
}

#[test]
fn ranks_in_two_network_namespaces() {
    let dir = TempDir::new("netns");
    if !Path::new(SSHD).exists() {
        println!("SKIPPED: {SSHD} is not installed (apt-get install openssh-server)");
        return;
    }
    let addrs = TwoHosts::ADDRESSES.map(|a| a.to_string());
    let ns = match namespaces(&dir) {
        Ok(ns) => ns,
        Err(why) => {
            println!("SKIPPED: network namespaces not available: {why}");
            return;
        }
    };
    let hf = hostfile(
        &dir,
        &format!("{} slots=1\n{} slots=1\n", addrs[0], addrs[1]),
    );
    let run = TempDir::new("netnsrun");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns.hosts.name(0), TARANTELLA])
        .env(tnt_env::RUN_DIR, run.path())
        .env(tnt_env::SSH, &ns.sshds[0].ssh)
        .env_remove("SLURM_JOB_ID")
        .arg("--hostfile")
        .arg(&hf)
        .args(["--output-on-all-devices", "--", PROBE, "--rendezvous"]);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    job.assert_rendezvous_ok(2);
    let nets: Vec<String> = job
        .out
        .iter()
        .filter(|l| l.contains("probe rank="))
        .filter_map(|l| field(l, "netns"))
        .collect();
    assert_eq!(nets.len(), 2);
    assert_ne!(
        nets[0], nets[1],
        "ranks should run in different network namespaces"
    );
    let rdv: Vec<String> = job
        .out
        .iter()
        .filter_map(|l| field(l, "rendezvous"))
        .collect();
    assert!(
        rdv.iter().all(|r| r.starts_with(&format!("{}:", addrs[0]))),
        "{rdv:?}"
    );
    drop(ns);
}

#[test]
fn ssh_ranks_get_the_job_token_without_it_showing_on_any_command_line() {
    let dir = TempDir::new("ssh4");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--",
            PROBE,
            "--rendezvous",
            "--token-on-cmdlines",
        ],
    );
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    // Both ranks hold the launcher's token (not one derived from the job id) and presented
    // it to each other; meanwhile their ssh clients, remote shells and wrappers were alive,
    // and none showed it on its command line.
    job.assert_rendezvous_ok(2);
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
