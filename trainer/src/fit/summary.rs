//! What a training run ends with: [`TrainSummary`], the same on every rank.

use crate::metrics::EpochMetrics;
use crate::profile::ProfileSummary;

/// What a run ends with (the same on every rank).
#[derive(Clone, Debug, Default)]
pub struct TrainSummary {
    /// Optimizer steps taken in total (counting those of a resumed run).
    pub steps: u64,
    /// Global loss of the last step.
    pub last_loss: f64,
    /// Global accuracy of the last step.
    pub last_accuracy: f64,
    /// One entry per epoch run (by this process).
    pub history: Vec<EpochMetrics>,
    /// Set when early stopping ended the run: (stopped after epoch, best epoch).
    pub early_stopped: Option<(u64, u64)>,
    /// `resume` found a run that had already finished; nothing was trained.
    pub already_finished: bool,
    /// Median step timings over the run, with `--profile`.
    pub profile: Option<ProfileSummary>,
}

impl TrainSummary {
    /// The last validated epoch's metrics, if any.
    pub fn last_validation(&self) -> Option<&EpochMetrics> {
        self.history.iter().rev().find(|m| m.val_loss.is_some())
    }
}
