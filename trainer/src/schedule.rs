//! Learning-rate schedules, per optimizer step: linear warmup (Goyal et al.), then constant,
//! cosine decay to 0 over the rest of the run (`CosineAnnealingLR` after warmup in PyTorch,
//! `CosineDecay` in Keras), or step decay by `gamma` every `every` epochs (`StepLR`).

/// How the learning rate changes after warmup.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    Constant,
    /// From the base rate at the end of warmup down to 0 at the last step.
    Cosine,
    /// Multiplied by `gamma` every `every` epochs.
    Step {
        every: u64,
        gamma: f64,
    },
}

/// The rate of step `step` (0-based) of a run of `total_steps` steps, `steps_per_epoch` per
/// epoch, with `warmup_steps` of linear warmup from `base / warmup_steps` to `base`.
pub fn rate_at(
    schedule: Schedule,
    base: f64,
    step: u64,
    steps_per_epoch: u64,
    warmup_steps: u64,
    total_steps: u64,
) -> f64 {
    if step < warmup_steps {
        return base * (step + 1) as f64 / warmup_steps as f64;
    }
    match schedule {
        Schedule::Constant => base,
        Schedule::Cosine => {
            let span = total_steps.saturating_sub(warmup_steps).max(1);
            let t = (step - warmup_steps).min(span) as f64 / span as f64;
            0.5 * base * (1.0 + (std::f64::consts::PI * t).cos())
        }
        Schedule::Step { every, gamma } => {
            let epoch = step / steps_per_epoch.max(1);
            base * gamma.powi((epoch / every.max(1)) as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(s: Schedule, warmup: u64, total: u64) -> Vec<f64> {
        (0..total)
            .map(|k| rate_at(s, 1.0, k, 4, warmup, total))
            .collect()
    }

    #[test]
    fn warmup_then_constant() {
        assert_eq!(
            seq(Schedule::Constant, 4, 6),
            [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
        );
    }

    #[test]
    fn cosine_decays_from_base_to_zero_after_warmup() {
        let s = seq(Schedule::Cosine, 2, 6);
        assert_eq!(&s[..2], [0.5, 1.0]);
        // Steps 2..6 are t = 0, 1/4, 2/4, 3/4 of the span of 4.
        let want = [1.0, 0.853_553, 0.5, 0.146_447];
        for (got, want) in s[2..].iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{s:?}");
        }
        assert!(rate_at(Schedule::Cosine, 1.0, 6, 4, 2, 6).abs() < 1e-12);
    }

    #[test]
    fn step_decay_every_two_epochs() {
        let s = Schedule::Step {
            every: 2,
            gamma: 0.1,
        };
        let got: Vec<f64> = (0..24)
            .step_by(4)
            .map(|k| rate_at(s, 1.0, k, 4, 0, 24))
            .collect();
        let want = [1.0, 1.0, 0.1, 0.1, 0.01, 0.01];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
    }
}
