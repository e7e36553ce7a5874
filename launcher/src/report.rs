//! The failure summary's account of why a rank failed: the last lines it wrote, labelled
//! with the rank and its host, since the output of most ranks goes to log files only.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::spawn::ssh::last_line;
use crate::spawn::{RankStatus, Tails, TAIL_LINES};

/// The summary's first line when `label` (rank `rank` on `host`) failed first with `status`.
/// A rank whose host ssh could not reach never ran: the line names the host and gives ssh's
/// own reason (the last line the ssh client wrote, in `tails`), so that it does not read as
/// a failure of the program.
pub fn first_failure(
    job: &str,
    label: &str,
    (rank, host): (Option<usize>, &str),
    status: &RankStatus,
    tails: &Tails,
) -> String {
    match (status, rank) {
        (RankStatus::SshUnreachable, Some(rank)) => format!(
            "tarantella: job {job} failed: host {host} {status}, so rank {rank} did not start: {}",
            last_line(&tails.stderr.lines().join("\n"))
        ),
        _ => format!("tarantella: job {job} failed: {label} {status} (first failure)"),
    }
}

/// The most bytes read back from the end of a Slurm rank's log: plenty for
/// [`TAIL_LINES`] lines of ordinary output, and bounded whatever the log's size.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// The summary lines about the failed `rank` (`label`: "rank K on HOST"): a pointer to the
/// terminal when its output was `shown` there, else the last lines of its stderr, or of its
/// stdout when it wrote nothing on stderr.
pub fn from_tails(label: &str, rank: usize, shown: bool, tails: &Tails, log: &Path) -> Vec<String> {
    if shown {
        return vec![format!(
            "tarantella: the output of {label} is on the terminal, see above"
        )];
    }
    let (stream, lines) = match tails.stderr.lines() {
        lines if !lines.is_empty() => ("stderr", lines),
        _ => ("stdout", tails.stdout.lines()),
    };
    if lines.is_empty() {
        return vec![format!(
            "tarantella: {label} wrote nothing on stdout or stderr"
        )];
    }
    framed(label, rank, &format!("its {stream}"), &lines, log)
}

/// The summary lines about a failed Slurm rank, whose stdout and stderr went into one `log`
/// (read back here: the ranks write it themselves, on their nodes).
pub fn from_log(label: &str, rank: usize, shown: bool, log: &Path) -> Vec<String> {
    if shown {
        return vec![format!(
            "tarantella: the output of {label} is on the terminal, see above"
        )];
    }
    match last_lines_of_file(log, TAIL_LINES) {
        Ok(lines) if lines.is_empty() => {
            vec![format!(
                "tarantella: {label} wrote nothing to {}",
                log.display()
            )]
        }
        Ok(lines) => framed(label, rank, "its output", &lines, log),
        Err(e) => vec![format!(
            "tarantella: the output of {label} could not be read from {}: {e}",
            log.display()
        )],
    }
}

fn framed(label: &str, rank: usize, what: &str, lines: &[String], log: &Path) -> Vec<String> {
    let mut out = vec![format!(
        "tarantella: last {} line(s) of {what}, {label} (all of it: {}):",
        lines.len(),
        log.display()
    )];
    out.extend(lines.iter().map(|l| format!("[rank {rank}] {l}")));
    out
}

/// The last `n` lines of the file at `path`, read from its last [`LOG_TAIL_BYTES`].
fn last_lines_of_file(path: &Path, n: usize) -> std::io::Result<Vec<String>> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(LOG_TAIL_BYTES);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.take(LOG_TAIL_BYTES).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // cut in the middle
    }
    let from = lines.len().saturating_sub(n);
    Ok(lines[from..].iter().map(|l| l.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tails(stdout: &[&str], stderr: &[&str]) -> Tails {
        let t = Tails::default();
        stdout.iter().for_each(|l| t.stdout.push(l.as_bytes()));
        stderr.iter().for_each(|l| t.stderr.push(l.as_bytes()));
        t
    }

    #[test]
    fn stderr_is_shown_and_stdout_only_when_stderr_is_empty() {
        let log = Path::new("/run/rank-2.log");
        let both = from_tails("rank 2 on h", 2, false, &tails(&["out"], &["err"]), log);
        assert_eq!(
            both,
            [
                "tarantella: last 1 line(s) of its stderr, rank 2 on h (all of it: /run/rank-2.log):",
                "[rank 2] err"
            ]
        );
        let out_only = from_tails("rank 2 on h", 2, false, &tails(&["out"], &[]), log);
        assert!(out_only[0].contains("of its stdout"), "{out_only:?}");
        assert_eq!(out_only[1], "[rank 2] out");
        let silent = from_tails("rank 2 on h", 2, false, &tails(&[], &[]), log);
        assert_eq!(
            silent,
            ["tarantella: rank 2 on h wrote nothing on stdout or stderr"]
        );
    }

    #[test]
    fn an_unreachable_host_is_named_with_what_ssh_said() {
        let said = tails(
            &[],
            &[
                "Warning: Permanently added 'h' to the list of known hosts.",
                "ssh: connect to host h port 22: Connection refused",
            ],
        );
        let line = first_failure(
            "j1",
            "rank 1 on h",
            (Some(1), "h"),
            &RankStatus::SshUnreachable,
            &said,
        );
        assert_eq!(
            line,
            "tarantella: job j1 failed: host h could not be reached by ssh (status 255), so rank 1 \
             did not start: ssh: connect to host h port 22: Connection refused"
        );
        let exited = first_failure(
            "j1",
            "rank 1 on h",
            (Some(1), "h"),
            &RankStatus::Exited(3),
            &said,
        );
        assert_eq!(
            exited,
            "tarantella: job j1 failed: rank 1 on h exited with status 3 (first failure)"
        );
    }

    #[test]
    fn output_already_on_the_terminal_is_not_repeated() {
        let shown = from_tails(
            "rank 0 on h",
            0,
            true,
            &tails(&[], &["err"]),
            Path::new("x"),
        );
        assert_eq!(
            shown,
            ["tarantella: the output of rank 0 on h is on the terminal, see above"]
        );
    }

    #[test]
    fn a_slurm_ranks_log_is_read_back_from_its_end() {
        let dir = std::env::temp_dir().join(format!("tnt-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("rank-3.log");
        // More than LOG_TAIL_BYTES, so that the read starts in the middle of a line.
        let text: String = (1..=20_000).map(|i| format!("log line {i}\n")).collect();
        std::fs::write(&log, text).unwrap();
        let lines = from_log("rank 3 on n2", 3, false, &log);
        assert_eq!(lines.len(), 1 + TAIL_LINES);
        assert_eq!(lines[1], "[rank 3] log line 19981");
        assert_eq!(lines[TAIL_LINES], "[rank 3] log line 20000");
        let missing = from_log("rank 3 on n2", 3, false, &dir.join("nothing.log"));
        assert!(missing[0].contains("could not be read"), "{missing:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
