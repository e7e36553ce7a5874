//! Checkpoints that cannot lie: a flipped byte, a truncated file, a checkpoint of another model
//! or optimizer are refused with a clear error and a non-zero exit on every rank, leaving the
//! checkpoint untouched; an unwritable directory fails before the first step; a crash between
//! staging and renaming leaves a resumable checkpoint; resuming a finished run reports it; a run
//! whose loss stops being finite ends with an error and leaves the last good checkpoint.

mod common;

use std::path::Path;

use common::*;
use trainer::checkpoint::{resolve, Which, CRASH_BEFORE_RENAME_ENV, INDEX, WEIGHTS};

const BASE: [&str; 10] = [
    "--model",
    "mlp",
    "--hidden",
    "16",
    "--samples",
    "64",
    "--batch-size",
    "16",
    "--optimizer",
    "adam",
];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    BASE.iter().copied().chain(extra.iter().copied()).collect()
}

/// Trains `epochs` epochs into `dir` on 2 ranks.
fn make_checkpoint(dir: &str, epochs: &str) {
    train_ok(2, &args(&["--epochs", epochs, "--checkpoint-dir", dir]));
}

/// Resumes from `dir` with `extra` arguments; asserts that every rank fails with exit code 1,
/// the master's error contains `expected`, and nothing in `dir` changed.
fn resume_fails(dir: &str, extra: &[&str], expected: &str) {
    let before = snapshot(Path::new(dir));
    let mut a = args(&["--epochs", "3", "--checkpoint-dir", dir, "--resume"]);
    // `extra` flag/value pairs replace the base arguments' values.
    for pair in extra.chunks(2) {
        match a.iter().position(|x| *x == pair[0]) {
            Some(i) => a[i + 1] = pair[1],
            None => a.extend_from_slice(pair),
        }
    }
    let out = run_train(2, &a);
    assert!(!out.timed_out, "{}", out.report());
    for r in 0..2 {
        assert_eq!(code(&out, r), Some(1), "{}", out.report());
    }
    assert!(
        out.ranks[0].stderr.contains(expected),
        "expected {expected:?}: {}",
        out.report()
    );
    assert!(
        !out.ranks[0].stdout.contains("Epoch "),
        "no training after a refused checkpoint: {}",
        out.report()
    );
    assert_eq!(before, snapshot(Path::new(dir)), "the checkpoint changed");
}

#[test]
fn corrupted_truncated_or_foreign_checkpoints_are_refused() {
    let scratch = Scratch::new("ckpt-bad");
    let dir = scratch.path("ckpt").display().to_string();
    make_checkpoint(&dir, "1");
    let weights = resolve(Path::new(&dir), Which::Latest)
        .unwrap()
        .join(WEIGHTS);
    let good = std::fs::read(&weights).unwrap();

    // One flipped bit in the middle of the tensor data.
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    std::fs::write(&weights, &flipped).unwrap();
    resume_fails(&dir, &[], "SHA-256");
    // Truncated.
    std::fs::write(&weights, &good[..good.len() - 100]).unwrap();
    resume_fails(&dir, &[], "SHA-256");
    std::fs::write(&weights, &good).unwrap();

    // Another model, another shape, another optimizer.
    resume_fails(
        &dir,
        &["--model", "lenet5"],
        "the checkpoint is for model Mlp",
    );
    resume_fails(&dir, &["--hidden", "32"], "hidden [16]");
    resume_fails(&dir, &["--optimizer", "sgd"], "optimizer");
    // A corrupt manifest.
    let manifest = resolve(Path::new(&dir), Which::Latest)
        .unwrap()
        .join("manifest.json");
    let text = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
    resume_fails(&dir, &[], "manifest is corrupt");
    std::fs::write(&manifest, &text).unwrap();

    // Intact again: resumes.
    let out = train_ok(
        2,
        &args(&["--epochs", "2", "--checkpoint-dir", &dir, "--resume"]),
    );
    assert!(
        out.ranks[0].stdout.contains("Epoch 2/2"),
        "{}",
        out.report()
    );
}

#[test]
fn an_unwritable_checkpoint_dir_fails_before_the_first_step() {
    let scratch = Scratch::new("ckpt-unwritable");
    std::fs::write(scratch.path("file"), b"x").unwrap();
    // A directory below a regular file cannot be created, even by root.
    let dir = scratch.path("file").join("ckpt").display().to_string();
    let out = run_train(2, &args(&["--epochs", "1", "--checkpoint-dir", &dir]));
    assert!(!out.timed_out, "{}", out.report());
    for r in 0..2 {
        assert_eq!(code(&out, r), Some(1), "{}", out.report());
    }
    assert!(out.ranks[0].stderr.contains(&dir), "{}", out.report());
    assert!(
        !out.ranks[0].stdout.contains("Epoch 1"),
        "failed before training: {}",
        out.report()
    );
}

#[test]
fn a_crash_between_write_and_rename_leaves_a_resumable_checkpoint() {
    let scratch = Scratch::new("ckpt-crash");
    let dir = scratch.path("ckpt").display().to_string();
    make_checkpoint(&dir, "1");
    let index_before = std::fs::read(Path::new(&dir).join(INDEX)).unwrap();
    let out = run_train_env(
        2,
        &args(&["--epochs", "2", "--checkpoint-dir", &dir, "--resume"]),
        &[(CRASH_BEFORE_RENAME_ENV, "1")],
    );
    assert!(!out.timed_out, "{}", out.report());
    assert_ne!(
        code(&out, 0),
        Some(0),
        "the master aborted: {}",
        out.report()
    );
    assert_eq!(
        std::fs::read(Path::new(&dir).join(INDEX)).unwrap(),
        index_before,
        "the index still names epoch 1"
    );
    assert!(resolve(Path::new(&dir), Which::Latest)
        .unwrap()
        .ends_with("epoch-0001"));
    // Resumes from epoch 1 and finishes epoch 2; the staged leftovers are cleaned up.
    let out = train_ok(
        2,
        &args(&["--epochs", "2", "--checkpoint-dir", &dir, "--resume"]),
    );
    assert!(
        out.ranks[0].stdout.contains("Epoch 2/2"),
        "{}",
        out.report()
    );
    assert!(resolve(Path::new(&dir), Which::Latest)
        .unwrap()
        .ends_with("epoch-0002"));
    let leftovers = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn resuming_a_finished_run_reports_its_final_metrics() {
    let scratch = Scratch::new("ckpt-done");
    let dir = scratch.path("ckpt").display().to_string();
    let first = train_ok(2, &args(&["--epochs", "2", "--checkpoint-dir", &dir]));
    let last_line = first.ranks[0]
        .stdout
        .lines()
        .find(|l| l.starts_with("Epoch 2/2"))
        .unwrap()
        .to_owned();
    let out = train_ok(
        2,
        &args(&["--epochs", "2", "--checkpoint-dir", &dir, "--resume"]),
    );
    let stdout = &out.ranks[0].stdout;
    assert!(
        stdout.contains("already finished after epoch 2/2"),
        "{stdout}"
    );
    assert!(stdout.contains(&last_line), "{stdout}");
    assert!(!stdout.contains("loss 0.0000"), "{stdout}");
}

#[test]
fn keeps_the_last_k_checkpoints() {
    let scratch = Scratch::new("ckpt-keep");
    let dir = scratch.path("ckpt").display().to_string();
    train_ok(
        1,
        &args(&[
            "--epochs",
            "4",
            "--checkpoint-dir",
            &dir,
            "--keep-checkpoints",
            "2",
        ]),
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("epoch-"))
        .collect();
    names.sort();
    assert_eq!(names, ["epoch-0003", "epoch-0004"]);
}

#[test]
fn a_diverging_run_stops_with_an_error_and_keeps_the_last_good_checkpoint() {
    let scratch = Scratch::new("diverge");
    let dir = scratch.path("ckpt");
    let dir = dir.to_str().unwrap();
    make_checkpoint(dir, "1");
    // Adam at lr 1e30 turns the weights into infinities within a step or two.
    resume_fails(dir, &["--lr", "1e30"], "loss is not finite");
}

#[test]
fn a_new_run_in_a_directory_with_checkpoints_is_refused() {
    let scratch = Scratch::new("ckpt-reuse");
    let dir = scratch.path("ckpt").display().to_string();
    make_checkpoint(&dir, "2");
    let before = snapshot(Path::new(&dir));
    let out = run_train(2, &args(&["--epochs", "1", "--checkpoint-dir", &dir]));
    assert!(!out.timed_out, "{}", out.report());
    for r in 0..2 {
        assert_eq!(code(&out, r), Some(1), "{}", out.report());
    }
    let stderr = &out.ranks[0].stderr;
    assert!(
        stderr.contains("earlier run (latest: epoch-0002)") && stderr.contains("--resume"),
        "{}",
        out.report()
    );
    assert_eq!(before, snapshot(Path::new(&dir)), "the checkpoints changed");
}

#[test]
fn resuming_with_another_batch_size_or_seed_is_refused() {
    let scratch = Scratch::new("ckpt-settings");
    let dir = scratch.path("ckpt");
    let dir = dir.to_str().unwrap();
    make_checkpoint(dir, "1");
    resume_fails(dir, &["--batch-size", "32"], "used --batch-size 16");
    resume_fails(dir, &["--seed", "7"], "--seed");
}

/// The master cannot write the index (a directory is in the way of its temporary file): every
/// rank ends with the error at once, not rank 1 in its next collective's timeout.
#[test]
fn a_failed_save_ends_every_rank_with_the_error() {
    let scratch = Scratch::new("ckpt-save-fails");
    let dir = scratch.path("ckpt");
    std::fs::create_dir_all(dir.join(format!(".{INDEX}.tmp"))).unwrap();
    let dir = dir.display().to_string();
    let out = run_train(2, &args(&["--epochs", "2", "--checkpoint-dir", &dir]));
    assert!(!out.timed_out, "{}", out.report());
    for r in 0..2 {
        assert_eq!(code(&out, r), Some(1), "{}", out.report());
    }
    assert!(
        out.ranks[1].stderr.contains("could not write"),
        "{}",
        out.report()
    );
    assert!(
        !out.ranks[0].stdout.contains("Epoch 2/2"),
        "{}",
        out.report()
    );
}
