//! `--keep-runs N`: when a job starts, the run directories of all but the last N jobs are
//! removed, so that rank logs do not pile up without end.
//!
//! Only what is surely a finished job's run directory goes: a directory named like one and
//! marked by tarantella with that name ([`RUN_MARKER`]), holding nothing but the files
//! tarantella writes there, whose job was torn down, or was
//! started on this host and has no live tarantella and no live recorded process here. A job that recorded processes on other hosts
//! and was never torn down keeps its record for `--cleanup`. Files are removed one by one by
//! their known names, never a whole tree, so nothing else under the root can be lost.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::cleanup;
use crate::job_id;
use crate::rundir::{self, Layout, MACHINE_FILE, RUN_MARKER};

/// Removes the run directories under `layout` beyond the `keep` newest, counting and never
/// removing `current` (this job's); returns the ones removed.
pub fn old_runs(layout: &Layout, current: &Path, keep: usize) -> Vec<PathBuf> {
    let mut runs: Vec<(SystemTime, PathBuf, String)> = run_dirs(layout)
        .into_iter()
        .filter(|(_, path, _)| path != current)
        .collect();
    // Newest first; the name decides between equal times, so the order is stable.
    runs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    let mut removed = Vec::new();
    for (_, path, job_id) in runs.into_iter().skip(keep.saturating_sub(1)) {
        if job_may_be_alive(&path, &job_id) {
            continue;
        }
        match remove_run_dir(&path) {
            Ok(()) => removed.push(path),
            Err(e) => say!(
                "tarantella: warning: old run directory {} not removed: {e}",
                path.display()
            ),
        }
    }
    removed
}

/// The run directories under `layout`: (modification time, path, job id).
fn run_dirs(layout: &Layout) -> Vec<(SystemTime, PathBuf, String)> {
    let Ok(entries) = fs::read_dir(&layout.root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let job_id = name.strip_prefix(layout.prefix)?;
            job_id::validate(job_id).ok()?;
            // Not a symbolic link: its target is not ours to judge.
            let meta = fs::symlink_metadata(e.path()).ok()?;
            if !meta.is_dir() || !holds_only_run_files(&e.path()) {
                return None;
            }
            // Marked by tarantella as this very directory (not a user's `logs/` of similar
            // files, nor a run directory renamed to keep it).
            let marker = fs::read_to_string(e.path().join(RUN_MARKER)).ok()?;
            if marker != name {
                return None;
            }
            Some((meta.modified().ok()?, e.path(), job_id.to_string()))
        })
        .collect()
}

/// Whether `name` is a file tarantella writes in a run directory.
fn is_run_file(name: &str) -> bool {
    let numbered = |prefix: &str, suffix: &str| {
        name.strip_prefix(prefix)
            .and_then(|n| n.strip_suffix(suffix))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(name, "job" | "pids" | MACHINE_FILE | RUN_MARKER)
        || numbered("rank-", ".log")
        || numbered("status-", "")
}

/// Whether `dir` holds files, all of them [run files](is_run_file).
fn holds_only_run_files(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    let mut any = false;
    for e in entries {
        let Ok(e) = e else { return false };
        let plain = e.file_type().is_ok_and(|t| t.is_file());
        if !plain || !e.file_name().to_str().is_some_and(is_run_file) {
            return false;
        }
        any = true;
    }
    any
}

/// Whether the job of run directory `dir` may still run, or may have left processes that
/// `--cleanup` needs its record to find. In doubt, yes.
fn job_may_be_alive(dir: &Path, job_id: &str) -> bool {
    let record = match rundir::read(dir) {
        Ok(None) => return false, // torn down: the job record goes last
        Ok(Some(r)) => r,
        Err(_) => return true,
    };
    // Its PIDs mean something on its own host only.
    if record.host.is_none_or(|h| h != rundir::this_host()) {
        return true;
    }
    if record.supervisor.is_none_or(cleanup::is_tarantella) {
        return true;
    }
    if record.pids.iter().any(|p| p.host.is_some()) {
        return true;
    }
    let groups: Vec<i32> = record.pids.iter().map(|p| p.pid).collect();
    !cleanup::job_processes(job_id, &groups).is_empty()
}

/// Removes the run files of `dir`, then `dir` itself (which fails if anything else
/// appeared in it meanwhile).
fn remove_run_dir(dir: &Path) -> std::io::Result<()> {
    for e in fs::read_dir(dir)?.flatten() {
        if e.file_name().to_str().is_some_and(is_run_file) {
            fs::remove_file(e.path())?;
        }
    }
    fs::remove_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tarantellas_own_files_make_a_run_directory() {
        for name in [
            "job",
            "pids",
            "machines",
            "rank-0.log",
            "rank-12.log",
            "status-3",
        ] {
            assert!(is_run_file(name), "{name}");
        }
        for name in [
            "rank-.log",
            "rank-1.txt",
            "status-x",
            "notes.txt",
            "rank-1.log.bak",
        ] {
            assert!(!is_run_file(name), "{name}");
        }
    }

    #[test]
    fn a_directory_with_foreign_files_or_a_foreign_name_is_left_alone() {
        let root = std::env::temp_dir().join(format!("tnt-prune-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let layout = Layout {
            root: root.clone(),
            prefix: rundir::SLURM_PREFIX,
        };
        // (directory, file in it, marker content or none)
        for (dir, file, marker) in [
            ("tarantella-old", "rank-1.log", Some("tarantella-old")),
            ("tarantella-mine", "rank-1.log", Some("tarantella-mine")),
            ("tarantella-data", "results.csv", Some("tarantella-data")),
            ("other", "rank-1.log", Some("other")),
            // A user's directory of similar files: no marker.
            ("tarantella-logs", "rank-1.log", None),
            // A run directory renamed to keep it: its marker names another.
            ("tarantella-best", "rank-1.log", Some("tarantella-old2")),
        ] {
            fs::create_dir_all(root.join(dir)).unwrap();
            fs::write(root.join(dir).join(file), "x").unwrap();
            if let Some(m) = marker {
                fs::write(root.join(dir).join(RUN_MARKER), m).unwrap();
            }
        }
        let current = root.join("tarantella-mine");
        let removed = old_runs(&layout, &current, 1);
        assert_eq!(removed, [root.join("tarantella-old")]);
        assert!(current.is_dir() && root.join("tarantella-data").is_dir());
        assert!(root.join("other").is_dir());
        assert!(root.join("tarantella-logs").is_dir() && root.join("tarantella-best").is_dir());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_job_recorded_on_another_host_is_never_judged_dead_from_here() {
        let root = std::env::temp_dir().join(format!("tnt-prune-host-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let elsewhere = root.join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        // PID 1 is no tarantella here, yet it may be one on the job's own host.
        fs::write(
            elsewhere.join("job"),
            "supervisor=1\nhost=no-such-host.invalid\nssh=\n",
        )
        .unwrap();
        fs::write(elsewhere.join("rank-1.log"), "x").unwrap();
        let layout = Layout {
            root: root.clone(),
            prefix: "",
        };
        assert!(old_runs(&layout, &root.join("current"), 0).is_empty());
        assert!(elsewhere.join("job").is_file());
        fs::remove_dir_all(&root).unwrap();
    }
}
