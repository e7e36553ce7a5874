//! Whom the failure report blames. The rank that exits first with an error is often not
//! the one at fault: when a rank stops making progress (SIGSTOPped, hung, its host
//! unreachable), its peers give up on it (within `--heartbeat-timeout`, when set) and one of
//! them exits first. The report then names the rank that stopped:
//!
//! 1. a local rank with a stopped process in its process group (state `T` or `t` in
//!    `/proc/PID/stat`), seen before the job is torn down; else
//! 2. the rank that the first failed rank's last lines name as failed (gaspi's
//!    `PeerFailed`: `rank R failed (`, or the rendezvous' `ranks [R, ...] did not join`),
//!    provided R had not itself failed with an error: it was still running, was killed by a
//!    signal, or had exited 0 (left while its peers still needed it). When R did fail with
//!    an error, the rank R's own lines name is looked at in turn (a peer that saw R leave
//!    names R, though R only reacted to another rank); else
//! 3. a rank killed by a signal before the job was torn down: its peers, seeing it gone,
//!    often exit within the same poll of the launcher, and the first of them in rank order
//!    would be named otherwise.
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
    /// The first failed rank's output names it as failed, and it had not failed itself.
    NamedBy {
        /// The rank.
        rank: usize,
        /// The line that names it.
        line: String,
    },
    /// It was killed by a signal before the job was torn down.
    Killed {
        /// The rank.
        rank: usize,
        /// The signal.
        signal: i32,
    },
}

/// How a rank had ended when the first failure came (ranks still running are not listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with status 0.
    Success,
    /// It exited with a non-zero status.
    Failure,
    /// It was killed by this signal.
    Signal(i32),
}

impl Culprit {
    /// The rank blamed.
    pub fn rank(&self) -> usize {
        match self {
            Culprit::Stopped { rank, .. }
            | Culprit::NamedBy { rank, .. }
            | Culprit::Killed { rank, .. } => *rank,
        }
    }

    /// Why, for the report (after "stopped making progress").
    pub fn why(&self) -> String {
        match self {
            Culprit::Stopped { pid, .. } => format!("its process {pid} was stopped (state T)"),
            Culprit::NamedBy { line, .. } => format!("its peers gave up on it: {line:?}"),
            Culprit::Killed { signal, .. } => format!(
                "by {}",
                nix::sys::signal::Signal::try_from(*signal)
                    .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_string())
            ),
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

/// The rank that `lines` (a failed rank's last output) name as failed: gaspi's
/// `PeerFailed` (`rank R failed (`), or the rendezvous' `ranks [R, ...] did not join`; the
/// last such line wins. Returns the rank and the line.
pub fn named_failed_rank(lines: &[String]) -> Option<(usize, String)> {
    const FAILED: &str = " failed (";
    const DID_NOT_JOIN: &str = "] did not join";
    lines.iter().rev().find_map(|line| {
        if let Some(at) = line.find(FAILED) {
            let before = line[..at].trim_end();
            let digits = before.rsplit(|c: char| !c.is_ascii_digit()).next()?;
            let rank = digits.parse().ok()?;
            return before[..before.len() - digits.len()]
                .ends_with("rank ")
                .then(|| (rank, line.trim().to_string()));
        }
        let at = line.find(DID_NOT_JOIN)?;
        let list = &line[..at];
        let open = list.rfind("ranks [")?;
        let first = list[open + "ranks [".len()..].split(',').next()?.trim();
        Some((first.parse().ok()?, line.trim().to_string()))
    })
}

/// The rank to blame instead of `first` (the first to fail in rank order), if any: see the
/// module documentation for the rules. `stopped`: local ranks with a stopped process;
/// `ended`: how the ranks that had ended by then ended (the others were running);
/// `lines_of`: a rank's last output.
pub fn culprit(
    first: usize,
    stopped: &[(usize, i32)],
    ended: &[(usize, Ended)],
    lines_of: impl Fn(usize) -> Vec<String>,
) -> Option<Culprit> {
    if let Some(&(rank, pid)) = stopped.iter().find(|(r, _)| *r != first) {
        return Some(Culprit::Stopped { rank, pid });
    }
    let how = |rank: usize| ended.iter().find(|(r, _)| *r == rank).map(|(_, e)| *e);
    let mut seen = vec![first];
    let mut at = first;
    while let Some((rank, line)) = named_failed_rank(&lines_of(at)) {
        if seen.contains(&rank) {
            break;
        }
        if how(rank) != Some(Ended::Failure) {
            return Some(Culprit::NamedBy { rank, line });
        }
        seen.push(rank);
        at = rank;
    }
    ended.iter().find_map(|&(rank, e)| match e {
        Ended::Signal(signal) if rank != first => Some(Culprit::Killed { rank, signal }),
        _ => None,
    })
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
    fn the_rendezvous_names_the_ranks_that_did_not_join() {
        let out = lines(&[
            "rank 0: startup: bootstrap: ranks [1, 3] did not join within 4000 ms (GASPI_INIT_TIMEOUT_MS)",
        ]);
        assert_eq!(named_failed_rank(&out).map(|(r, _)| r), Some(1));
        assert_eq!(named_failed_rank(&lines(&["ranks [] did not join"])), None);
    }

    #[test]
    fn a_stopped_rank_wins_then_a_named_one_that_did_not_fail_itself_then_a_killed_one() {
        let out = lines(&["rank 2 failed (connection lost)"]);
        assert_eq!(
            culprit(0, &[(1, 77)], &[], |_| out.clone()),
            Some(Culprit::Stopped { rank: 1, pid: 77 })
        );
        // Rank 2 still running (not in `ended`), killed, or gone with status 0: it is named.
        assert_eq!(
            culprit(0, &[], &[], |_| out.clone()).map(|c| c.rank()),
            Some(2)
        );
        for how in [Ended::Signal(9), Ended::Success] {
            assert_eq!(
                culprit(0, &[], &[(0, Ended::Failure), (2, how)], |_| out.clone())
                    .map(|c| c.rank()),
                Some(2),
                "{how:?}"
            );
        }
        // Rank 0 names rank 2, which failed because it saw rank 1 go: rank 1 is blamed.
        let chain = |r: usize| match r {
            0 => lines(&["rank 0: data: rank 2 failed (connection lost)"]),
            2 => lines(&["rank 2: wait: rank 1 failed (silent past the heartbeat timeout)"]),
            _ => lines(&["injecting close"]),
        };
        let ended = [(0, Ended::Failure), (2, Ended::Failure)];
        assert_eq!(culprit(0, &[], &ended, chain).map(|c| c.rank()), Some(1));
        // Ranks that name each other in a ring end the search.
        let ring = |r: usize| lines(&[&format!("rank {} failed (x)", 2 - r)]);
        assert_eq!(culprit(0, &[], &ended, ring), None);
        // Rank 2 had failed on its own with an error: the first failure stands.
        assert_eq!(
            culprit(0, &[], &[(2, Ended::Failure)], |_| out.clone()),
            None
        );
        assert_eq!(
            culprit(2, &[], &[], |_| out.clone()),
            None,
            "it names itself"
        );
        assert_eq!(culprit(0, &[], &[], |_| lines(&["boom"])), None);
        // Nobody named: a rank killed by a signal is the cause, not its peers' exits.
        assert_eq!(
            culprit(
                0,
                &[],
                &[
                    (0, Ended::Failure),
                    (1, Ended::Signal(15)),
                    (2, Ended::Failure)
                ],
                |_| lines(&["boom"])
            ),
            Some(Culprit::Killed {
                rank: 1,
                signal: 15
            })
        );
        assert_eq!(
            culprit(1, &[], &[(1, Ended::Signal(9))], |_| lines(&["boom"])),
            None,
            "the first failure is the killed rank itself"
        );
    }
}
