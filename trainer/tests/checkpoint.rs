//! Checkpoint and resume: training 2 epochs straight and training 1 epoch, stopping, and
//! resuming for the second gives bit-identical weights and the same losses (2 ranks, Adam, so
//! optimizer state must round-trip too).

mod common;

use common::*;

#[test]
fn resume_continues_exactly_like_an_uninterrupted_run() {
    let scratch = Scratch::new("resume");
    let base = [
        "--model",
        "lenet5",
        "--batch-size",
        "16",
        "--samples",
        "64",
        "--optimizer",
        "adam",
        "--lr",
        "0.001",
        "--warmup-epochs",
        "1",
    ];
    let dir = |n: &str| scratch.path(n).display().to_string();
    let (straight, split) = (dir("straight"), dir("split"));
    let (rec_straight, rec_first, rec_second) = (dir("rec-a"), dir("rec-b"), dir("rec-c"));

    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        train_ok(2, &refs);
    };
    run(with(&[
        "--epochs",
        "2",
        "--checkpoint-dir",
        &straight,
        "--record",
        &rec_straight,
    ]));
    run(with(&[
        "--epochs",
        "1",
        "--checkpoint-dir",
        &split,
        "--record",
        &rec_first,
    ]));
    run(with(&[
        "--epochs",
        "2",
        "--checkpoint-dir",
        &split,
        "--resume",
        "--record",
        &rec_second,
    ]));

    let a = assert_replicas_identical(std::path::Path::new(&rec_straight), 2);
    let b = assert_replicas_identical(std::path::Path::new(&rec_first), 2);
    let c = assert_replicas_identical(std::path::Path::new(&rec_second), 2);
    assert_eq!(a.len(), 8, "2 epochs of 4 steps");
    assert_eq!((b.len(), c.len()), (4, 4));
    let resumed: Vec<_> = b.iter().chain(&c).collect();
    for (x, y) in a.iter().zip(resumed) {
        assert_eq!(x.step, y.step);
        assert_eq!(x.loss, y.loss, "step {}", x.step);
        assert_eq!(
            x.checksum, y.checksum,
            "weights differ after step {}",
            x.step
        );
    }
    let excess = max_weight_excess(
        &load_weights(std::path::Path::new(&straight)),
        &load_weights(std::path::Path::new(&split)),
        0.0,
        0.0,
    );
    assert!(excess <= 0.0, "final checkpoints differ by {excess}");
}

#[test]
fn resume_without_a_checkpoint_fails_on_every_rank() {
    let scratch = Scratch::new("no-ckpt");
    let dir = scratch.path("missing").display().to_string();
    let out = run_train(
        2,
        &["--samples", "64", "--checkpoint-dir", &dir, "--resume"],
    );
    assert!(!out.timed_out, "{}", out.report());
    for r in &out.ranks {
        assert_eq!(r.status.and_then(|s| s.code()), Some(1), "{}", out.report());
    }
    assert!(
        out.ranks[0].stderr.contains("no checkpoint here"),
        "{}",
        out.report()
    );
}
