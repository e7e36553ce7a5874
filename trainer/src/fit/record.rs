//! `--record`: one line per step on every rank (loss, accuracy, weight checksum, hook trace,
//! GPU memory), which the multi-process tests compare between runs and numbers of ranks.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::summary::TrainSummary;
use crate::ddp::DataParallel;
use crate::error::{Error, Result};
use crate::hooks::StepTrace;

/// This rank's record file, `<path>.rank<r>`.
pub(super) struct StepRecorder {
    path: PathBuf,
    out: BufWriter<std::fs::File>,
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

impl StepRecorder {
    /// Creates (truncates) rank `rank`'s file for `path`.
    pub(super) fn create(path: &Path, rank: usize) -> Result<Self> {
        let path = PathBuf::from(format!("{}.rank{rank}", path.display()));
        let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        Ok(StepRecorder {
            path,
            out: BufWriter::new(file),
        })
    }

    /// One line for `step`: `key=value` fields, lists comma-separated (see
    /// `TrainConfig::record`).
    pub(super) fn write(
        &mut self,
        step: u64,
        summary: &TrainSummary,
        ddp: &DataParallel,
        trace: &StepTrace,
    ) -> Result<()> {
        let device_bytes = crate::stream::device_allocated_bytes(ddp.device())?;
        let checksum = ddp.weights_checksum()?;
        writeln!(
            self.out,
            "step={step} loss={:e} accuracy={:e} checksum={checksum:016x} hooks={} \
             first_hook_ns={} last_hook_ns={} backward_end_ns={} ready_ns={} start_ns={} \
             done_ns={} backward_returned_ns={} device_bytes={device_bytes}",
            summary.last_loss,
            summary.last_accuracy,
            join(&trace.hook_counts),
            trace.first_hook_ns,
            trace.last_hook_ns,
            trace.backward_end_ns.unwrap_or(0),
            join(&trace.bucket_ready_ns),
            join(&trace.bucket_start_ns),
            join(&trace.bucket_done_ns),
            trace.backward_returned_ns,
        )
        .map_err(|e| Error::io(&self.path, e))
    }

    /// Flushes the file (at the end of the run).
    pub(super) fn finish(mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }
}
