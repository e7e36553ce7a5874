//! What one epoch measured, how the master prints it (one Keras-like line) and logs it
//! (`--metrics-csv`: one row per epoch, flushed each epoch).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One epoch's metrics, aggregated over all ranks (identical on every rank).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// 1-based.
    pub epoch: u64,
    /// Learning rate at the epoch's last step.
    pub lr: f64,
    /// Mean training loss over the epoch's samples.
    pub loss: f64,
    /// Training accuracy over the epoch's samples.
    pub accuracy: f64,
    /// Test-split loss, when validated this epoch.
    pub val_loss: Option<f64>,
    /// Test-split accuracy, when validated this epoch.
    pub val_accuracy: Option<f64>,
    /// Test samples the validation counted (over all ranks).
    #[serde(default)]
    pub val_samples: Option<usize>,
    /// Wall time of the epoch (training and validation).
    pub seconds: f64,
    /// Training samples per second over all ranks.
    pub samples_per_second: f64,
}

/// The metric callbacks watch (Keras's `monitor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Monitor {
    /// The test-split loss; lower is better.
    #[value(name = "val_loss")]
    ValLoss,
    /// The test-split accuracy; higher is better.
    #[value(name = "val_accuracy")]
    ValAccuracy,
}

impl Monitor {
    /// The monitored value of `m`, if it was measured.
    pub fn value(self, m: &EpochMetrics) -> Option<f64> {
        match self {
            Monitor::ValLoss => m.val_loss,
            Monitor::ValAccuracy => m.val_accuracy,
        }
    }

    /// True when `new` is better than `old` by more than `min_delta`.
    pub fn improves(self, new: f64, old: f64, min_delta: f64) -> bool {
        match self {
            Monitor::ValLoss => new < old - min_delta,
            Monitor::ValAccuracy => new > old + min_delta,
        }
    }

    /// The metric's name as the command line and the epoch line spell it.
    pub fn name(self) -> &'static str {
        match self {
            Monitor::ValLoss => "val_loss",
            Monitor::ValAccuracy => "val_accuracy",
        }
    }
}

/// The epoch line: `Epoch 3/8 - 21.4s - loss: 0.3012 - accuracy: 0.8901 - val_loss: ...`.
pub struct EpochLine<'a> {
    /// The epoch's metrics.
    pub metrics: &'a EpochMetrics,
    /// The run's epoch count (the `/8` of `Epoch 3/8`).
    pub epochs: u64,
}

impl fmt::Display for EpochLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.metrics;
        write!(
            f,
            "Epoch {}/{} - {:.1}s - loss: {:.4} - accuracy: {:.4}",
            m.epoch, self.epochs, m.seconds, m.loss, m.accuracy
        )?;
        if let (Some(l), Some(a)) = (m.val_loss, m.val_accuracy) {
            write!(f, " - val_loss: {l:.4} - val_accuracy: {a:.4}")?;
        }
        write!(
            f,
            " - lr: {:.3e} - {:.0} samples/s",
            m.lr, m.samples_per_second
        )
    }
}

/// The `--metrics-csv` file (master only).
pub struct MetricsCsv {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

/// The first line of a `--metrics-csv` file: its columns.
pub const CSV_HEADER: &str =
    "epoch,lr,loss,accuracy,val_loss,val_accuracy,seconds,samples_per_second";

impl MetricsCsv {
    /// Creates (truncates) `path` and writes the header; appends when `append` (a resumed run)
    /// and the file exists.
    pub fn create(path: &Path, append: bool) -> Result<Self> {
        let exists = append && path.is_file();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(exists)
            .truncate(!exists)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let mut csv = MetricsCsv {
            path: path.to_path_buf(),
            out: std::io::BufWriter::new(file),
        };
        if !exists {
            writeln!(csv.out, "{CSV_HEADER}").map_err(|e| Error::io(path, e))?;
            csv.flush()?;
        }
        Ok(csv)
    }

    /// One row, flushed to the file.
    pub fn write(&mut self, m: &EpochMetrics) -> Result<()> {
        let opt = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_default();
        writeln!(
            self.out,
            "{},{:e},{:.6},{:.6},{},{},{:.3},{:.1}",
            m.epoch,
            m.lr,
            m.loss,
            m.accuracy,
            opt(m.val_loss),
            opt(m.val_accuracy),
            m.seconds,
            m.samples_per_second
        )
        .map_err(|e| Error::io(&self.path, e))?;
        self.flush()
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(epoch: u64, val: Option<(f64, f64)>) -> EpochMetrics {
        EpochMetrics {
            epoch,
            lr: 0.1,
            loss: 0.5,
            accuracy: 0.75,
            val_loss: val.map(|v| v.0),
            val_accuracy: val.map(|v| v.1),
            val_samples: val.map(|_| 10),
            seconds: 2.0,
            samples_per_second: 100.0,
        }
    }

    #[test]
    fn epoch_line_reads_like_keras() {
        let line = EpochLine {
            metrics: &m(2, Some((0.25, 0.9))),
            epochs: 8,
        }
        .to_string();
        assert_eq!(
            line,
            "Epoch 2/8 - 2.0s - loss: 0.5000 - accuracy: 0.7500 - val_loss: 0.2500 - \
             val_accuracy: 0.9000 - lr: 1.000e-1 - 100 samples/s"
        );
        let line = EpochLine {
            metrics: &m(1, None),
            epochs: 1,
        }
        .to_string();
        assert!(!line.contains("val_"), "{line}");
    }

    #[test]
    fn csv_rows_are_flushed_and_appended_on_resume() {
        let path = std::env::temp_dir().join(format!("tnt-metrics-{}.csv", std::process::id()));
        let mut csv = MetricsCsv::create(&path, false).unwrap();
        csv.write(&m(1, Some((0.25, 0.9)))).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "flushed without drop: {text}");
        drop(csv);
        let mut csv = MetricsCsv::create(&path, true).unwrap();
        csv.write(&m(2, None)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert!(lines[1].starts_with("1,1e-1,0.500000,0.750000,0.250000,0.900000,"));
        assert!(
            lines[2].starts_with("2,1e-1,0.500000,0.750000,,,"),
            "{text}"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn monitors_compare_in_their_direction() {
        assert!(Monitor::ValLoss.improves(0.4, 0.5, 0.0));
        assert!(!Monitor::ValLoss.improves(0.45, 0.5, 0.1));
        assert!(Monitor::ValAccuracy.improves(0.9, 0.8, 0.0));
        assert!(!Monitor::ValAccuracy.improves(0.8, 0.9, 0.0));
    }
}
