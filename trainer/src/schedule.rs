//! Learning-rate schedules (per optimizer step), each after an optional linear warmup:
//! constant, cosine annealing (PyTorch's `CosineAnnealingLR` to `min_lr` over the run), step
//! decay (`StepLR`: times `gamma` every `step_epochs` epochs) and reduce-on-plateau
//! (`ReduceLROnPlateau`: times `factor` after `patience` epochs without improvement of the
//! monitored metric). All ranks compute the same rates from the same (aggregated) metrics.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::metrics::Monitor;

/// `train --lr-schedule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    /// The base rate throughout.
    Constant,
    /// Cosine annealing to the minimum rate (--min-lr) over the run.
    Cosine,
    /// Times --lr-gamma every --lr-step-epochs epochs.
    Step,
    /// Times --plateau-factor when the monitored metric stops improving.
    Plateau,
}

/// The schedule's settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleConfig {
    /// The schedule after the warmup.
    pub kind: ScheduleKind,
    /// Peak learning rate (after any linear scaling).
    pub base_lr: f64,
    /// Linear warmup from `base_lr / warmup_steps` to `base_lr` over these steps.
    pub warmup_steps: u64,
    /// Optimizer steps of the whole run (cosine).
    pub total_steps: u64,
    /// Optimizer steps of one epoch (step decay).
    pub steps_per_epoch: u64,
    /// Cosine's final rate and the plateau's floor.
    pub min_lr: f64,
    /// Step decay: every `step_epochs` epochs, times `gamma`.
    pub step_epochs: u64,
    /// Step decay's factor.
    pub gamma: f64,
    /// Plateau: times `plateau_factor` after more than `plateau_patience` epochs without
    /// improvement.
    pub plateau_factor: f64,
    /// Plateau: epochs without improvement tolerated before a reduction.
    pub plateau_patience: u64,
}

/// What reduce-on-plateau remembers between epochs (checkpointed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlateauState {
    /// The best value of the watched metric so far.
    pub best: Option<f64>,
    /// Epochs since it last improved (or since the last reduction).
    pub bad_epochs: u64,
    /// Current rate for the plateau schedule (`base_lr` until the first reduction).
    pub lr: Option<f64>,
}

/// A schedule and its state.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The settings.
    pub config: ScheduleConfig,
    /// Reduce-on-plateau's state (checkpointed, restored on resume).
    pub plateau: PlateauState,
}

impl Schedule {
    /// Checks the settings; an error names the one out of range.
    pub fn new(config: ScheduleConfig) -> Result<Self> {
        let c = &config;
        if !(c.base_lr.is_finite() && c.base_lr >= 0.0 && c.min_lr >= 0.0) {
            return Err(Error::Config(format!(
                "learning rates must be finite and >= 0 (lr {}, min lr {})",
                c.base_lr, c.min_lr
            )));
        }
        if c.kind == ScheduleKind::Step
            && (c.step_epochs == 0 || c.gamma.is_nan() || c.gamma <= 0.0)
        {
            return Err(Error::Config(
                "step decay needs --lr-step-epochs >= 1 and --lr-gamma > 0".into(),
            ));
        }
        if c.kind == ScheduleKind::Plateau
            && (c.plateau_factor.is_nan() || c.plateau_factor <= 0.0 || c.plateau_factor >= 1.0)
        {
            return Err(Error::Config(format!(
                "--plateau-factor {} must be in (0, 1)",
                c.plateau_factor
            )));
        }
        Ok(Schedule {
            config,
            plateau: PlateauState::default(),
        })
    }

    /// The rate for optimizer step `step` (0-based).
    pub fn lr(&self, step: u64) -> f64 {
        let c = &self.config;
        if step < c.warmup_steps {
            return c.base_lr * (step + 1) as f64 / c.warmup_steps as f64;
        }
        match c.kind {
            ScheduleKind::Constant => c.base_lr,
            ScheduleKind::Cosine => {
                let span = c.total_steps.saturating_sub(c.warmup_steps).max(1);
                let t = ((step - c.warmup_steps) as f64 / span as f64).min(1.0);
                c.min_lr + (c.base_lr - c.min_lr) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
            }
            ScheduleKind::Step => {
                let epoch = step / c.steps_per_epoch.max(1);
                c.base_lr * c.gamma.powf((epoch / c.step_epochs) as f64)
            }
            ScheduleKind::Plateau => self.plateau.lr.unwrap_or(c.base_lr),
        }
    }

    /// End of an epoch: reduce-on-plateau looks at `metric` (lower is better for val_loss and
    /// training loss, higher for val_accuracy). Returns the new rate when it was reduced.
    pub fn end_epoch(&mut self, monitor: Monitor, metric: f64) -> Option<f64> {
        let c = self.config;
        if c.kind != ScheduleKind::Plateau {
            return None;
        }
        let p = &mut self.plateau;
        match p.best {
            Some(best) if !monitor.improves(metric, best, 0.0) => p.bad_epochs += 1,
            _ => {
                p.best = Some(metric);
                p.bad_epochs = 0;
            }
        }
        if p.bad_epochs > c.plateau_patience {
            let lr = (p.lr.unwrap_or(c.base_lr) * c.plateau_factor).max(c.min_lr);
            p.lr = Some(lr);
            p.bad_epochs = 0;
            return Some(lr);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: ScheduleKind) -> ScheduleConfig {
        ScheduleConfig {
            kind,
            base_lr: 1.0,
            warmup_steps: 0,
            total_steps: 10,
            steps_per_epoch: 2,
            min_lr: 0.0,
            step_epochs: 2,
            gamma: 0.5,
            plateau_factor: 0.1,
            plateau_patience: 1,
        }
    }

    fn seq(s: &Schedule, n: u64) -> Vec<f64> {
        (0..n).map(|i| s.lr(i)).collect()
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn warmup_then_constant() {
        let s = Schedule::new(ScheduleConfig {
            warmup_steps: 4,
            ..cfg(ScheduleKind::Constant)
        })
        .unwrap();
        close(&seq(&s, 6), &[0.25, 0.5, 0.75, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn cosine_with_warmup_ends_at_min_lr() {
        let s = Schedule::new(ScheduleConfig {
            warmup_steps: 2,
            total_steps: 6,
            min_lr: 0.1,
            ..cfg(ScheduleKind::Cosine)
        })
        .unwrap();
        // After warmup: t = 0, 1/4, 1/2, 3/4, then 1 (clamped).
        let c = |t: f64| 0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * t).cos());
        close(
            &seq(&s, 7),
            &[0.5, 1.0, c(0.0), c(0.25), c(0.5), c(0.75), 0.1],
        );
    }

    #[test]
    fn step_decay_halves_every_two_epochs() {
        let s = Schedule::new(cfg(ScheduleKind::Step)).unwrap();
        // 2 steps per epoch: epochs 0,1 -> 1; 2,3 -> 0.5; 4 -> 0.25.
        close(
            &seq(&s, 10),
            &[1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25],
        );
        assert!(Schedule::new(ScheduleConfig {
            step_epochs: 0,
            ..cfg(ScheduleKind::Step)
        })
        .is_err());
    }

    #[test]
    fn plateau_reduces_after_patience_epochs_without_improvement() {
        let mut s = Schedule::new(ScheduleConfig {
            min_lr: 0.005,
            ..cfg(ScheduleKind::Plateau)
        })
        .unwrap();
        let m = Monitor::ValLoss;
        let mut lrs = Vec::new();
        for loss in [1.0, 0.9, 0.95, 0.91, 0.92, 0.93, 0.8, 0.85, 0.86, 0.9, 0.9] {
            s.end_epoch(m, loss);
            lrs.push(s.lr(100));
        }
        // Patience 1: the second epoch in a row without improvement reduces (then resets).
        close(
            &lrs,
            &[
                1.0, 1.0, 1.0, 0.1, 0.1, 0.01, 0.01, 0.01, 0.005, 0.005, 0.005,
            ],
        );
        assert!(Schedule::new(ScheduleConfig {
            plateau_factor: 1.5,
            ..cfg(ScheduleKind::Plateau)
        })
        .is_err());
    }
}
