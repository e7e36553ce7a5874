//! Gradient accumulation (`--grad-accum`): the allreduced gradients of each micro-step of an
//! optimizer step are summed aside, then put back into `.grad` for the optimizer.

use tch::Tensor;

use crate::error::Result;

/// The gradient sums of the current optimizer step, one tensor per parameter.
#[derive(Default)]
pub(super) struct GradAccumulator {
    sums: Vec<Tensor>,
}

impl GradAccumulator {
    /// Adds the (already allreduced) gradients of one micro-step (`first`: overwrite what the
    /// last optimizer step left).
    pub(super) fn add(&mut self, params: &[Tensor], first: bool) -> Result<()> {
        if self.sums.len() != params.len() {
            self.sums = params.iter().map(Tensor::zeros_like).collect();
        }
        tch::no_grad(|| -> Result<()> {
            for (a, p) in self.sums.iter_mut().zip(params) {
                let g = p.grad();
                if first {
                    let _ = a.f_zero_()?;
                }
                if g.defined() {
                    let _ = a.f_add_(&g)?;
                }
            }
            Ok(())
        })
    }

    /// Puts the accumulated gradients into `.grad` for the optimizer.
    pub(super) fn install(&self, params: &[Tensor]) -> Result<()> {
        tch::no_grad(|| -> Result<()> {
            for (a, p) in self.sums.iter().zip(params) {
                let mut g = p.grad();
                if g.defined() {
                    g.f_copy_(a)?;
                }
            }
            Ok(())
        })
    }
}
