//! Global-batch semantics on real data: LeNet-5 on (a subset of) Fashion-MNIST for 2 epochs
//! with the same seed and global batch on 1, 2 and 3 ranks ends within 0.3 percentage points
//! of test accuracy (the full test split, evaluated data-parallel). Needs Debian's
//! `dataset-fashion-mnist` (scripts/setup.sh installs it).

mod common;

use common::*;

/// The test accuracy `train` reported ("test accuracy 87.12%").
fn test_accuracy(out: &gaspi::testing::JobOutcome) -> f64 {
    let line = &out.ranks[0].stdout;
    let at = line.find("test accuracy ").expect("a test accuracy") + "test accuracy ".len();
    line[at..]
        .split('%')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unreadable accuracy in {line}"))
}

#[test]
fn one_two_and_three_ranks_reach_the_same_test_accuracy() {
    let dir = trainer::data::FASHION_MNIST_SYSTEM_DIR;
    assert!(
        std::path::Path::new(dir)
            .join("t10k-labels-idx1-ubyte.gz")
            .is_file(),
        "{dir} is missing: run scripts/setup.sh (it installs dataset-fashion-mnist)"
    );
    let args = [
        "--dataset",
        "fashion-mnist",
        "--model",
        "lenet5",
        "--train-subset",
        "24000",
        "--batch-size",
        "250",
        "--epochs",
        "2",
        "--lr",
        "0.05",
        // Decaying to 0 lets the runs settle instead of ending mid-stride.
        "--lr-schedule",
        "cosine",
    ];
    let acc: Vec<f64> = [1u16, 2, 3]
        .iter()
        .map(|&n| {
            let out = train_ok(n, &args);
            assert!(
                out.ranks[0].stdout.contains("(10000 samples)"),
                "{}",
                out.report()
            );
            test_accuracy(&out)
        })
        .collect();
    let spread =
        acc.iter().cloned().fold(f64::MIN, f64::max) - acc.iter().cloned().fold(f64::MAX, f64::min);
    println!("test accuracy on 1, 2, 3 ranks: {acc:?} (spread {spread:.2} points)");
    assert!(acc[0] > 70.0, "it learned too little: {acc:?}");
    assert!(
        spread <= 0.3,
        "1, 2, 3 ranks differ by {spread:.2} points: {acc:?}"
    );
}
