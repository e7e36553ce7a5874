//! The `train` binary's inputs: real-layout IDX files (small ones made here, `.gz` and plain),
//! data-parallel validation, the metrics CSV, and clear errors for bad arguments and bad
//! files, on every rank and without hanging.

mod common;

use common::*;
use trainer::data::Split;
use trainer::testdata::write_dataset;

/// `test (epoch E): N samples, loss L accuracy A%` from the master's output.
fn test_line(out: &gaspi::testing::JobOutcome) -> (usize, f64, f64) {
    let line = out.ranks[0]
        .stdout
        .lines()
        .find(|l| l.starts_with("test (epoch"))
        .unwrap_or_else(|| panic!("no test line: {}", out.report()))
        .to_owned();
    let num = |after: &str, end: char| -> f64 {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest[..rest.find(end).unwrap()].trim().parse().unwrap()
    };
    (
        num("): ", ' ') as usize,
        num("loss ", ' '),
        num("accuracy ", '%'),
    )
}

#[test]
fn trains_and_validates_on_gz_idx_files() {
    let scratch = Scratch::new("idx");
    write_dataset(&scratch.0, 40, 23, true, 5).unwrap();
    let data = scratch.0.display().to_string();
    let csv = scratch.path("metrics.csv").display().to_string();
    let out = train_ok(
        2,
        &[
            "--dataset",
            "fashion-mnist",
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
        ],
    );
    let stdout = &out.ranks[0].stdout;
    assert!(
        stdout.contains("done: 10 steps on 2 rank(s)"),
        "{}",
        out.report()
    );
    assert!(
        stdout.contains("Epoch 1/2 - ") && stdout.contains(" - val_accuracy: "),
        "{stdout}"
    );
    assert!(out.ranks[1].stdout.is_empty(), "only the master prints");
    assert!(
        !out.ranks[0].stderr.contains("step "),
        "no per-step lines when piped: {}",
        out.ranks[0].stderr
    );
    assert_eq!(test_line(&out).0, 23);
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(rows[0], trainer::metrics::CSV_HEADER);
    assert!(rows[2].starts_with("2,"), "{text}");
    assert_eq!(rows[1].split(',').count(), 8);
    assert!(rows[1].split(',').all(|f| !f.is_empty()), "{text}");
}

#[test]
fn validation_counts_every_test_sample_once_on_1_2_3_ranks() {
    let scratch = Scratch::new("val");
    // 23 test samples: remainders 1 and 2 on 2 and 3 ranks.
    write_dataset(&scratch.0, 48, 23, false, 8).unwrap();
    let data = scratch.0.display().to_string();
    let mut results = Vec::new();
    for n in 1..=3u16 {
        let out = train_ok(
            n,
            &[
                "--data-dir",
                &data,
                "--batch-size",
                "12",
                "--model",
                "mlp",
                "--hidden",
                "16",
                "--eval-batch-size",
                "4",
            ],
        );
        results.push(test_line(&out));
    }
    for (n, r) in results.iter().enumerate() {
        assert_eq!(r.0, 23, "{} rank(s)", n + 1);
        assert!(
            (r.1 - results[0].1).abs() < 1e-4 * results[0].1.abs().max(1.0),
            "{results:?}"
        );
        assert_eq!(r.2, results[0].2, "{results:?}");
    }
}

#[test]
fn bad_data_files_are_errors_naming_the_file_on_every_rank() {
    let scratch = Scratch::new("bad-idx");
    write_dataset(&scratch.0, 16, 8, false, 1).unwrap();
    let data = scratch.0.display().to_string();
    let (_, labels) = Split::Train.file_names();
    std::fs::write(scratch.path(&labels), b"not idx").unwrap();
    let out = run_train(2, &["--data-dir", &data, "--batch-size", "8"]);
    assert!(!out.timed_out, "{}", out.report());
    for r in 0..2 {
        assert_eq!(code(&out, r), Some(1), "{}", out.report());
        assert!(out.ranks[r].stderr.contains(&labels), "{}", out.report());
    }
    write_dataset(&scratch.0, 16, 8, false, 1).unwrap();
    let (test_images, _) = Split::Test.file_names();
    std::fs::remove_file(scratch.path(&test_images)).unwrap();
    let out = run_train(1, &["--data-dir", &data, "--batch-size", "8"]);
    assert_eq!(code(&out, 0), Some(1));
    assert!(
        out.ranks[0].stderr.contains("missing test split"),
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
    let out = run_train(1, &["--dataset", "mnist"]);
    assert!(
        out.ranks[0].stderr.contains("--data-dir"),
        "{}",
        out.report()
    );
    let out = run_train(1, &["--early-stop-patience", "2"]);
    assert!(
        out.ranks[0].stderr.contains("test split"),
        "{}",
        out.report()
    );
    let out = run_train(1, &["--fusion-threshold", "1.5"]);
    assert_eq!(code(&out, 0), Some(2), "clap usage error");
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

#[test]
fn full_size_models_train_a_step_on_two_ranks_with_bf16_gradients() {
    // One sample per rank on the CPU: what runs on GPUs at full batch, at a size CI affords.
    for model in ["resnet50", "transformer-base"] {
        let out = train_ok(
            2,
            &[
                "--model",
                model,
                "--batch-size",
                "2",
                "--samples",
                "4",
                "--max-steps",
                "1",
                "--grad-dtype",
                "bf16",
                "--fusion-threshold",
                "1024",
            ],
        );
        assert!(
            out.ranks[0].stdout.contains("done: 1 steps"),
            "{model}: {}",
            out.report()
        );
    }
    // They take synthetic data on the device only.
    let out = run_train(1, &["--model", "resnet50", "--dataset", "fashion-mnist"]);
    assert_eq!(code(&out, 0), Some(1), "{}", out.report());
    assert!(out.ranks[0].stderr.contains("--dataset synthetic"));
}

#[test]
fn profile_reports_the_steps_of_a_run_that_max_steps_ends_inside_an_epoch() {
    // 64 samples at batch 8 make 8 steps an epoch; --max-steps 5 ends the run in the first.
    let args = [
        "--model",
        "mlp",
        "--batch-size",
        "8",
        "--samples",
        "64",
        "--max-steps",
        "5",
        "--profile",
    ];
    let out = train_ok(2, &args);
    let stdout = &out.ranks[0].stdout;
    // The first 2 steps are warm-up: the medians are over the other 3.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("profile: median over 3 steps: step ")),
        "{}",
        out.report()
    );
    // No GPU memory on the CPU.
    assert!(!stdout.contains("GPU memory"), "{}", out.report());
}
