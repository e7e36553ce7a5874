//! Early stopping end to end: with a learning rate of 0 the monitored metric never improves,
//! so training stops after `patience` validated epochs past the first, on every rank at the
//! same epoch; the checkpoint records it and resuming reports the finished run.

mod common;

use common::*;
use trainer::testdata::write_dataset;

/// The arguments both tests share (an MLP on a small IDX dataset in `data`, patience 2,
/// checkpoints in `ckpt`), then `extra`.
fn args(data: &str, ckpt: &str, epochs: &str, extra: &[&str]) -> Vec<String> {
    let common = [
        "--data-dir",
        data,
        "--model",
        "mlp",
        "--hidden",
        "16",
        "--batch-size",
        "16",
        "--epochs",
        epochs,
        "--early-stop-patience",
        "2",
        "--checkpoint-dir",
        ckpt,
    ];
    common.iter().chain(extra).map(|s| s.to_string()).collect()
}

/// Trains on 2 ranks and expects success.
fn run(args: &[String]) -> gaspi::testing::JobOutcome {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    train_ok(2, &args)
}

#[test]
fn stops_when_the_monitor_does_not_improve_and_the_checkpoint_says_so() {
    let scratch = Scratch::new("early-stop");
    write_dataset(&scratch.0, 48, 11, false, 2).unwrap();
    let data = scratch.0.display().to_string();
    let ckpt = scratch.path("ckpt").display().to_string();
    let extra = ["--lr", "0", "--monitor", "val_accuracy"];
    let args = args(&data, &ckpt, "10", &extra);
    let out = run(&args);
    let stdout = &out.ranks[0].stdout;
    assert!(stdout.contains("Epoch 3/10"), "{stdout}");
    assert!(!stdout.contains("Epoch 4/10"), "{stdout}");
    assert!(
        stdout.contains("early stopping after epoch 3")
            && stdout.contains("restored the weights of epoch 1"),
        "{stdout}"
    );
    let mut resume = args.clone();
    resume.push("--resume".into());
    let out = run(&resume);
    assert!(
        out.ranks[0]
            .stdout
            .contains("already finished after epoch 3/10 (early stopping)"),
        "{}",
        out.report()
    );
}

/// A run stopped and resumed stops where an uninterrupted one does and restores the same best
/// weights: early stopping's watch (best value and epoch, epochs waited) is in the
/// checkpoint, and its best epoch's checkpoint is kept (here past `--keep-checkpoints 1`)
/// and loaded for them. With `--min-delta 10` no epoch improves on the first, so training
/// stops after epoch 3 and puts epoch 1's weights back, while `--lr` moves them every step.
#[test]
fn a_resumed_run_stops_like_an_uninterrupted_one_with_the_same_best_weights() {
    let scratch = Scratch::new("early-stop-resume");
    write_dataset(&scratch.0, 48, 11, false, 2).unwrap();
    let data = scratch.0.display().to_string();
    let extra = [
        "--lr",
        "0.05",
        "--min-delta",
        "10",
        "--monitor",
        "val_loss",
        "--keep-checkpoints",
        "1",
    ];
    let args = |ckpt: &str, epochs: &str| args(&data, ckpt, epochs, &extra);
    let whole = scratch.path("whole").display().to_string();
    let out = run(&args(&whole, "10"));
    let stops = "early stopping after epoch 3";
    let restores = "restored the weights of epoch 1";
    let stdout = &out.ranks[0].stdout;
    assert!(
        stdout.contains(stops) && stdout.contains(restores),
        "{stdout}"
    );

    let split = scratch.path("split").display().to_string();
    run(&args(&split, "2"));
    let mut resumed = args(&split, "10");
    resumed.push("--resume".into());
    let out = run(&resumed);
    let stdout = &out.ranks[0].stdout;
    assert!(stdout.contains("Epoch 3/10"), "{stdout}");
    assert!(
        stdout.contains(stops) && stdout.contains(restores),
        "{stdout}"
    );

    let final_weights = |dir: &str| trainer::checkpoint::read_latest_weights(dir.as_ref()).unwrap();
    let (a, b) = (final_weights(&whole), final_weights(&split));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, t) in &a {
        assert!(
            t.equal(&b[name]),
            "{name} differs from the uninterrupted run's"
        );
    }
}
