//! The run directory of a job: `<base>/<job-id>/` holding the job record (`job`), the PIDs
//! of its ranks (`pids`, removed once the job is torn down), the machine file of its local
//! ranks (`machines`, GPI-2's `GASPI_MFILE`, removed with the job) and the per-rank log
//! files.
//!
//! `<base>` is `$TARANTELLA_RUN_DIR`, else `$XDG_RUNTIME_DIR/tarantella`, else
//! `/tmp/tarantella-<uid>`. Slurm jobs are the exception (see [`Layout::slurm`]): their
//! ranks write their logs on their own nodes, so the run directory must be on a file
//! system every node shares.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The machine file in a run directory: one host per rank, in rank order (`GASPI_MFILE`).
pub const MACHINE_FILE: &str = "machines";

/// Where run directories live.
pub fn base() -> PathBuf {
    if let Some(d) = std::env::var_os(tnt_env::RUN_DIR).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        if Path::new(&d).is_dir() {
            return Path::new(&d).join("tarantella");
        }
    }
    PathBuf::from(format!("/tmp/tarantella-{}", nix::unistd::getuid()))
}

/// Where the run directories of jobs go: `<root>/<prefix><job-id>/`. The prefix keeps run
/// directories apart from whatever else a shared root (the Slurm submit directory) holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The directory that holds the run directories.
    pub root: PathBuf,
    /// Put before the job id in a run directory's name: empty, except in a Slurm submit
    /// directory ([`SLURM_PREFIX`]).
    pub prefix: &'static str,
}

/// Set by Slurm to the directory a job was submitted from, where its users look for its
/// output.
const SLURM_SUBMIT_DIR: &str = "SLURM_SUBMIT_DIR";

/// The prefix of run directories in a Slurm submit directory.
pub const SLURM_PREFIX: &str = "tarantella-";

impl Layout {
    /// Local and ssh jobs: `<base>/<job-id>/`, on the launcher's host.
    pub fn on_this_host() -> Layout {
        Layout {
            root: base(),
            prefix: "",
        }
    }

    /// Slurm jobs: `$TARANTELLA_RUN_DIR/<job-id>/` when set, else
    /// `$SLURM_SUBMIT_DIR/tarantella-<job-id>/` (the submit directory is where sbatch and
    /// srun users look for output, and is normally shared by the nodes).
    pub fn slurm() -> Layout {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Layout::slurm_from(var(tnt_env::RUN_DIR), var(SLURM_SUBMIT_DIR))
    }

    /// [`Layout::slurm`] from the two variables' values. Without either, the run directory
    /// stays on the launcher's host, as for local jobs: the ranks on other nodes then keep
    /// their logs in the same path on their own node.
    pub fn slurm_from(
        run_dir: Option<std::ffi::OsString>,
        submit_dir: Option<std::ffi::OsString>,
    ) -> Layout {
        match (run_dir, submit_dir) {
            (Some(root), _) => Layout {
                root: PathBuf::from(root),
                prefix: "",
            },
            (None, Some(submit)) => Layout {
                root: PathBuf::from(submit),
                prefix: SLURM_PREFIX,
            },
            (None, None) => Layout::on_this_host(),
        }
    }

    /// The run directory of job `job_id`.
    pub fn job_dir(&self, job_id: &str) -> PathBuf {
        self.root.join(format!("{}{job_id}", self.prefix))
    }
}

/// This host's name, as the job record gives it.
pub fn this_host() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A process recorded for a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidRecord {
    /// The rank the process runs (or, for an ssh client, connects to).
    pub rank: usize,
    /// `None`: a process on the launcher's host (a local rank or an ssh client).
    pub host: Option<String>,
    /// The PID, which is also the process-group id of the rank's subtree.
    pub pid: i32,
}

/// What the `job` file records.
#[derive(Clone, Debug, Default)]
pub struct JobRecord {
    /// The PID of the job's `tarantella`, which `--cleanup` leaves alone while it runs.
    pub supervisor: Option<i32>,
    /// The host `supervisor` runs on: run directories may be on a file system that other
    /// hosts share (the Slurm submit directory), where a PID says nothing by itself.
    pub host: Option<String>,
    /// The ssh command the job used, for `--cleanup` to reach its hosts the same way.
    pub ssh: Vec<String>,
    /// The processes the job started, as far as they were recorded.
    pub pids: Vec<PidRecord>,
}

/// An open run directory.
pub struct JobDir {
    /// The run directory.
    pub path: PathBuf,
    pids: File,
}

fn rd_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::RunDir {
        path: path.to_path_buf(),
        source,
    }
}

/// The exit record `status-K` of a failed rank under Slurm (written by the rank's wrapper).
pub const STATUS_PREFIX: &str = "status-";

/// The file that marks a directory as a run directory; it holds the directory's own name.
pub const RUN_MARKER: &str = ".tarantella-run";

impl JobDir {
    /// Creates the directory and the job record.
    pub fn create(path: &Path, ssh: &[String]) -> Result<JobDir> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(rd_err(path))?;
        // A run under the same `--job-id` before this one may have left its ranks' exit
        // records (Slurm mode): they must not be taken for this run's.
        for e in fs::read_dir(path).map_err(rd_err(path))?.flatten() {
            if e.file_name().to_string_lossy().starts_with(STATUS_PREFIX) {
                fs::remove_file(e.path()).map_err(rd_err(path))?;
            }
        }
        let mut job = String::new();
        job += &format!("supervisor={}\n", std::process::id());
        job += &format!("host={}\n", this_host());
        job += &format!("ssh={}\n", crate::shell::join(ssh)?);
        fs::write(path.join("job"), job).map_err(rd_err(path))?;
        // Names the directory as a run directory of this job for `--keep-runs`, which must
        // never take a user's directory of similar files (a `logs/` under a run-dir root) for
        // one. Kept with the logs; goes with the directory.
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        fs::write(path.join(RUN_MARKER), name.unwrap_or_default()).map_err(rd_err(path))?;
        let pids = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path.join("pids"))
            .map_err(rd_err(path))?;
        Ok(JobDir {
            path: path.to_path_buf(),
            pids,
        })
    }

    /// Appends one PID record (written through at once: `--cleanup` may need it).
    pub fn record(&mut self, rec: &PidRecord) -> Result<()> {
        let host = rec.host.as_deref().unwrap_or("-");
        writeln!(self.pids, "{} {} {}", rec.rank, host, rec.pid).map_err(|source| {
            Error::PidRecord {
                rank: rec.rank,
                path: self.path.join("pids"),
                source,
            }
        })
    }

    /// Writes the machine file (`lines`, one per rank) and returns its path.
    pub fn write_machine_file(&self, lines: &[String]) -> Result<PathBuf> {
        let path = self.path.join(MACHINE_FILE);
        let mut text = lines.join("\n");
        text.push('\n');
        fs::write(&path, text).map_err(rd_err(&self.path))?;
        Ok(path)
    }

    /// Log file of a rank whose output is not shown.
    pub fn log_path(&self, rank: usize) -> PathBuf {
        self.path.join(format!("rank-{rank}.log"))
    }

    /// Marks the job as torn down: nothing is left for `--cleanup`.
    pub fn finish(&self) {
        let _ = fs::remove_file(self.path.join("pids"));
        let _ = fs::remove_file(self.path.join("job"));
        let _ = fs::remove_file(self.path.join(MACHINE_FILE));
        // Keep the directory (and its marker) only when it holds rank logs.
        let only_marker = fs::read_dir(&self.path)
            .map(|mut d| d.all(|e| e.is_ok_and(|e| e.file_name() == RUN_MARKER)))
            .unwrap_or(false);
        if only_marker {
            let _ = fs::remove_file(self.path.join(RUN_MARKER));
            let _ = fs::remove_dir(&self.path);
        }
    }
}

/// Reads a job's record; `None` when the job was torn down (or never recorded).
pub fn read(path: &Path) -> Result<Option<JobRecord>> {
    let job = match fs::read_to_string(path.join("job")) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(rd_err(path)(e)),
    };
    let mut rec = JobRecord::default();
    for line in job.lines() {
        if let Some(v) = line.strip_prefix("supervisor=") {
            rec.supervisor = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("host=") {
            rec.host = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("ssh=") {
            rec.ssh = crate::shell::split(v)?;
        }
    }
    let pids = fs::read_to_string(path.join("pids")).unwrap_or_default();
    for line in pids.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if let [rank, host, pid] = w[..] {
            if let (Ok(rank), Ok(pid)) = (rank.parse(), pid.parse::<i32>()) {
                if pid > 1 {
                    rec.pids.push(PidRecord {
                        rank,
                        host: (host != "-").then(|| host.to_string()),
                        pid,
                    });
                }
            }
        }
    }
    Ok(Some(rec))
}

/// Job ids with a record under `base`.
pub fn list_jobs(base: &Path) -> Vec<String> {
    let mut ids: Vec<String> = fs::read_dir(base)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().join("job").is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_rank_logs_go_to_the_submit_directory_unless_a_run_dir_is_set() {
        let set = |v: &str| Some(std::ffi::OsString::from(v));
        let submit = Layout::slurm_from(None, set("/home/u/exp"));
        assert_eq!(submit.job_dir("j1"), Path::new("/home/u/exp/tarantella-j1"));
        let chosen = Layout::slurm_from(set("/shared/runs"), set("/home/u/exp"));
        assert_eq!(chosen.job_dir("j1"), Path::new("/shared/runs/j1"));
        assert_eq!(Layout::slurm_from(None, None), Layout::on_this_host());
    }

    #[test]
    fn record_and_read_back() {
        let dir = std::env::temp_dir().join(format!("tnt-rundir-test-{}", std::process::id()));
        let ssh = vec!["ssh".to_string(), "-p".into(), "2222".into()];
        let mut jd = JobDir::create(&dir.join("j1"), &ssh).unwrap();
        let a = PidRecord {
            rank: 0,
            host: None,
            pid: 1234,
        };
        let b = PidRecord {
            rank: 1,
            host: Some("node2".into()),
            pid: 99,
        };
        jd.record(&a).unwrap();
        jd.record(&b).unwrap();
        let machines = jd
            .write_machine_file(&["n1".into(), "n1".into(), "n2".into()])
            .unwrap();
        assert_eq!(machines, dir.join("j1").join(MACHINE_FILE));
        assert_eq!(fs::read_to_string(&machines).unwrap(), "n1\nn1\nn2\n");
        let rec = read(&dir.join("j1")).unwrap().unwrap();
        assert_eq!(rec.supervisor, Some(std::process::id() as i32));
        assert_eq!(rec.host, Some(this_host()));
        assert_eq!(rec.ssh, ssh);
        assert_eq!(rec.pids, vec![a, b]);
        assert_eq!(list_jobs(&dir), vec!["j1".to_string()]);
        jd.finish();
        assert!(read(&dir.join("j1")).unwrap().is_none());
        assert!(!machines.exists());
        assert!(
            !dir.join("j1").exists(),
            "nothing but rank logs keeps the directory"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A second run under the same `--job-id` (Slurm mode, where ranks leave `status-K`
    /// files) must not report the first run's failed rank.
    #[test]
    fn a_new_run_drops_the_exit_records_of_an_earlier_one() {
        let dir = std::env::temp_dir().join(format!("tnt-rundir-status-{}", std::process::id()));
        let job = dir.join("exp");
        fs::create_dir_all(&job).unwrap();
        fs::write(job.join("status-3"), "7 nodeB\n").unwrap();
        fs::write(job.join("rank-0.log"), "kept\n").unwrap();
        let jd = JobDir::create(&job, &[]).unwrap();
        assert!(!job.join("status-3").exists());
        assert!(job.join("rank-0.log").exists());
        assert_eq!(crate::spawn::slurm::first_failure(&job), None);
        drop(jd);
        fs::remove_dir_all(&dir).unwrap();
    }
}
