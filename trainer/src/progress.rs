//! The master rank's per-epoch progress bar (indicatif): loss, accuracy, samples/s. It is shown
//! only when stderr is a terminal; when piped (the launcher pipes rank output) nothing is
//! printed per step unless `--verbose`. Log lines go through the bar so they never tear it:
//! the trainer's own lines through [`EpochProgress::log`], `tracing` events (the trainer's and
//! the runtime's) through [`LogWriter`], which `train` installs as its subscriber's writer.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars of this process, drawn on stderr; log lines are printed above them.
fn bars() -> &'static MultiProgress {
    static BARS: OnceLock<MultiProgress> = OnceLock::new();
    BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

/// One log record on its way to a sink (stderr): buffered while it is formatted, then written
/// whole with the bars of `bars` cleared and redrawn after it, so a line never lands in the
/// middle of a bar. With no bar on screen it is a plain write.
pub struct LogWriter<'a, W: Write> {
    bars: &'a MultiProgress,
    sink: W,
    record: Vec<u8>,
}

impl<W: Write> LogWriter<'static, W> {
    /// A writer to `sink` through this process's bars.
    pub fn new(sink: W) -> Self {
        LogWriter::through(bars(), sink)
    }
}

impl<'a, W: Write> LogWriter<'a, W> {
    /// A writer to `sink` through `bars`.
    pub fn through(bars: &'a MultiProgress, sink: W) -> Self {
        LogWriter {
            bars,
            sink,
            record: Vec::new(),
        }
    }
}

/// A `LogWriter` to stderr: pass the function itself to `tracing_subscriber`'s
/// `with_writer`, which makes one per event.
pub fn stderr_log_writer() -> LogWriter<'static, std::io::Stderr> {
    LogWriter::new(std::io::stderr())
}

impl<W: Write> Write for LogWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.record.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.record.is_empty() {
            return Ok(());
        }
        let record = std::mem::take(&mut self.record);
        let sink = &mut self.sink;
        self.bars.suspend(|| {
            sink.write_all(&record)?;
            sink.flush()
        })
    }
}

impl<W: Write> Drop for LogWriter<'_, W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A progress bar for one epoch; does nothing when disabled (non-master ranks).
pub struct EpochProgress {
    enabled: bool,
    bar: Option<ProgressBar>,
    verbose: bool,
    prefix: String,
    steps: u64,
    done: u64,
    start: Instant,
    samples: f64,
}

impl EpochProgress {
    /// `bar`: show a bar when stderr is a terminal; `verbose`: a log line per step.
    pub fn new(
        enabled: bool,
        bar: bool,
        verbose: bool,
        epoch: u64,
        epochs: u64,
        steps: u64,
    ) -> Self {
        let prefix = format!("epoch {}/{epochs}", epoch + 1);
        let bar = (enabled && bar && std::io::stderr().is_terminal()).then(|| {
            let bar = bars().add(ProgressBar::new(steps));
            let style =
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(prefix.clone());
            bar
        });
        EpochProgress {
            enabled,
            bar,
            verbose,
            prefix,
            steps,
            done: 0,
            start: Instant::now(),
            samples: 0.0,
        }
    }

    /// Prints `line` on stderr without tearing the bar.
    pub fn log(&self, line: &str) {
        if !self.enabled {
            return;
        }
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// One global step done with these aggregated metrics.
    pub fn step(&mut self, loss: f64, accuracy: f64, samples: f64, lr: f64) {
        if !self.enabled {
            return;
        }
        self.samples += samples;
        self.done += 1;
        let rate = self.samples / self.start.elapsed().as_secs_f64().max(1e-9);
        let message = format!(
            "loss {loss:.4} acc {:.1}% {rate:.0} samples/s",
            100.0 * accuracy
        );
        if self.verbose {
            self.log(&format!(
                "{} step {}/{}: {message} lr {lr:.3e}",
                self.prefix, self.done, self.steps
            ));
        }
        if let Some(bar) = &self.bar {
            bar.set_message(message);
            bar.inc(1);
        }
    }

    /// Ends the epoch's bar and removes it from the screen (the epoch's summary line follows).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use indicatif::TermLike;

    use super::*;

    /// A terminal that records what is drawn on it, in order; the log sink records into the
    /// same list, so the test sees how log lines and bar redraws interleave.
    #[derive(Clone, Debug, Default)]
    struct Screen(Arc<Mutex<Vec<String>>>);

    impl Screen {
        fn push(&self, event: String) {
            self.0.lock().unwrap().push(event);
        }
        fn events(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("up {n}"));
            Ok(())
        }
        fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("down {n}"));
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.push(format!("bar {s}"));
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            if !s.is_empty() {
                self.push(format!("bar {s}"));
            }
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.push("clear".into());
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.push(format!("log {}", String::from_utf8_lossy(buf).trim_end()));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_log_line_clears_the_bar_lands_whole_and_the_bar_comes_back_below_it() {
        let screen = Screen::default();
        let bars = MultiProgress::with_draw_target(ProgressDrawTarget::term_like_with_hz(
            Box::new(screen.clone()),
            100,
        ));
        let bar = bars.add(ProgressBar::new(10));
        bar.set_style(ProgressStyle::with_template("STEP {pos}/{len}").unwrap());
        bar.inc(3);
        bar.tick();
        let drawn = screen.events().len();
        assert!(
            screen.events().iter().any(|e| e.contains("STEP 3/10")),
            "{:?}",
            screen.events()
        );
        {
            // A tracing event is written in pieces, then the writer is dropped.
            let mut w = LogWriter::through(&bars, screen.clone());
            write!(w, "WARN gaspi: ").unwrap();
            writeln!(w, "rank 1 marked CORRUPT").unwrap();
        }
        let after: Vec<String> = screen.events()[drawn..].to_vec();
        let log = after
            .iter()
            .position(|e| e == "log WARN gaspi: rank 1 marked CORRUPT")
            .unwrap_or_else(|| panic!("the line was not written whole: {after:?}"));
        assert!(
            after[..log].iter().any(|e| e == "clear"),
            "the bar was not cleared before the line: {after:?}"
        );
        assert!(
            after[log + 1..].iter().any(|e| e.contains("STEP 3/10")),
            "the bar was not redrawn below the line: {after:?}"
        );
        bar.finish_and_clear();
    }

    #[test]
    fn without_bars_a_log_line_is_a_plain_write() {
        let screen = Screen::default();
        let bars = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
        {
            let mut w = LogWriter::through(&bars, screen.clone());
            writeln!(w, "INFO train: epoch 1").unwrap();
        }
        assert_eq!(screen.events(), ["log INFO train: epoch 1"]);
    }
}
