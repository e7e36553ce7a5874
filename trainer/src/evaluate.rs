//! Evaluation on a test split, data-parallel: each rank takes a contiguous share of the
//! samples (every sample counted exactly once, the remainder spread over the first ranks,
//! none dropped), sums its loss and correct predictions, and the sums are allreduced, so p
//! ranks report what one would.

use std::ops::Range;

use tch::nn::ModuleT;
use tch::Kind;

use crate::comm::Comm;
use crate::data::Dataset;
use crate::error::{Error, Result};

/// Loss and accuracy over a whole split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// Mean cross-entropy per sample.
    pub loss: f64,
    /// Fraction of samples whose most likely class is the label.
    pub accuracy: f64,
    /// Samples counted (the split's size).
    pub samples: u64,
}

/// Rank `rank`'s share of `n` samples over `ranks` ranks: `n / ranks` contiguous samples,
/// one more for the first `n % ranks` ranks. The shares partition `0..n`.
pub fn share(n: usize, ranks: usize, rank: usize) -> Range<usize> {
    let base = n / ranks;
    let extra = n % ranks;
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

/// Evaluates `model` (in inference mode, without gradients) on `data` in batches of at most
/// `batch` samples per rank; collective.
pub fn evaluate(
    comm: &Comm,
    model: &dyn ModuleT,
    data: &Dataset,
    batch: usize,
) -> Result<Evaluation> {
    if batch == 0 {
        return Err(Error::Config(
            "the evaluation batch must be positive".into(),
        ));
    }
    let mine = share(data.len(), comm.size(), comm.rank());
    let mut sums = [0f64; 3]; // loss, correct, samples
    let mut at = mine.start;
    while at < mine.end {
        let end = (at + batch).min(mine.end);
        let (x, y) = data.slice(at..end)?;
        let (loss, correct) = tch::no_grad(|| -> Result<(f64, f64)> {
            let logits = crate::fit::forward(model, &x, false)?;
            let loss = logits.f_log_softmax(-1, Kind::Float)?.f_nll_loss(
                &y,
                None::<tch::Tensor>,
                tch::Reduction::Sum,
                -100,
            )?;
            let correct = logits
                .f_argmax(-1, false)?
                .f_eq_tensor(&y)?
                .f_sum(Kind::Float)?;
            Ok((loss.f_double_value(&[])?, correct.f_double_value(&[])?))
        })?;
        sums[0] += loss;
        sums[1] += correct;
        sums[2] += (end - at) as f64;
        at = end;
    }
    comm.sum_f64(&mut sums)?;
    let samples = sums[2].round() as u64;
    if samples != data.len() as u64 {
        return Err(Error::Comm(format!(
            "evaluation counted {samples} samples of {}",
            data.len()
        )));
    }
    Ok(Evaluation {
        loss: sums[0] / sums[2].max(1.0),
        accuracy: sums[1] / sums[2].max(1.0),
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_partition_the_split_with_the_remainder_spread() {
        for n in [0usize, 1, 5, 10_000, 10_001, 10_002] {
            for p in 1..=5 {
                let shares: Vec<_> = (0..p).map(|r| share(n, p, r)).collect();
                assert_eq!(shares[0].start, 0);
                assert_eq!(shares[p - 1].end, n);
                for w in shares.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
                let lens: Vec<usize> = shares.iter().map(|s| s.len()).collect();
                assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
            }
        }
        assert_eq!(share(10, 3, 0), 0..4);
        assert_eq!(share(10, 3, 2), 7..10);
    }
}
