//! The master rank's per-epoch progress bar (indicatif): loss, accuracy, samples/s. When
//! stderr is not a terminal (the launcher pipes rank output) there is no bar and, as Keras
//! does when piped, no per-step lines, unless `verbose` asks for a plain line about every
//! tenth of the epoch.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar for one epoch; does nothing when disabled (non-master ranks).
pub struct EpochProgress {
    bar: Option<ProgressBar>,
    /// Plain-text mode: print every this many steps.
    text_every: Option<u64>,
    prefix: String,
    steps: u64,
    done: u64,
    start: Instant,
    samples: f64,
}

impl EpochProgress {
    pub fn new(enabled: bool, verbose: bool, epoch: u64, epochs: u64, steps: u64) -> Self {
        let bar = enabled.then(|| {
            let bar = ProgressBar::new(steps);
            let style =
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(format!("epoch {}/{epochs}", epoch + 1));
            bar
        });
        let text_every = match &bar {
            Some(b) if b.is_hidden() && verbose => Some((steps / 10).max(1)),
            _ => None,
        };
        EpochProgress {
            bar,
            text_every,
            prefix: format!("epoch {}/{epochs}", epoch + 1),
            steps,
            done: 0,
            start: Instant::now(),
            samples: 0.0,
        }
    }

    /// One global step done with these aggregated metrics.
    pub fn step(&mut self, loss: f64, accuracy: f64, samples: f64) {
        self.samples += samples;
        self.done += 1;
        if let Some(bar) = &self.bar {
            let rate = self.samples / self.start.elapsed().as_secs_f64().max(1e-9);
            let message = format!(
                "loss {loss:.4} acc {:.1}% {rate:.0} samples/s",
                100.0 * accuracy
            );
            match self.text_every {
                Some(every) if self.done.is_multiple_of(every) || self.done == self.steps => {
                    eprintln!(
                        "{} step {}/{}: {message}",
                        self.prefix, self.done, self.steps
                    );
                }
                Some(_) => {}
                None => {
                    bar.set_message(message);
                    bar.inc(1);
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
