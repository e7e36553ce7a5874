//! Gradient accumulation and clipping equal their single-process definitions: k micro-steps of
//! global batch B on 2 ranks give the weights of one step of batch kB on one rank, and clipping
//! (computed from the summed gradients) gives the same weights on 1 and 2 ranks.

mod common;

use common::*;

const ATOL: f64 = 1e-5;
const RTOL: f64 = 1e-4;

fn weights_after(
    name: &str,
    n: u16,
    args: &[&str],
) -> std::collections::HashMap<String, tch::Tensor> {
    let scratch = Scratch::new(&format!("{name}-{n}"));
    let dir = scratch.path("ckpt").display().to_string();
    let mut all = vec![
        "--model",
        "mlp",
        "--hidden",
        "32",
        "--samples",
        "96",
        "--epochs",
        "2",
        "--checkpoint-dir",
        &dir,
    ];
    all.extend_from_slice(args);
    train_ok(n, &all);
    load_weights(std::path::Path::new(&dir))
}

#[test]
fn accumulation_over_k_micro_steps_equals_one_k_times_larger_batch() {
    let accumulated = weights_after("accum", 2, &["--batch-size", "8", "--grad-accum", "3"]);
    let large = weights_after("accum-ref", 1, &["--batch-size", "24"]);
    let excess = max_weight_excess(&accumulated, &large, ATOL, RTOL);
    assert!(
        excess <= 0.0,
        "weights differ by {excess} beyond the tolerance"
    );
    // And it is not vacuous: without accumulation the weights differ.
    let small = weights_after("accum-none", 2, &["--batch-size", "8"]);
    assert!(max_weight_excess(&small, &large, ATOL, RTOL) > 0.0);
}

#[test]
fn clipping_and_adamw_give_the_same_weights_on_1_and_2_ranks() {
    let args = [
        "--batch-size",
        "12",
        "--optimizer",
        "adamw",
        "--weight-decay",
        "0.05",
        "--lr",
        "0.01",
        "--clip-grad-norm",
        "0.05",
    ];
    let one = weights_after("clip", 1, &args);
    let two = weights_after("clip", 2, &args);
    let excess = max_weight_excess(&two, &one, ATOL, RTOL);
    assert!(
        excess <= 0.0,
        "weights differ by {excess} beyond the tolerance"
    );
    // The clipping is active: without it the weights differ.
    let unclipped = weights_after("clip-none", 1, &args[..8]);
    assert!(max_weight_excess(&unclipped, &one, ATOL, RTOL) > 0.0);
}
