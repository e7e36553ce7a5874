//! What a job leaves behind on this host: its processes (found by the job id in their
//! environment, as `tarantella --cleanup` finds them, but in any process group), its
//! shared-memory files (`/dev/shm/tnt-<job>-*`) and its job record (the `job` and `pids`
//! files `tarantella` removes once the job is torn down).

use std::path::Path;
use std::time::{Duration, Instant};

/// One process that carries a job's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    /// Its PID.
    pub pid: i32,
    /// Its command name (`/proc/PID/comm`).
    pub comm: String,
    /// Its state letter from `/proc/PID/stat` (`S`, `R`, `T` for stopped, ...).
    pub state: char,
}

impl std::fmt::Display for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({}, state {})", self.comm, self.pid, self.state)
    }
}

/// Everything left of one job, or of every job whose id starts with a prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Left {
    /// Processes with the job id in `TARANTELLA_JOB_ID` or `GASPI_JOB_ID` (zombies excluded:
    /// they hold nothing but their PID, and their environment can no longer be read).
    pub procs: Vec<Proc>,
    /// Names of files in `/dev/shm` that start with `tnt-<job>-`.
    pub files: Vec<String>,
    /// Job records (`<run dir>/<job>/job` or `pids`) still there.
    pub records: Vec<String>,
}

impl Left {
    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty() && self.files.is_empty() && self.records.is_empty()
    }

    /// A short description: `2 procs [soak-rank(12, state T), ...], 1 file [...], ...`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.procs.is_empty() {
            let p: Vec<String> = self.procs.iter().map(|p| p.to_string()).collect();
            parts.push(format!("{} proc(s) [{}]", p.len(), p.join(", ")));
        }
        if !self.files.is_empty() {
            parts.push(format!(
                "{} shm file(s) [{}]",
                self.files.len(),
                self.files.join(", ")
            ));
        }
        if !self.records.is_empty() {
            parts.push(format!(
                "{} record(s) [{}]",
                self.records.len(),
                self.records.join(", ")
            ));
        }
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join("; ")
        }
    }
}

/// Whether a job id (`JOB` in a `VAR=JOB` entry) is `job`, or starts with `job` when
/// `prefix` (the final sweep over a whole soak run).
fn id_matches(value: &[u8], job: &str, prefix: bool) -> bool {
    if prefix {
        value.starts_with(job.as_bytes())
    } else {
        value == job.as_bytes()
    }
}

/// The processes of this host whose environment names the job (see [`Left::procs`]).
pub fn processes(job: &str, prefix: bool) -> Vec<Proc> {
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let vars: [&[u8]; 2] = [b"TARANTELLA_JOB_ID=", b"GASPI_JOB_ID="];
    let mut out: Vec<Proc> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|&b| b == 0).any(|kv| {
                    vars.iter().any(|v| {
                        kv.strip_prefix(*v)
                            .is_some_and(|val| id_matches(val, job, prefix))
                    })
                })
            })
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            (state != 'Z').then(|| Proc {
                pid,
                comm: comm.trim().to_string(),
                state,
            })
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// Files in `/dev/shm` named `tnt-<job>-*` (`tnt-<job>*` when `prefix`).
pub fn shm_files(job: &str, prefix: bool) -> Vec<String> {
    let start = if prefix {
        format!("tnt-{job}")
    } else {
        format!("tnt-{job}-")
    };
    let mut out: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&start))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The job's record files still in `runs/<job>/`.
pub fn records(runs: &Path, job: &str) -> Vec<String> {
    ["job", "pids"]
        .iter()
        .filter(|f| runs.join(job).join(f).exists())
        .map(|f| format!("{job}/{f}"))
        .collect()
}

/// Every job record under `runs` (the final sweep).
pub fn all_records(runs: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(runs)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .flat_map(|job| records(runs, &job))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// What is left of `job` now.
pub fn now(runs: &Path, job: &str) -> Left {
    Left {
        procs: processes(job, false),
        files: shm_files(job, false),
        records: records(runs, job),
    }
}

/// Makes this process the reaper of the orphans among its descendants: the ranks of a
/// `tarantella` that died are reparented here instead of to PID 1 (which, in a container,
/// may never reap them), and [`reap_orphans`] collects them as init would.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// Reaps every child that has ended, without waiting; returns how many. Call it only while
/// no other thread waits for a child of this process (between jobs, after the launcher was
/// reaped and before the cleanup command starts, or after it ended).
pub fn reap_orphans() -> usize {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let mut n = 0;
    while let Ok(st) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if st == WaitStatus::StillAlive {
            break;
        }
        n += 1;
    }
    n
}

/// Waits, up to `bound`, until the job has no process left (processes of a job whose
/// launcher died are still on their way out: they got SIGTERM from the kernel when it
/// died), reaping orphans meanwhile, then says what is left, with how long it waited and
/// how many orphans it reaped.
pub fn settle(runs: &Path, job: &str, bound: Duration) -> (Left, Duration, usize) {
    let t0 = Instant::now();
    let mut reaped = reap_orphans();
    while !processes(job, false).is_empty() && t0.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(5));
        reaped += reap_orphans();
    }
    reaped += reap_orphans();
    (now(runs, job), t0.elapsed(), reaped)
}

/// The rank PIDs among `pids` that are zombies now: dead, but not reaped by the process
/// that inherited them (none while this process is their subreaper).
pub fn zombies(pids: &[i32]) -> usize {
    pids.iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, a)| a.trim_start().starts_with('Z'))
            })
        })
        .count()
}

/// Removes what the soak run left (the final sweep, after everything else): SIGKILL to the
/// processes, then unlinks the files. Returns what it found.
pub fn sweep(run_prefix: &str, runs: &Path) -> Left {
    let left = Left {
        procs: processes(run_prefix, true),
        files: shm_files(run_prefix, true),
        records: all_records(runs),
    };
    for p in &left.procs {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    for f in &left.files {
        let _ = std::fs::remove_file(Path::new("/dev/shm").join(f));
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_match_whole_or_by_prefix() {
        assert!(id_matches(b"sk1-10", "sk1-10", false));
        assert!(!id_matches(b"sk1-10", "sk1-1", false));
        assert!(id_matches(b"sk1-10", "sk1-", true));
        assert!(!id_matches(b"sk2-10", "sk1-", true));
    }

    #[test]
    fn finds_a_process_by_the_job_id_in_its_environment() {
        let job = format!("soakunit{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("TARANTELLA_JOB_ID", &job)
            .spawn()
            .unwrap();
        // Until `sleep` has exec'd, its environment is this test's.
        let t0 = Instant::now();
        let mut found = processes(&job, false);
        while found.is_empty() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
            found = processes(&job, false);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pid, child.id() as i32);
        assert!(processes(&job, false).is_empty());
        assert!(processes(&format!("{job}x"), false).is_empty());
    }
}
