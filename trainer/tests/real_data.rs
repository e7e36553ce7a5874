//! Global-batch semantics on the real Fashion-MNIST (installed by scripts/setup.sh at
//! /usr/share/datasets/fashion-mnist), on a subset of 6,000 training and 2,000 test images
//! to stay short on a 2-core machine: 2 ranks compute exactly what one process
//! accumulating the same micro-batches computes, and 1, 2 and 3 ranks learn the task alike.

mod common;

use common::*;

/// The epoch-2 test line's loss and accuracy (in %), from rank 0's output.
fn test_result(out: &gaspi::testing::JobOutcome) -> (f64, f64) {
    let line = out.ranks[0]
        .stdout
        .lines()
        .find(|l| l.starts_with("test (epoch 2)"))
        .unwrap_or_else(|| panic!("no test line: {}", out.report()))
        .to_owned();
    let number = |key: &str| -> f64 {
        let rest = &line[line.find(key).unwrap() + key.len()..];
        let word = rest.split_whitespace().next().unwrap();
        word.trim_end_matches('%').parse().unwrap()
    };
    (number("loss "), number("accuracy "))
}

/// Trains LeNet-5 for 2 epochs on `n` ranks with `extra` arguments.
fn train_2_epochs(n: u16, extra: &[&str]) -> (f64, f64) {
    let dir = std::path::Path::new(trainer::data::FASHION_MNIST_DIR);
    assert!(
        dir.join("t10k-labels-idx1-ubyte.gz").is_file(),
        "Fashion-MNIST is missing in {}: run scripts/setup.sh (apt-get install \
         dataset-fashion-mnist)",
        dir.display()
    );
    let mut args = vec![
        "--dataset",
        "fashion-mnist",
        "--model",
        "lenet5",
        "--train-subset",
        "6000",
        "--test-subset",
        "2000",
        "--epochs",
        "2",
        "--optimizer",
        "adam",
        "--lr",
        "0.002",
        "--validation-freq",
        "2",
    ];
    args.extend_from_slice(extra);
    test_result(&train_ok(n, &args))
}

/// 2 ranks of 32 images each per step do the same arithmetic as one process accumulating
/// the same two micro-batches of 32: the sum of two gradients does not depend on its
/// order and halving is exact, so the runs end with the same test accuracy (and loss, up
/// to the order in which the evaluation sums it). A wrong shard, a wrong average or a
/// missed bucket changes the trajectory at once.
#[test]
fn two_ranks_train_exactly_as_one_process_accumulating_their_micro_batches() {
    let (loss_2, acc_2) = train_2_epochs(2, &["--batch-size", "64"]);
    let (loss_1, acc_1) = train_2_epochs(1, &["--batch-size", "32", "--grad-accum", "2"]);
    assert!(acc_1 > 70.0, "it learns: {acc_1}%");
    assert_eq!(
        acc_2, acc_1,
        "test accuracy, 2 ranks against 1 accumulating"
    );
    assert!(
        (loss_2 - loss_1).abs() <= 2e-4,
        "test loss {loss_2} on 2 ranks, {loss_1} on 1 accumulating"
    );
}

/// 1, 2 and 3 ranks with the same seed and global batch reach test accuracies within 1.5
/// points of each other. Why not closer: after 2 epochs the accuracy is chaotic in the
/// rounding of the gradient sums. In one process, the same global batch of 64 taken as
/// micro-batches of 64, 32 or 16 ended at 82.10%, 81.80% and 81.85% on an AVX-512 EPYC
/// (and 1, 2, 3 ranks at 82.10, 81.80 and 81.55), while seeds 1-3 moved it across
/// 80.65-83.05%. An earlier bound of 0.3 points held on one CPU's rounding and not on the
/// next; the exact test above carries the semantics.
#[test]
fn one_two_and_three_ranks_reach_the_same_test_accuracy() {
    let acc: Vec<f64> = (1..=3u16)
        .map(|n| train_2_epochs(n, &["--batch-size", "64"]).1)
        .collect();
    assert!(acc[0] > 70.0, "it learns: {acc:?}");
    let spread =
        acc.iter().cloned().fold(f64::MIN, f64::max) - acc.iter().cloned().fold(f64::MAX, f64::min);
    assert!(
        spread <= 1.5,
        "test accuracies {acc:?} differ by {spread} points"
    );
}
