//! Early stopping end to end: with a learning rate of 0 the monitored metric never improves,
//! so training stops after `patience` validated epochs past the first, on every rank at the
//! same epoch; the checkpoint records it and resuming reports the finished run.

mod common;

use common::*;
use trainer::testdata::write_dataset;

#[test]
fn stops_when_the_monitor_does_not_improve_and_the_checkpoint_says_so() {
    let scratch = Scratch::new("early-stop");
    write_dataset(&scratch.0, 48, 11, false, 2).unwrap();
    let data = scratch.0.display().to_string();
    let ckpt = scratch.path("ckpt").display().to_string();
    let args = [
        "--data-dir",
        &data,
        "--model",
        "mlp",
        "--hidden",
        "16",
        "--batch-size",
        "16",
        "--epochs",
        "10",
        "--lr",
        "0",
        "--early-stop-patience",
        "2",
        "--monitor",
        "val_accuracy",
        "--checkpoint-dir",
        &ckpt,
    ];
    let out = train_ok(2, &args);
    let stdout = &out.ranks[0].stdout;
    assert!(stdout.contains("Epoch 3/10"), "{stdout}");
    assert!(!stdout.contains("Epoch 4/10"), "{stdout}");
    assert!(
        stdout.contains("early stopping after epoch 3")
            && stdout.contains("restored the weights of epoch 1"),
        "{stdout}"
    );
    let mut resume = args.to_vec();
    resume.push("--resume");
    let out = train_ok(2, &resume);
    assert!(
        out.ranks[0]
            .stdout
            .contains("already finished after epoch 3/10 (early stopping)"),
        "{}",
        out.report()
    );
}
