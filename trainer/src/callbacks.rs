//! Early stopping (Keras's `EarlyStopping(monitor, patience, min_delta,
//! restore_best_weights=True)`): stop when the monitored metric has not improved for
//! `patience` validated epochs, and put the best epoch's weights back. Decisions use the
//! aggregated metrics, so every rank stops at the same epoch with the same weights.

use serde::{Deserialize, Serialize};
use tch::{nn, Tensor};

use crate::error::{Error, Result};
use crate::metrics::{EpochMetrics, Monitor};

/// What early stopping has seen so far, as a checkpoint records it (the best epoch's weights
/// are that epoch's checkpoint, which is kept while it is the best).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EarlyStoppingState {
    /// The metric watched.
    pub monitor: Monitor,
    /// The best value seen.
    pub best_value: f64,
    /// Its (1-based) epoch.
    pub best_epoch: u64,
    /// Validated epochs without improvement since.
    pub wait: u64,
}

/// Early-stopping state.
pub struct EarlyStopping {
    /// The metric watched.
    pub monitor: Monitor,
    /// Validated epochs without improvement after which training stops.
    pub patience: u64,
    /// An improvement smaller than this does not count.
    pub min_delta: f64,
    best: Option<(f64, u64)>,
    wait: u64,
    best_weights: Vec<(String, Tensor)>,
}

impl EarlyStopping {
    /// Watches `monitor`; an error when `patience` is 0 (it would stop after any epoch).
    pub fn new(monitor: Monitor, patience: u64, min_delta: f64) -> Result<Self> {
        if patience == 0 {
            return Err(Error::Config(
                "--early-stop-patience must be at least 1".into(),
            ));
        }
        Ok(EarlyStopping {
            monitor,
            patience,
            min_delta,
            best: None,
            wait: 0,
            best_weights: Vec::new(),
        })
    }

    /// The best monitored value so far and its (1-based) epoch.
    pub fn best(&self) -> Option<(f64, u64)> {
        self.best
    }

    /// The state a checkpoint records: `None` before the first validated epoch.
    pub fn state(&self) -> Option<EarlyStoppingState> {
        self.best
            .map(|(best_value, best_epoch)| EarlyStoppingState {
                monitor: self.monitor,
                best_value,
                best_epoch,
                wait: self.wait,
            })
    }

    /// Takes up a resumed run's state, with `vs` holding its best epoch's weights. A state of
    /// another monitor is not taken (false): this run's watch starts afresh.
    pub fn resume(&mut self, state: EarlyStoppingState, vs: &nn::VarStore) -> bool {
        if state.monitor != self.monitor {
            return false;
        }
        self.best = Some((state.best_value, state.best_epoch));
        self.wait = state.wait;
        self.best_weights = snapshot(vs);
        true
    }

    /// After an epoch: remembers the weights when the metric improved; true when training
    /// should stop. Epochs without the monitored metric (not validated) do not count.
    pub fn end_epoch(&mut self, m: &EpochMetrics, vs: &nn::VarStore) -> Result<bool> {
        let Some(value) = self.monitor.value(m) else {
            return Ok(false);
        };
        let improved = match self.best {
            None => true,
            Some((best, _)) => self.monitor.improves(value, best, self.min_delta),
        };
        if improved {
            self.best = Some((value, m.epoch));
            self.wait = 0;
            self.best_weights = snapshot(vs);
            return Ok(false);
        }
        self.wait += 1;
        Ok(self.wait >= self.patience)
    }

    /// Copies the best epoch's weights back into `vs` (nothing when none was recorded).
    pub fn restore_best(&self, vs: &nn::VarStore) -> Result<()> {
        let vars = vs.variables();
        for (name, saved) in &self.best_weights {
            let target = vars
                .get(name)
                .ok_or_else(|| Error::Model(format!("variable {name} disappeared")))?;
            tch::no_grad(|| target.shallow_clone().f_copy_(saved))?;
        }
        Ok(())
    }
}

/// A copy of every variable of `vs`.
fn snapshot(vs: &nn::VarStore) -> Vec<(String, Tensor)> {
    tch::no_grad(|| {
        vs.variables()
            .into_iter()
            .map(|(name, t)| (name, t.copy()))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(epoch: u64, val_loss: f64) -> EpochMetrics {
        EpochMetrics {
            epoch,
            val_loss: Some(val_loss),
            val_accuracy: Some(1.0 - val_loss),
            ..Default::default()
        }
    }

    #[test]
    fn stops_after_patience_and_restores_the_best_weights() {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let w = vs.root().zeros("w", &[2]);
        let mut es = EarlyStopping::new(Monitor::ValLoss, 2, 0.0).unwrap();
        let mut stopped_at = None;
        for (epoch, loss) in [(1, 0.9), (2, 0.5), (3, 0.6), (4, 0.55), (5, 0.1)] {
            let _ = tch::no_grad(|| w.shallow_clone().fill_(epoch as f64));
            if es.end_epoch(&metrics(epoch, loss), &vs).unwrap() {
                stopped_at = Some(epoch);
                break;
            }
        }
        assert_eq!(
            stopped_at,
            Some(4),
            "two epochs without improvement after epoch 2"
        );
        assert_eq!(es.best(), Some((0.5, 2)));
        assert_eq!(w.double_value(&[0]), 4.0);
        es.restore_best(&vs).unwrap();
        assert_eq!(w.double_value(&[1]), 2.0, "epoch 2's weights are back");
    }

    #[test]
    fn accuracy_is_maximized_and_unvalidated_epochs_do_not_count() {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let mut es = EarlyStopping::new(Monitor::ValAccuracy, 1, 0.0).unwrap();
        assert!(!es.end_epoch(&metrics(1, 0.5), &vs).unwrap()); // acc 0.5
        let none = EpochMetrics {
            epoch: 2,
            ..Default::default()
        };
        assert!(!es.end_epoch(&none, &vs).unwrap());
        assert!(!es.end_epoch(&metrics(3, 0.4), &vs).unwrap()); // acc 0.6, better
        assert!(es.end_epoch(&metrics(4, 0.45), &vs).unwrap());
        assert_eq!(es.best().map(|b| b.1), Some(3));
        assert!(EarlyStopping::new(Monitor::ValLoss, 0, 0.0).is_err());
    }
}
