//! SGD (with momentum) and Adam over tch tensors, with state that checkpoints can save and
//! restore exactly (tch's built-in optimizers do not expose their state).

use tch::{Kind, Tensor};

use crate::error::{Error, Result};

/// Which update rule, with its hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptimizerKind {
    Sgd {
        momentum: f64,
        weight_decay: f64,
    },
    Adam {
        beta1: f64,
        beta2: f64,
        eps: f64,
        weight_decay: f64,
    },
}

impl OptimizerKind {
    pub const SGD: OptimizerKind = OptimizerKind::Sgd {
        momentum: 0.9,
        weight_decay: 0.0,
    };
    pub const ADAM: OptimizerKind = OptimizerKind::Adam {
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
    };

    fn slots(self) -> usize {
        match self {
            OptimizerKind::Sgd { momentum: 0.0, .. } => 0,
            OptimizerKind::Sgd { .. } => 1,
            OptimizerKind::Adam { .. } => 2,
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

    pub fn lr(&self) -> f64 {
        self.lr
    }

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

    /// One update from the current gradients.
    pub fn step(&mut self) -> Result<()> {
        self.steps += 1;
        let (lr, t) = (self.lr, self.steps as f64);
        let kind = self.kind;
        let params = &self.params;
        let state = &mut self.state;
        tch::no_grad(|| -> Result<()> {
            for (i, p) in params.iter().enumerate() {
                let g = p.grad();
                if !g.defined() {
                    continue;
                }
                let mut p = p.shallow_clone();
                match kind {
                    OptimizerKind::Sgd {
                        momentum,
                        weight_decay,
                    } => {
                        let mut d = if weight_decay != 0.0 {
                            g.f_add(&(&p * weight_decay))?
                        } else {
                            g
                        };
                        if momentum != 0.0 {
                            let buf = &mut state[0][i];
                            let _ = buf.f_mul_scalar_(momentum)?.f_add_(&d)?;
                            d = buf.shallow_clone();
                        }
                        let _ = p.f_sub_(&(d * lr))?;
                    }
                    OptimizerKind::Adam {
                        beta1,
                        beta2,
                        eps,
                        weight_decay,
                    } => {
                        let g = if weight_decay != 0.0 {
                            g.f_add(&(&p * weight_decay))?
                        } else {
                            g
                        };
                        let (m_slot, v_slot) = state.split_at_mut(1);
                        let m = &mut m_slot[0][i];
                        let v = &mut v_slot[0][i];
                        let _ = m.f_mul_scalar_(beta1)?.f_add_(&(&g * (1.0 - beta1)))?;
                        let _ = v.f_mul_scalar_(beta2)?.f_add_(&(&g * &g * (1.0 - beta2)))?;
                        let m_hat = &*m / (1.0 - beta1.powf(t));
                        let v_hat = &*v / (1.0 - beta2.powf(t));
                        let update = m_hat / (v_hat.sqrt() + eps) * lr;
                        let _ = p.f_sub_(&update)?;
                    }
                }
            }
            Ok(())
        })
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

fn parse_state_name(name: &str) -> Option<(usize, usize)> {
    let (slot, param) = name.strip_prefix("slot")?.split_once(".param")?;
    Some((slot.parse().ok()?, param.parse().ok()?))
}
