//! The last lines a rank wrote, kept in memory as its output is copied, so that the failure
//! summary can show why a rank failed even when its output went to a log file only.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

/// How many lines of a failing rank the summary shows.
pub const TAIL_LINES: usize = 20;
/// The most bytes kept of one line: a rank that writes megabytes without a newline must not
/// make the launcher hold them.
const MAX_LINE_BYTES: usize = 4096;

/// A bounded tail of one output stream, shared between its copying thread and the
/// supervisor.
#[derive(Clone, Default)]
pub struct Tail(Arc<Mutex<VecDeque<Vec<u8>>>>);

impl Tail {
    /// Keeps `line` (with or without its newline), dropping the oldest line beyond
    /// [`TAIL_LINES`].
    pub fn push(&self, line: &[u8]) {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let mut kept = line[..line.len().min(MAX_LINE_BYTES)].to_vec();
        if line.len() > MAX_LINE_BYTES {
            kept.extend_from_slice(" [...]".as_bytes());
        }
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(kept);
    }

    /// The kept lines, oldest first, without newlines.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect()
    }
}

/// The tails of a rank's two streams.
#[derive(Clone, Default)]
pub struct Tails {
    /// The last lines of the rank's stdout.
    pub stdout: Tail,
    /// The last lines of the rank's stderr.
    pub stderr: Tail,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_lines_are_kept_without_their_newlines() {
        let tail = Tail::default();
        for i in 1..=30 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines.first().map(String::as_str), Some("line 11"));
        assert_eq!(lines.last().map(String::as_str), Some("line 30"));
    }

    #[test]
    fn an_endless_line_is_cut() {
        let tail = Tail::default();
        tail.push(&vec![b'x'; 1 << 20]);
        let line = &tail.lines()[0];
        assert_eq!(line.len(), MAX_LINE_BYTES + " [...]".len());
        assert!(line.ends_with(" [...]"));
    }
}
