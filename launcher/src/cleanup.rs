//! `--cleanup`: stop a job's leftover processes by their recorded PIDs (checked against the
//! job id in their environment, so a reused PID is never hit) and remove its shared memory
//! and machine files.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::cli::Cli;
use crate::error::{Error, Result};
use crate::job_id;
use crate::rundir;
use crate::shell;

/// Runs `--cleanup`; returns tarantella's exit status.
pub fn run(cli: &Cli) -> Result<i32> {
    let base = rundir::base();
    let ids = match &cli.job_id {
        Some(id) => vec![job_id::validate(id)?],
        None => rundir::list_jobs(&base),
    };
    if ids.is_empty() {
        out!("tarantella: no recorded jobs under {}", base.display());
    }
    let grace = Duration::from_secs_f64(cli.grace.clamp(0.0, 600.0));
    for id in &ids {
        let dir = base.join(id);
        let Some(rec) = rundir::read(&dir)? else {
            if cli.job_id.is_some() && !dir.is_dir() {
                return Err(Error::UnknownJob(id.clone()));
            }
            remove_local_shm(id);
            out!("tarantella: job {id} was already torn down");
            continue;
        };
        if let Some(sup) = rec.supervisor.filter(|&p| is_tarantella(p)) {
            if !cli.force {
                if cli.job_id.is_some() {
                    return Err(Error::JobStillRunning {
                        job: id.clone(),
                        pid: sup,
                    });
                }
                out!("tarantella: job {id} is still running (tarantella pid {sup}); skipped");
                continue;
            }
            let _ = kill(Pid::from_raw(sup), Signal::SIGTERM);
        }
        let first = if cli.force {
            Signal::SIGKILL
        } else {
            Signal::SIGTERM
        };
        let local: Vec<i32> = rec
            .pids
            .iter()
            .filter(|r| r.host.is_none())
            .map(|r| r.pid)
            .collect();
        let stopped = stop_local_groups(id, &local, first, grace);
        let mut hosts: Vec<&str> = rec.pids.iter().filter_map(|r| r.host.as_deref()).collect();
        hosts.sort();
        hosts.dedup();
        for h in &hosts {
            let groups: Vec<i32> = rec
                .pids
                .iter()
                .filter(|r| r.host.as_deref() == Some(*h))
                .map(|r| r.pid)
                .collect();
            let script = remote_script(id, &groups, first, grace);
            let done = shell::join(&["sh".to_string(), "-c".into(), script])
                .map_err(|e| e.to_string())
                .and_then(|cmd| {
                    let limit = grace + Duration::from_secs(30);
                    crate::spawn::ssh::run_remote(&rec.ssh, h, &cmd, limit)
                        .map_err(|e| e.to_string())
                });
            if let Err(e) = done {
                say!("tarantella: warning: cleanup on {h} failed: {e}");
            }
        }
        remove_local_shm(id);
        let _ = std::fs::remove_file(dir.join("pids"));
        let _ = std::fs::remove_file(dir.join("job"));
        let _ = std::fs::remove_file(dir.join(rundir::MACHINE_FILE));
        out!(
            "tarantella: job {id}: stopped {stopped} local process(es), cleaned {} remote host(s)",
            hosts.len()
        );
    }
    Ok(0)
}

/// Removes `/dev/shm/tnt-<job>-*` on this host.
pub fn remove_local_shm(job_id: &str) {
    gaspi::env::remove_job_shm_files(job_id);
}

/// Whether `pid` is a running `tarantella`.
pub(crate) fn is_tarantella(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "tarantella")
}

/// PIDs on this host in one of `groups` that carry this job's id in their environment.
pub(crate) fn job_processes(job_id: &str, groups: &[i32]) -> Vec<i32> {
    let marks = [
        format!("{}={job_id}", tnt_env::JOB_ID),
        format!("{}={job_id}", gaspi::env::JOB_ID),
    ];
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Fields after the command name `(...)`: state, ppid, pgrp, ...
            let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
            let mut f = after.split_whitespace();
            let state = f.next().unwrap_or("");
            let pgrp = f.nth(1).and_then(|g| g.parse::<i32>().ok());
            state != "Z" && pgrp.is_some_and(|g| groups.contains(&g)) && has_mark(pid, &marks)
        })
        .collect()
}

fn has_mark(pid: i32, marks: &[String]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        env.split(|&b| b == 0)
            .any(|kv| marks.iter().any(|m| kv == m.as_bytes()))
    })
}

/// Signals the job's processes in `groups`, then SIGKILLs what is left after `grace`.
fn stop_local_groups(job_id: &str, groups: &[i32], first: Signal, grace: Duration) -> usize {
    let procs = job_processes(job_id, groups);
    for &p in &procs {
        let _ = kill(Pid::from_raw(p), first);
    }
    let deadline = Instant::now() + grace;
    while !job_processes(job_id, groups).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in job_processes(job_id, groups) {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
    procs.len()
}

/// The same, as a shell script for another host (`pgrep -g` lists a process group).
fn remote_script(job_id: &str, groups: &[i32], first: Signal, grace: Duration) -> String {
    let groups = groups
        .iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let sig = &first.as_str()[3..];
    format!(
        "id={job_id}; s() {{ for g in {groups}; do for p in $(pgrep -g \"$g\"); do \
         tr '\\0' '\\n' </proc/$p/environ 2>/dev/null | grep -qxF \"{}=$id\" && kill -$1 $p; \
         done; done; }}; s {sig}; sleep {}; s KILL; {}; true",
        gaspi::env::JOB_ID,
        grace.as_secs_f64(),
        crate::spawn::ssh::leftovers_rm_command(job_id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_script_names_groups_and_job() {
        let s = remote_script("j1", &[10, 20], Signal::SIGTERM, Duration::from_secs(2));
        assert!(s.contains("for g in 10 20"));
        assert!(s.contains("s TERM"));
        assert!(s.contains("rm -f /dev/shm/tnt-j1-[0-9a-f][0-9a-f]"));
        assert!(
            s.contains("\"${TMPDIR:-/tmp}\"/tnt-j1-machines.??????"),
            "{s}"
        );
    }
}
