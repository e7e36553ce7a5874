//! Global-batch semantics on the real Fashion-MNIST (installed by scripts/setup.sh at
//! /usr/share/datasets/fashion-mnist): 1, 2 and 3 ranks with the same seed and global batch end
//! within 0.3 percentage points of each other in test accuracy after 2 epochs (on a subset of
//! 6,000 training and 2,000 test images, to stay short on a 2-core machine).

mod common;

use common::*;

fn test_accuracy(out: &gaspi::testing::JobOutcome) -> f64 {
    let line = out.ranks[0]
        .stdout
        .lines()
        .find(|l| l.starts_with("test (epoch 2)"))
        .unwrap_or_else(|| panic!("no test line: {}", out.report()))
        .to_owned();
    let rest = &line[line.find("accuracy ").unwrap() + 9..];
    rest.trim_end_matches('%').parse().unwrap()
}

#[test]
fn one_two_and_three_ranks_reach_the_same_test_accuracy() {
    let dir = std::path::Path::new(trainer::data::FASHION_MNIST_DIR);
    assert!(
        dir.join("t10k-labels-idx1-ubyte.gz").is_file(),
        "Fashion-MNIST is missing in {}: run scripts/setup.sh (apt-get install \
         dataset-fashion-mnist)",
        dir.display()
    );
    let mut acc = Vec::new();
    for n in 1..=3u16 {
        let out = train_ok(
            n,
            &[
                "--dataset",
                "fashion-mnist",
                "--model",
                "lenet5",
                "--train-subset",
                "6000",
                "--test-subset",
                "2000",
                "--batch-size",
                "64",
                "--epochs",
                "2",
                "--optimizer",
                "adam",
                "--lr",
                "0.002",
                "--validation-freq",
                "2",
            ],
        );
        acc.push(test_accuracy(&out));
    }
    assert!(acc[0] > 70.0, "it learns: {acc:?}");
    let spread =
        acc.iter().cloned().fold(f64::MIN, f64::max) - acc.iter().cloned().fold(f64::MAX, f64::min);
    assert!(
        spread <= 0.3,
        "test accuracies {acc:?} differ by {spread} points"
    );
}
