//! The `train` binary's inputs: real MNIST IDX files (small ones made here) and clear errors
//! for bad arguments, on every rank and without hanging.

mod common;

use common::*;
use trainer::data::{write_idx, MNIST_TRAIN_IMAGES, MNIST_TRAIN_LABELS};

#[test]
fn trains_on_mnist_idx_files() {
    let scratch = Scratch::new("idx");
    let n = 40;
    let images: Vec<u8> = (0..n * 28 * 28).map(|i| ((i * 7) % 256) as u8).collect();
    let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    write_idx(&scratch.path(MNIST_TRAIN_IMAGES), &[n, 28, 28], &images).unwrap();
    write_idx(&scratch.path(MNIST_TRAIN_LABELS), &[n], &labels).unwrap();
    let data = scratch.0.display().to_string();
    let out = train_ok(
        2,
        &[
            "--data-dir",
            &data,
            "--batch-size",
            "8",
            "--model",
            "mlp",
            "--hidden",
            "16",
        ],
    );
    assert!(
        out.ranks[0].stdout.contains("done: 5 steps on 2 rank(s)"),
        "{}",
        out.report()
    );

    std::fs::write(scratch.path(MNIST_TRAIN_LABELS), b"not idx").unwrap();
    let out = run_train(1, &["--data-dir", &data]);
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
