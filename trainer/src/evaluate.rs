//! Data-parallel evaluation and prediction over a whole split, with the same global semantics
//! as training: rank r of p takes its contiguous share of the samples
//! ([`crate::shard::eval_range`]), sums of loss and correct predictions are allreduced, then
//! divided by the sample count. Every sample is counted exactly once, whatever p is; nothing is
//! dropped.

use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use crate::comm::Comm;
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::models::forward;
use crate::shard::eval_range;

/// Loss and accuracy over a split (the same on every rank).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EvalMetrics {
    /// Mean cross-entropy over all samples.
    pub loss: f64,
    /// Fraction of samples whose most probable class is the label.
    pub accuracy: f64,
    /// Samples counted, over all ranks: the split's size.
    pub samples: usize,
}

fn check_batch(batch: usize) -> Result<()> {
    if batch == 0 {
        return Err(Error::Config(
            "the evaluation batch size must be positive".into(),
        ));
    }
    Ok(())
}

/// Collective: evaluates `model` (inference mode) on all of `data`, `batch` samples per forward
/// pass on each rank.
pub fn evaluate(
    comm: &Comm,
    model: &dyn ModuleT,
    data: &Dataset,
    batch: usize,
    device: tch::Device,
) -> Result<EvalMetrics> {
    check_batch(batch)?;
    let share = eval_range(data.len(), comm.size(), comm.rank())?;
    let mut sums = [0f64; 3]; // loss sum, correct, samples
    let indices: Vec<usize> = share.collect();
    for chunk in indices.chunks(batch) {
        let (x, y) = data.batch(chunk)?;
        let (x, y) = (x.f_to_device(device)?, y.f_to_device(device)?);
        let (loss, correct) = tch::no_grad(|| -> Result<(f64, f64)> {
            let logits = forward(model, &x, false)?;
            let loss = logits.f_log_softmax(-1, Kind::Float)?.f_nll_loss(
                &y,
                None::<Tensor>,
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
        sums[2] += chunk.len() as f64;
    }
    comm.sum_f64(&mut sums)?;
    let samples = sums[2] as usize;
    if samples != data.len() {
        return Err(Error::EvaluationCount {
            counted: samples,
            split: data.len(),
        });
    }
    let n = samples.max(1) as f64;
    Ok(EvalMetrics {
        loss: sums[0] / n,
        accuracy: sums[1] / n,
        samples,
    })
}

/// One sample's prediction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// The most probable class.
    pub class: u8,
    /// Softmax probability of `class`.
    pub probability: f64,
}

/// Collective: the prediction for every sample of `data`, in order, on every rank (each rank
/// computes its share; the shares are combined with one sum).
pub fn predict(
    comm: &Comm,
    model: &dyn ModuleT,
    data: &Dataset,
    batch: usize,
    device: tch::Device,
) -> Result<Vec<Prediction>> {
    check_batch(batch)?;
    let share = eval_range(data.len(), comm.size(), comm.rank())?;
    // [class, probability] per sample; zeros outside this rank's share.
    let mut all = vec![0f64; 2 * data.len()];
    let indices: Vec<usize> = share.collect();
    for chunk in indices.chunks(batch) {
        let x = data.batch(chunk)?.0.f_to_device(device)?;
        let (prob, class) = tch::no_grad(|| -> Result<(Vec<f32>, Vec<i64>)> {
            let probs = forward(model, &x, false)?.f_softmax(-1, Kind::Float)?;
            let (prob, class) = probs.f_max_dim(-1, false)?;
            let (prob, class) = (
                prob.f_to_device(Device::Cpu)?,
                class.f_to_device(Device::Cpu)?,
            );
            Ok((Vec::<f32>::try_from(&prob)?, Vec::<i64>::try_from(&class)?))
        })?;
        for ((&i, p), c) in chunk.iter().zip(prob).zip(class) {
            all[2 * i] = c as f64;
            all[2 * i + 1] = f64::from(p);
        }
    }
    comm.sum_f64(&mut all)?;
    Ok(all
        .chunks_exact(2)
        .map(|pc| Prediction {
            class: pc[0] as u8,
            probability: pc[1],
        })
        .collect())
}

/// Writes `index,label,predicted,probability` rows for `predictions` of `data`.
pub fn write_predictions(
    path: &std::path::Path,
    data: &Dataset,
    predictions: &[Prediction],
) -> Result<()> {
    use std::io::Write;
    let io = |e| Error::io(path, e);
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::new(file);
    writeln!(out, "index,label,predicted,probability").map_err(io)?;
    for (i, p) in predictions.iter().enumerate() {
        let label = data.label(i).map(i64::from).unwrap_or(-1);
        writeln!(out, "{i},{label},{},{:.6}", p.class, p.probability).map_err(io)?;
    }
    out.flush().map_err(io)
}
