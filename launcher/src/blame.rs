//! Whom the failure report blames. The rank that exits first with an error is often not
//! the one at fault: when a rank stops making progress (SIGSTOPped, hung, its host
//! unreachable), its peers give up on it (within `--heartbeat-timeout`, when set) and one of
//! them exits first. The report then names the rank that stopped:
//!
//! 1. a local rank with a stopped process in its process group (state `T` or `t` in
//!    `/proc/PID/stat`), seen before the job is torn down; else
//! 2. the rank that the first failed rank's last lines name as failed (gaspi's
//!    `PeerFailed`: `rank R failed (`), provided R was still running at that time.
//!
//! Pure functions over process listings and lines, so they are tested without processes.

use std::path::Path;

/// Why a rank other than the first to exit is blamed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Culprit {
    /// A process of the rank (`pid`) was stopped when the first failure came.
    Stopped {
        /// The rank.
        rank: usize,
        /// Its stopped process.
        pid: i32,
    },
    /// The first failed rank's output names it as failed, and it was still running.
    NamedBy {
        /// The rank.
        rank: usize,
        /// The line that names it.
        line: String,
    },
}

impl Culprit {
    /// The rank blamed.
    pub fn rank(&self) -> usize {
        match self {
            Culprit::Stopped { rank, .. } | Culprit::NamedBy { rank, .. } => *rank,
        }
    }

    /// Why, for the report (after "stopped making progress").
    pub fn why(&self) -> String {
        match self {
            Culprit::Stopped { pid, .. } => format!("its process {pid} was stopped (state T)"),
            Culprit::NamedBy { line, .. } => format!("its peers gave up on it: {line:?}"),
        }
    }
}

/// The state and the process group of a process, from the text of its `/proc/PID/stat`
/// (`pid (comm) S ppid pgrp ...`; `comm` may hold spaces and parentheses).
pub fn state_and_group(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// The stopped processes on this host whose process group is `pgid`, read from `proc`
/// (`/proc`).
pub fn stopped_in_group(proc: &Path, pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(proc.join(pid.to_string()).join("stat"));
            matches!(
                stat.ok().as_deref().and_then(state_and_group),
                Some(('T' | 't', g)) if g == pgid
            )
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// The rank that `lines` (the first failed rank's last lines) name as failed, the last
/// such line winning: gaspi's `PeerFailed` reads `rank R failed (...)`.
pub fn named_failed_rank(lines: &[String]) -> Option<(usize, String)> {
    const MARK: &str = " failed (";
    lines.iter().rev().find_map(|line| {
        let at = line.find(MARK)?;
        let before = line[..at].trim_end();
        let digits = before.rsplit(|c: char| !c.is_ascii_digit()).next()?;
        let rank = digits.parse().ok()?;
        before[..before.len() - digits.len()]
            .ends_with("rank ")
            .then(|| (rank, line.trim().to_string()))
    })
}

/// The culprit, if not the rank `first` that failed first: the first of the `stopped`
/// (rank, pid) pairs, else the rank its `lines` name as failed if it is among `running`.
pub fn culprit(
    first: usize,
    stopped: &[(usize, i32)],
    running: &[usize],
    lines: &[String],
) -> Option<Culprit> {
    if let Some(&(rank, pid)) = stopped.iter().find(|(r, _)| *r != first) {
        return Some(Culprit::Stopped { rank, pid });
    }
    let (rank, line) = named_failed_rank(lines)?;
    (rank != first && running.contains(&rank)).then_some(Culprit::NamedBy { rank, line })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_state_and_group_are_read_past_an_odd_command_name() {
        let stat = "4242 (my (odd) prog) T 4000 4241 4000 0 -1 4194560 1 0";
        assert_eq!(state_and_group(stat), Some(('T', 4241)));
        assert_eq!(state_and_group("1 (init) S 0 1 1"), Some(('S', 1)));
        assert_eq!(state_and_group("garbage"), None);
        assert_eq!(state_and_group("1 (x)"), None);
    }

    #[test]
    fn a_stopped_process_of_this_test_is_found_in_its_group() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let stopped = || stopped_in_group(Path::new("/proc"), pid);
        let running = stopped();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGSTOP,
        )
        .unwrap();
        // The stop takes effect asynchronously: wait for it (bounded by the test harness).
        let _ = nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(pid),
            Some(nix::sys::wait::WaitPidFlag::WUNTRACED),
        );
        let found = stopped();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(running.is_empty(), "{running:?}");
        assert_eq!(found, [pid]);
    }

    #[test]
    fn peer_failed_messages_name_the_rank() {
        let out = lines(&[
            "step 3",
            "Error: barrier: rank 1 failed (connection lost, protocol error, or silent past the heartbeat timeout)",
            "exiting",
        ]);
        let (rank, line) = named_failed_rank(&out).unwrap();
        assert_eq!(rank, 1);
        assert!(line.starts_with("Error: barrier: rank 1 failed"));
        assert_eq!(
            named_failed_rank(&lines(&["rank 12 failed (x)", "rank 3 failed (y)"])),
            Some((3, "rank 3 failed (y)".into()))
        );
        assert_eq!(named_failed_rank(&lines(&["step 12 failed (x)"])), None);
        assert_eq!(named_failed_rank(&lines(&["rank failed (x)"])), None);
        assert_eq!(named_failed_rank(&lines(&["nothing here"])), None);
    }

    #[test]
    fn a_stopped_rank_wins_then_a_named_one_that_was_still_running() {
        let out = lines(&["rank 2 failed (connection lost)"]);
        assert_eq!(
            culprit(0, &[(1, 77)], &[1, 2], &out),
            Some(Culprit::Stopped { rank: 1, pid: 77 })
        );
        assert_eq!(culprit(0, &[], &[1, 2], &out).map(|c| c.rank()), Some(2));
        // Rank 2 had exited already: it failed on its own and was reported as such.
        assert_eq!(culprit(0, &[], &[1], &out), None);
        assert_eq!(culprit(2, &[], &[1, 2], &out), None, "it names itself");
        assert_eq!(culprit(0, &[], &[1, 2], &lines(&["boom"])), None);
    }
}
