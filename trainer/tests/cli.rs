//! The `train` binary's inputs: real MNIST IDX files (small ones made here) and clear errors
//! for bad arguments, on every rank and without hanging.

mod common;

use common::*;
use trainer::data::{
    write_idx, MNIST_TEST_IMAGES, MNIST_TEST_LABELS, MNIST_TRAIN_IMAGES, MNIST_TRAIN_LABELS,
};

/// Writes a small MNIST-like split (`n` images, labels `i % 10`) to `dir`.
fn write_split(dir: &Scratch, images_name: &str, labels_name: &str, n: usize) {
    let images: Vec<u8> = (0..n * 28 * 28).map(|i| ((i * 7) % 256) as u8).collect();
    let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    write_idx(&dir.path(images_name), &[n, 28, 28], &images).unwrap();
    write_idx(&dir.path(labels_name), &[n], &labels).unwrap();
}

#[test]
fn trains_on_idx_files_and_validates_every_test_sample() {
    let scratch = Scratch::new("idx");
    // Training split plain, test split gzipped (as published), 13 test samples: 3 ranks
    // take 5, 4 and 4.
    write_split(&scratch, MNIST_TRAIN_IMAGES, MNIST_TRAIN_LABELS, 40);
    let (ti, tl) = (
        format!("{MNIST_TEST_IMAGES}.gz"),
        format!("{MNIST_TEST_LABELS}.gz"),
    );
    write_split(&scratch, &ti, &tl, 13);
    let data = scratch.0.display().to_string();
    let csv = scratch.path("metrics.csv").display().to_string();
    let args = [
        "--dataset",
        "mnist",
        "--data-dir",
        &data,
        "--batch-size",
        "8",
        "--epochs",
        "2",
        "--model",
        "mlp",
        "--hidden",
        "16",
        "--metrics-csv",
        &csv,
    ];
    let out = train_ok(3, &args);
    let stdout = &out.ranks[0].stdout;
    assert!(
        stdout.contains("done: 10 steps on 3 rank(s)"),
        "{}",
        out.report()
    );
    assert!(stdout.contains("(13 samples)"), "{}", out.report());
    assert!(
        stdout.contains("Epoch 2/2 - ") && stdout.contains(" - val_accuracy: "),
        "{}",
        out.report()
    );
    let rows = std::fs::read_to_string(scratch.path("metrics.csv")).unwrap();
    let rows: Vec<&str> = rows.lines().collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows[0].starts_with("epoch,lr,loss,accuracy,val_loss,val_accuracy"));
    assert_eq!(rows[2].split(',').count(), 8, "{rows:?}");

    // Without the test split: a clear error naming the missing file, on every rank.
    std::fs::remove_file(scratch.path(&ti)).unwrap();
    let out = run_train(2, &args[..8]);
    for r in &out.ranks {
        assert_eq!(r.status.and_then(|s| s.code()), Some(1), "{}", out.report());
        assert!(r.stderr.contains(MNIST_TEST_IMAGES), "{}", out.report());
    }
    // A corrupted file is named.
    std::fs::write(scratch.path(MNIST_TRAIN_LABELS), b"not idx").unwrap();
    let out = run_train(1, &["--dataset", "mnist", "--data-dir", &data]);
    assert_eq!(out.ranks[0].status.and_then(|s| s.code()), Some(1));
    assert!(
        out.ranks[0].stderr.contains(MNIST_TRAIN_LABELS),
        "{}",
        out.report()
    );
}

#[test]
fn bad_arguments_are_clear_errors_on_every_rank() {
    // Fewer samples in the global batch than ranks.
    let out = run_train(3, &["--batch-size", "2", "--samples", "64"]);
    assert!(!out.timed_out, "{}", out.report());
    for r in &out.ranks {
        assert_eq!(r.status.and_then(|s| s.code()), Some(1), "{}", out.report());
        assert!(
            r.stderr.contains("smaller than the number of ranks"),
            "{}",
            r.stderr
        );
    }
    let out = run_train(1, &["--batch-size", "0"]);
    assert!(
        out.ranks[0].stderr.contains("global batch size 0"),
        "{}",
        out.report()
    );
    let out = run_train(1, &["--fusion-threshold", "1.5"]);
    assert_eq!(
        out.ranks[0].status.and_then(|s| s.code()),
        Some(2),
        "clap usage error"
    );
}

#[test]
fn every_model_trains_a_step_on_two_ranks() {
    for model in ["lenet5", "mlp", "resnet", "transformer"] {
        let out = train_ok(
            2,
            &[
                "--model",
                model,
                "--batch-size",
                "8",
                "--samples",
                "32",
                "--max-steps",
                "2",
            ],
        );
        assert!(
            out.ranks[0].stdout.contains("done: 2 steps"),
            "{model}: {}",
            out.report()
        );
        // Micro-batch 4 < 16: the master warns about BatchNorm, for the ResNet only.
        let warned = out.ranks[0].stderr.contains("BatchNorm");
        assert_eq!(
            warned,
            model == "resnet",
            "{model}: {}",
            out.ranks[0].stderr
        );
    }
}
