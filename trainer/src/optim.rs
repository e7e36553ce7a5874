//! SGD (with momentum and L2 weight decay), Adam and AdamW (decoupled weight decay, Loshchilov &
//! Hutter) over tch tensors, with state that checkpoints can save and restore exactly (tch's
//! built-in optimizers do not expose their state), and gradient clipping by global norm.

use tch::{Kind, Tensor};

use crate::error::{Error, Result};
use crate::multi_tensor::{self, AdamUpdate};

/// Which update rule, with its hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Stochastic gradient descent with momentum; weight decay as L2 added to the gradient.
    Sgd {
        /// Momentum factor (0: plain SGD, no state).
        momentum: f64,
        /// L2 penalty added to the gradient.
        weight_decay: f64,
    },
    /// Adam (Kingma & Ba); weight decay as L2 added to the gradient.
    Adam {
        /// Decay of the first-moment estimate.
        beta1: f64,
        /// Decay of the second-moment estimate.
        beta2: f64,
        /// Added to the denominator for numerical stability.
        eps: f64,
        /// L2 penalty added to the gradient.
        weight_decay: f64,
    },
    /// Adam with decoupled weight decay: `p -= lr * weight_decay * p` before the Adam update.
    AdamW {
        /// Decay of the first-moment estimate.
        beta1: f64,
        /// Decay of the second-moment estimate.
        beta2: f64,
        /// Added to the denominator for numerical stability.
        eps: f64,
        /// Decoupled decay rate (times the learning rate).
        weight_decay: f64,
    },
}

impl OptimizerKind {
    /// SGD with momentum 0.9 and no weight decay (`train`'s defaults). A constructor, not a
    /// second spelling of the variant: [`OptimizerKind::Sgd`] is the one name of SGD.
    pub const fn sgd() -> OptimizerKind {
        OptimizerKind::Sgd {
            momentum: 0.9,
            weight_decay: 0.0,
        }
    }

    /// Adam with PyTorch's defaults (betas 0.9 and 0.999, eps 1e-8, no weight decay).
    pub const fn adam() -> OptimizerKind {
        OptimizerKind::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }

    fn slots(self) -> usize {
        match self {
            OptimizerKind::Sgd { momentum: 0.0, .. } => 0,
            OptimizerKind::Sgd { .. } => 1,
            OptimizerKind::Adam { .. } | OptimizerKind::AdamW { .. } => 2,
        }
    }

    /// Short name (`sgd`, `adam`, `adamw`), as `train --optimizer` spells it.
    pub fn name(self) -> &'static str {
        match self {
            OptimizerKind::Sgd { .. } => "sgd",
            OptimizerKind::Adam { .. } => "adam",
            OptimizerKind::AdamW { .. } => "adamw",
        }
    }
}

/// Updates parameters from their `.grad`.
pub struct Optimizer {
    kind: OptimizerKind,
    params: Vec<Tensor>,
    /// Per slot, one tensor per parameter (momentum; or Adam's first and second moments).
    state: Vec<Vec<Tensor>>,
    lr: f64,
    steps: u64,
}

impl Optimizer {
    /// An optimizer over `params` (usually `DataParallel::params`) with learning rate `lr`.
    pub fn new(kind: OptimizerKind, params: &[Tensor], lr: f64) -> Result<Self> {
        if !(lr.is_finite() && lr >= 0.0) {
            return Err(Error::Config(format!(
                "learning rate {lr} is not a finite number >= 0"
            )));
        }
        let state = (0..kind.slots())
            .map(|_| params.iter().map(Tensor::zeros_like).collect())
            .collect();
        Ok(Optimizer {
            kind,
            params: params.iter().map(Tensor::shallow_clone).collect(),
            state,
            lr,
            steps: 0,
        })
    }

    /// The learning rate the next update uses.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Sets the learning rate of the next updates (the schedule calls it every step).
    pub fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    /// Updates applied so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    pub(crate) fn set_steps(&mut self, steps: u64) {
        self.steps = steps;
    }

    /// One update from the current gradients (parameters without a gradient are left alone).
    pub fn step(&mut self) -> Result<()> {
        self.steps += 1;
        match self.kind {
            OptimizerKind::Sgd {
                momentum,
                weight_decay,
            } => self.sgd_step(momentum, weight_decay),
            OptimizerKind::Adam {
                beta1,
                beta2,
                eps,
                weight_decay,
            }
            | OptimizerKind::AdamW {
                beta1,
                beta2,
                eps,
                weight_decay,
            } => {
                let decoupled = matches!(self.kind, OptimizerKind::AdamW { .. });
                let update = AdamUpdate {
                    lr: self.lr,
                    beta1,
                    beta2,
                    eps,
                    weight_decay,
                    step: self.steps as f64,
                    decoupled: decoupled.into(),
                };
                self.adam_step(&update)
            }
        }
    }

    /// SGD over every parameter at once (multi-tensor ops: on a GPU a few kernel launches per
    /// step instead of one or more per parameter and operation).
    fn sgd_step(&mut self, momentum: f64, weight_decay: f64) -> Result<()> {
        let (mut params, mut grads, mut momenta) = (Vec::new(), Vec::new(), Vec::new());
        for (i, p) in self.params.iter().enumerate() {
            let g = p.grad();
            if !g.defined() {
                continue;
            }
            params.push(p.shallow_clone());
            grads.push(g);
            if momentum != 0.0 {
                momenta.push(self.state[0][i].shallow_clone());
            }
        }
        multi_tensor::sgd_step(&params, &grads, &momenta, self.lr, momentum, weight_decay)
    }

    /// Adam or AdamW over every parameter at once (multi-tensor ops).
    fn adam_step(&mut self, update: &AdamUpdate) -> Result<()> {
        let mut lists: [Vec<Tensor>; 4] = Default::default();
        for (i, p) in self.params.iter().enumerate() {
            let g = p.grad();
            if !g.defined() {
                continue;
            }
            lists[0].push(p.shallow_clone());
            lists[1].push(g);
            lists[2].push(self.state[0][i].shallow_clone());
            lists[3].push(self.state[1][i].shallow_clone());
        }
        let [params, grads, exp_avgs, exp_avg_sqs] = &lists;
        multi_tensor::adam_step(params, grads, exp_avgs, exp_avg_sqs, update)
    }

    /// The state tensors with stable names, for checkpoints.
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (slot, tensors) in self.state.iter().enumerate() {
            for (i, t) in tensors.iter().enumerate() {
                out.push((format!("slot{slot}.param{i}"), t.shallow_clone()));
            }
        }
        out
    }

    /// Restores state saved by [`Optimizer::state_tensors`] and the update count.
    pub fn load_state(&mut self, saved: &[(String, Tensor)], steps: u64) -> Result<()> {
        let expected = self.state.iter().map(Vec::len).sum::<usize>();
        if saved.len() != expected {
            return Err(Error::Config(format!(
                "optimizer state has {} tensors, this optimizer needs {expected}",
                saved.len()
            )));
        }
        for (name, value) in saved {
            let target = parse_state_name(name)
                .and_then(|(slot, i)| self.state.get_mut(slot)?.get_mut(i))
                .ok_or_else(|| Error::Config(format!("unknown optimizer state entry {name}")))?;
            if target.size() != value.size() {
                return Err(Error::Config(format!(
                    "optimizer state {name} has shape {:?}, expected {:?}",
                    value.size(),
                    target.size()
                )));
            }
            tch::no_grad(|| target.f_copy_(&value.to_kind(Kind::Float)))?;
        }
        self.steps = steps;
        Ok(())
    }
}

/// Scales the gradients of `params` so that their global L2 norm is at most `max_norm`
/// (PyTorch's `clip_grad_norm_`: factor `max_norm / (norm + 1e-6)` when the norm exceeds it).
/// Returns the norm before clipping. On data-parallel replicas the gradients are the summed
/// ones, identical on every rank, so every rank computes the same norm and factor.
pub fn clip_grad_norm(params: &[Tensor], max_norm: f64) -> Result<f64> {
    if !(max_norm.is_finite() && max_norm > 0.0) {
        return Err(Error::Config(format!(
            "gradient clipping norm {max_norm} must be a finite number > 0"
        )));
    }
    tch::no_grad(|| -> Result<f64> {
        let mut sq = 0f64;
        let grads: Vec<Tensor> = params
            .iter()
            .map(Tensor::grad)
            .filter(Tensor::defined)
            .collect();
        for g in &grads {
            sq += g.f_square()?.f_sum(Kind::Double)?.f_double_value(&[])?;
        }
        let norm = sq.sqrt();
        if norm > max_norm {
            let factor = max_norm / (norm + 1e-6);
            for g in &grads {
                let _ = g.shallow_clone().f_mul_scalar_(factor)?;
            }
        }
        Ok(norm)
    })
}

fn parse_state_name(name: &str) -> Option<(usize, usize)> {
    let (slot, param) = name.strip_prefix("slot")?.split_once(".param")?;
    Some((slot.parse().ok()?, param.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(value: f32, grad: f32) -> Tensor {
        let p = Tensor::from_slice(&[value]).set_requires_grad(true);
        (&p * f64::from(grad)).sum(Kind::Float).backward();
        p
    }

    /// Adam by the formula, in f64, one scalar parameter with a constant gradient.
    fn adam_reference(p0: f64, g: f64, lr: f64, wd: f64, decoupled: bool, steps: u32) -> f64 {
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
        let (mut p, mut m, mut v) = (p0, 0.0, 0.0);
        for t in 1..=steps {
            let g = if decoupled { g } else { g + wd * p };
            if decoupled {
                p *= 1.0 - lr * wd;
            }
            m = b1 * m + (1.0 - b1) * g;
            v = b2 * v + (1.0 - b2) * g * g;
            let (bc1, bc2) = (1.0 - b1.powi(t as i32), 1.0 - b2.powi(t as i32));
            p -= lr / bc1 * m / ((v / bc2).sqrt() + eps);
        }
        p
    }

    #[test]
    fn adam_and_adamw_follow_the_formula_per_parameter_and_skip_those_without_gradients() {
        let (lr, wd) = (0.05, 0.2);
        for decoupled in [false, true] {
            let kind = if decoupled {
                OptimizerKind::AdamW {
                    beta1: 0.9,
                    beta2: 0.999,
                    eps: 1e-8,
                    weight_decay: wd,
                }
            } else {
                OptimizerKind::Adam {
                    beta1: 0.9,
                    beta2: 0.999,
                    eps: 1e-8,
                    weight_decay: wd,
                }
            };
            let (a, b) = (param(1.0, 2.0), param(-3.0, 0.5));
            let frozen = Tensor::from_slice(&[7.0f32]).set_requires_grad(true);
            let params = [a.shallow_clone(), frozen.shallow_clone(), b.shallow_clone()];
            let mut opt = Optimizer::new(kind, &params, lr).unwrap();
            for _ in 0..3 {
                opt.step().unwrap();
            }
            let want_a = adam_reference(1.0, 2.0, lr, wd, decoupled, 3);
            let want_b = adam_reference(-3.0, 0.5, lr, wd, decoupled, 3);
            assert!((a.double_value(&[0]) - want_a).abs() < 1e-5, "{kind:?}");
            assert!((b.double_value(&[0]) - want_b).abs() < 1e-5, "{kind:?}");
            assert_eq!(frozen.double_value(&[0]), 7.0, "{kind:?}");
        }
    }

    #[test]
    fn sgd_with_momentum_matches_the_formula() {
        let p = param(1.0, 2.0);
        let mut opt = Optimizer::new(OptimizerKind::sgd(), &[p.shallow_clone()], 0.1).unwrap();
        opt.step().unwrap(); // buf = 2, p = 1 - 0.2
        opt.step().unwrap(); // buf = 0.9 * 2 + 2 = 3.8, p = 0.8 - 0.38
        assert!((p.double_value(&[0]) - 0.42).abs() < 1e-6);
        assert_eq!(opt.steps(), 2);
    }

    #[test]
    fn adam_first_step_moves_by_lr_against_the_gradient_sign() {
        let p = param(1.0, -3.0);
        let mut opt = Optimizer::new(OptimizerKind::adam(), &[p.shallow_clone()], 0.01).unwrap();
        opt.step().unwrap();
        assert!((p.double_value(&[0]) - 1.01).abs() < 1e-6);
        let state = opt.state_tensors();
        assert_eq!(state.len(), 2);
        let mut other = Optimizer::new(OptimizerKind::adam(), &[p.shallow_clone()], 0.01).unwrap();
        other.load_state(&state, 1).unwrap();
        assert_eq!(other.steps(), 1);
        assert!(other.state_tensors()[1].1.equal(&state[1].1));
        assert!(other.load_state(&state[..1], 1).is_err());
    }

    #[test]
    fn adamw_decays_weights_apart_from_the_gradient_moments() {
        // One step by the definition: p' = p (1 - lr wd) - lr m^ / (sqrt(v^) + eps), with
        // m^ = g and v^ = g^2 on the first step; Adam with L2 would use g + wd p instead.
        let (lr, wd, eps, g, p0) = (0.1, 0.5, 1e-8, 2.0f64, 3.0f64);
        let kind = OptimizerKind::AdamW {
            beta1: 0.9,
            beta2: 0.999,
            eps,
            weight_decay: wd,
        };
        let p = param(p0 as f32, g as f32);
        let mut opt = Optimizer::new(kind, &[p.shallow_clone()], lr).unwrap();
        opt.step().unwrap();
        let expected = p0 * (1.0 - lr * wd) - lr * g / (g.abs() + eps);
        assert!((p.double_value(&[0]) - expected).abs() < 1e-6);
        // Second step with the same gradient, by the recurrences.
        opt.step().unwrap();
        let (m, v) = (
            0.1 * g * 0.9 + 0.1 * g,
            0.001 * g * g * 0.999 + 0.001 * g * g,
        );
        let (mh, vh) = (m / (1.0 - 0.81), v / (1.0 - 0.999f64.powi(2)));
        let expected = expected * (1.0 - lr * wd) - lr * mh / (vh.sqrt() + eps);
        assert!((p.double_value(&[0]) - expected).abs() < 1e-5);
        assert_eq!(kind.name(), "adamw");
    }

    #[test]
    fn sgd_weight_decay_adds_l2_to_the_gradient() {
        let p = param(2.0, 1.0);
        let kind = OptimizerKind::Sgd {
            momentum: 0.0,
            weight_decay: 0.1,
        };
        let mut opt = Optimizer::new(kind, &[p.shallow_clone()], 0.5).unwrap();
        opt.step().unwrap(); // p = 2 - 0.5 * (1 + 0.1 * 2)
        assert!((p.double_value(&[0]) - 1.4).abs() < 1e-6);
    }

    #[test]
    fn clipping_scales_to_the_global_norm() {
        let a = param(0.0, 3.0);
        let b = param(0.0, 4.0); // global norm 5
        let params = [a.shallow_clone(), b.shallow_clone()];
        assert!((clip_grad_norm(&params, 10.0).unwrap() - 5.0).abs() < 1e-6);
        assert!(
            (a.grad().double_value(&[0]) - 3.0).abs() < 1e-6,
            "under the limit"
        );
        assert!((clip_grad_norm(&params, 1.0).unwrap() - 5.0).abs() < 1e-6);
        let f = 1.0 / (5.0 + 1e-6);
        assert!((a.grad().double_value(&[0]) - 3.0 * f).abs() < 1e-6);
        assert!((b.grad().double_value(&[0]) - 4.0 * f).abs() < 1e-6);
        assert!(clip_grad_norm(&params, 0.0).is_err());
    }

    #[test]
    fn bad_learning_rates_are_rejected() {
        assert!(Optimizer::new(OptimizerKind::sgd(), &[], f64::NAN).is_err());
        assert!(Optimizer::new(OptimizerKind::sgd(), &[], -1.0).is_err());
    }
}
