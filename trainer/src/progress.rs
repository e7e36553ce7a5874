//! The master rank's per-epoch progress bar (indicatif): loss, accuracy, samples/s. It is shown
//! only when stderr is a terminal; when piped (the launcher pipes rank output) nothing is
//! printed per step unless `--verbose`. Log lines go through the bar so they never tear it.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

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
            let bar = ProgressBar::new(steps);
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

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
