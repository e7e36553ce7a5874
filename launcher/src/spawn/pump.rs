//! Copying a rank's output streams to where they go ([`Sink`]), line by line, on a thread per
//! stream; the last lines stay in the rank's [`Tail`], and the control lines of the ssh
//! wrapper and its reaper (`\x1eTNT pid N`, `\x1eTNT exited N`, `\x1eTNT killed S`,
//! `\x1eTNT exit N`) are taken out of its stderr.
//!
//! Lines are the unit, so that ranks' lines do not interleave mid-line. Two exceptions keep
//! output moving and memory bounded: what a rank has written up to a carriage return goes
//! out at once (a progress bar redraws its line with `\r` and ends it only when done), and so
//! does a line that grows past [`MAX_HELD`] bytes.

use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};

use super::{Event, OpenStreams, RankStatus, Sink, Tail, CONTROL_MARK};

/// The most bytes of an unfinished line held back waiting for its end.
const MAX_HELD: usize = 64 * 1024;

/// Where the control lines found in an ssh rank's stderr go.
pub struct Control {
    /// The rank's index among the started processes, for [`Event::RemotePid`].
    pub idx: usize,
    /// The supervisor's channel, told of the rank's remote PID.
    pub events: Sender<Event>,
    /// Set to the remote PID (`\x1eTNT pid N`).
    pub remote_pid: Arc<AtomicI32>,
    /// Set to how the rank ended, by the first report: the reaper's exact one
    /// (`\x1eTNT exited N`, `\x1eTNT killed S`) comes before the wrapper's (`\x1eTNT exit N`,
    /// the shell's `$?`).
    pub remote_status: Arc<OnceLock<RankStatus>>,
}

/// Copies `stream` into `sink` on a background thread, counted in `open` until the stream
/// ends; the last lines stay in `tail` (control lines in neither).
pub fn pump<R: Read + Send + 'static>(
    stream: R,
    sink: Sink,
    tail: Tail,
    control: Option<Control>,
    open: &OpenStreams,
) {
    let guard = open.opened();
    std::thread::spawn(move || {
        let _counted_until_the_end = guard;
        let mut out = Out {
            sink,
            tail,
            line_start: true,
            tail_line: Vec::new(),
        };
        let mut r = BufReader::with_capacity(MAX_HELD, stream);
        // The start of a line whose end has not come yet.
        let mut held = Vec::new();
        loop {
            let buf = match r.fill_buf() {
                Ok([]) | Err(_) => break,
                Ok(buf) => buf,
            };
            if let Some(at) = buf.iter().position(|&b| b == b'\n') {
                held.extend_from_slice(&buf[..=at]);
                r.consume(at + 1);
                line(&mut out, control.as_ref(), &mut held);
                held.clear();
                continue;
            }
            let n = buf.len();
            held.extend_from_slice(buf);
            r.consume(n);
            // No newline yet: what ends in a carriage return (a redrawn progress bar), or a
            // line past the limit, goes out now. Not the start of a control line.
            let flush_to = if held.len() >= MAX_HELD {
                Some(held.len())
            } else {
                held.iter().rposition(|&b| b == b'\r').map(|at| at + 1)
            };
            if let Some(end) = flush_to.filter(|_| !held.starts_with(CONTROL_MARK)) {
                out.part(&held[..end]);
                held.drain(..end);
            }
        }
        if !held.is_empty() {
            out.part(&held);
        }
        if !out.line_start {
            out.part(b"\n");
        }
    });
}

/// Where a stream's bytes go, and where in a line it is.
struct Out {
    sink: Sink,
    tail: Tail,
    /// The next byte starts a line (the terminal's prefix goes first).
    line_start: bool,
    /// The current line for the tail, up to the tail's own limit.
    tail_line: Vec<u8>,
}

impl Out {
    /// Writes part of a line (or several whole ones).
    fn part(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.sink.write(bytes, self.line_start);
        for l in bytes.split_inclusive(|&b| b == b'\n') {
            if self.tail_line.len() < MAX_HELD {
                let room = MAX_HELD - self.tail_line.len();
                self.tail_line.extend_from_slice(&l[..l.len().min(room)]);
            }
            if l.ends_with(b"\n") {
                self.tail.push(&self.tail_line);
                self.tail_line.clear();
            }
        }
        self.line_start = bytes.ends_with(b"\n");
    }

    /// Ends a line that was written in part, if one was.
    fn end_line(&mut self) {
        if !self.line_start {
            self.part(b"\n");
        }
    }
}

/// One whole line (with its newline): the wrapper's control lines are taken out, the rest
/// written.
fn line(out: &mut Out, control: Option<&Control>, line: &mut Vec<u8>) {
    // Another process of the rank (a child still writing) may have left a partial line
    // just before the wrapper's control line: the mark then sits inside the line. The
    // record separator never occurs in ordinary output.
    let mark_at = control.and_then(|_| {
        line.windows(CONTROL_MARK.len())
            .position(|w| w == CONTROL_MARK)
    });
    if let Some(at) = mark_at.filter(|&at| at > 0) {
        out.part(&line[..at]);
        out.end_line();
        line.drain(..at);
    }
    if let (Some(c), Some(rest)) = (control, line.strip_prefix(CONTROL_MARK)) {
        out.end_line();
        let text = String::from_utf8_lossy(rest);
        let mut w = text.split_whitespace();
        let (key, val) = (w.next(), w.next().and_then(|v| v.parse::<i32>().ok()));
        match (key, val) {
            (Some("pid"), Some(pid)) => {
                c.remote_pid.store(pid, Ordering::Release);
                let _ = c.events.send(Event::RemotePid { idx: c.idx, pid });
            }
            (Some("exited"), Some(code)) => {
                let _ = c.remote_status.set(RankStatus::Exited(code));
            }
            (Some("killed"), Some(sig)) => {
                let _ = c.remote_status.set(RankStatus::Signaled(sig));
            }
            (Some("exit"), Some(code)) => {
                let _ = c.remote_status.set(RankStatus::from_shell(code));
            }
            _ => out.part(line),
        }
        return;
    }
    out.part(line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    fn pumped(name: &str, input: &'static [u8], control: Option<Control>) -> (String, Vec<String>) {
        let dir = std::env::temp_dir().join(format!("tnt-pump-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("rank.log");
        let file = Arc::new(Mutex::new(File::create(&log).unwrap()));
        let open = OpenStreams::default();
        let tail = Tail::default();
        pump(input, Sink::File(file), tail.clone(), control, &open);
        assert!(open.wait_closed(Instant::now() + Duration::from_secs(10)));
        let text = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        (text, tail.lines())
    }

    /// A child of the rank still writing when the wrapper reports: its partial line and the
    /// control line arrive as one line. The exit status must still be read, and the child's
    /// text kept.
    #[test]
    fn a_control_line_after_a_partial_line_is_still_read() {
        let (events, _rx) = std::sync::mpsc::channel();
        let remote_status = Arc::new(OnceLock::new());
        let control = Control {
            idx: 0,
            events,
            remote_pid: Arc::new(AtomicI32::new(-1)),
            remote_status: remote_status.clone(),
        };
        let input: &[u8] = b"child: half a line\x1eTNT exit 3\nof text\n";
        let (text, tail) = pumped("control", input, Some(control));
        assert_eq!(remote_status.get(), Some(&RankStatus::Exited(3)));
        assert_eq!(text, "child: half a line\nof text\n");
        assert_eq!(tail, ["child: half a line", "of text"]);
    }

    /// A progress bar redrawn with carriage returns, a line past the limit and an unfinished
    /// last line: all written, the tail keeps whole lines.
    #[test]
    fn carriage_returns_long_lines_and_a_last_partial_line() {
        let input: &[u8] = b"step 1\rstep 2\rdone\nend without newline";
        let (text, tail) = pumped("cr", input, None);
        assert_eq!(text, "step 1\rstep 2\rdone\nend without newline\n");
        assert_eq!(tail, ["step 1\rstep 2\rdone", "end without newline"]);
    }
}
