//! Hosts that ssh cannot reach, all on loopback: a port nothing listens on, and a private
//! `sshd` that does not know the key. The launcher names the host and says that ssh could
//! not reach it, with ssh's own reason, instead of reporting a failed rank. The tests with
//! the private `sshd` are skipped (with the reason printed) when it is missing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::sshd::*;
use common::*;

const LIMIT: Duration = Duration::from_secs(90);

/// A port on 127.0.0.1 that nothing listens on (the kernel's choice, released at once).
fn closed_port() -> u16 {
    free_port()
}

/// `tarantella ARGS` with `ssh` as its ssh command and nothing else of this shell's ssh
/// settings.
fn job_with_ssh(ssh: &str, args: &[&str]) -> Job {
    let run = TempDir::new("sshfail-run");
    let mut cmd = tarantella(run.path());
    cmd.env(tnt_env::SSH, ssh).args(args);
    Job::spawn(cmd, run)
}

/// Options that keep ssh off this user's own configuration, known hosts and keys.
const PRIVATE: &str = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
                       -o IdentitiesOnly=yes -o LogLevel=ERROR";

fn ssh_installed() -> bool {
    let found = Command::new("ssh").arg("-V").output().is_ok();
    if !found {
        println!("SKIPPED: no ssh client");
    }
    found
}

/// Asserts that `job` failed because `host` could not be reached by ssh, and that ssh's own
/// reason (`said`) is in the report.
fn assert_unreachable(job: &mut Job, host: &str, said: &str) -> String {
    let status = job.wait(LIMIT);
    let err = job.stderr_text();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "host {host} could not be reached by ssh (status 255)"
        )),
        "{err}"
    );
    assert!(err.contains(said), "ssh's reason {said:?} missing: {err}");
    // Nothing of the job got there: no cleanup is attempted on it (it would fail again).
    assert!(!err.contains("not removed"), "{err}");
    err
}

#[test]
fn rank_0s_host_where_nothing_listens_is_unreachable_by_ssh() {
    if !ssh_installed() {
        return;
    }
    let port = closed_port();
    let ssh = format!("ssh -F /dev/null -p {port} {PRIVATE}");
    let mut job = job_with_ssh(&ssh, &["-H", "127.0.0.1:2", "--", PROBE, "--sleep"]);
    let err = assert_unreachable(
        &mut job,
        "127.0.0.1",
        &format!("port {port}: Connection refused"),
    );
    assert!(
        !err.contains("no free port"),
        "an unreachable host is not a lack of ports: {err}"
    );
}

/// An ssh configuration in `dir` under which `unreachable` is 127.0.0.1 on a port nothing
/// listens on, and every other host is 127.0.0.1 at `sshd`'s port with the key it knows.
fn config_with_an_unreachable_host(dir: &TempDir, sshd_port: u16, closed: u16) -> PathBuf {
    let config = dir.path().join("ssh_config");
    std::fs::write(
        &config,
        format!(
            "Host unreachable\n  HostName 127.0.0.1\n  Port {closed}\n\
             Host *\n  Port {sshd_port}\n  IdentityFile {}\n",
            dir.path().join("userkey").display()
        ),
    )
    .unwrap();
    config
}

fn start_loopback_sshd(dir: &TempDir) -> Option<(Sshd, u16)> {
    let port = free_port();
    match start_sshd(dir.path(), "127.0.0.1", port, None) {
        Ok(sshd) => Some((sshd, port)),
        Err(why) => {
            println!("SKIPPED: {why}");
            None
        }
    }
}

#[test]
fn another_rank_whose_host_is_unreachable_is_reported_as_that_host() {
    let dir = TempDir::new("sshfail-rank");
    let Some((_sshd, sshd_port)) = start_loopback_sshd(&dir) else {
        return;
    };
    let closed = closed_port();
    let config = config_with_an_unreachable_host(&dir, sshd_port, closed);
    let ssh = format!("ssh -F {} {PRIVATE}", config.display());
    let hosts = hostfile(&dir, "127.0.0.1 slots=1\nunreachable slots=1\n");
    let hosts = hosts.to_str().unwrap();
    let mut job = job_with_ssh(&ssh, &["--hostfile", hosts, "--", PROBE, "--sleep"]);
    let err = assert_unreachable(
        &mut job,
        "unreachable",
        &format!("so rank 1 did not start: ssh: connect to host 127.0.0.1 port {closed}: Connection refused"),
    );
    assert!(!err.contains("(first failure)"), "{err}");
}

#[test]
fn a_key_the_host_does_not_accept_is_reported_as_an_ssh_failure() {
    let dir = TempDir::new("sshfail-auth");
    let Some((_sshd, sshd_port)) = start_loopback_sshd(&dir) else {
        return;
    };
    // A key of its own, not in the sshd's authorized_keys.
    let stranger = dir.path().join("strangerkey");
    keygen(&stranger).unwrap();
    let ssh = ssh_with_key(sshd_port, &stranger);
    let mut job = job_with_ssh(&ssh, &["-H", "127.0.0.1:2", "--", PROBE, "--sleep"]);
    assert_unreachable(&mut job, "127.0.0.1", "Permission denied (publickey)");
}

fn ssh_with_key(port: u16, key: &Path) -> String {
    format!("ssh -F /dev/null -p {port} -i {} {PRIVATE}", key.display())
}
