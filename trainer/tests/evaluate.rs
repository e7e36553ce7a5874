//! `train evaluate` and `train predict` on a checkpoint: the same test loss and accuracy on 1,
//! 2 and 3 ranks (23 test samples: uneven shares), every sample counted once, and predictions
//! that agree with the evaluation.

mod common;

use common::*;
use trainer::testdata::write_dataset;

/// `evaluate ...: N test samples, loss L accuracy A%`.
fn parse_eval(out: &gaspi::testing::JobOutcome) -> (usize, f64, f64) {
    let line = out.ranks[0]
        .stdout
        .lines()
        .find(|l| l.starts_with("evaluate "))
        .unwrap_or_else(|| panic!("no evaluate line: {}", out.report()))
        .to_owned();
    let field = |after: &str, end: char| -> f64 {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest[..rest.find(end).unwrap()].trim().parse().unwrap()
    };
    let samples = field(": ", ' ') as usize;
    (samples, field("loss ", ' '), field("accuracy ", '%'))
}

#[test]
fn evaluate_and_predict_agree_on_any_number_of_ranks() {
    let scratch = Scratch::new("evaluate");
    let data = scratch.path("data");
    std::fs::create_dir_all(&data).unwrap();
    write_dataset(&data, 96, 23, true, 4).unwrap();
    let (data_s, ckpt) = (
        data.display().to_string(),
        scratch.path("ckpt").display().to_string(),
    );
    let trained = train_ok(
        2,
        &[
            "--dataset",
            "fashion-mnist",
            "--data-dir",
            &data_s,
            "--model",
            "mlp",
            "--hidden",
            "32",
            "--batch-size",
            "16",
            "--epochs",
            "2",
            "--checkpoint-dir",
            &ckpt,
        ],
    );
    let val_line = trained.ranks[0]
        .stdout
        .lines()
        .find(|l| l.starts_with("Epoch 2/2"))
        .unwrap()
        .to_owned();
    let mut results = Vec::new();
    for n in 1..=3u16 {
        let out = train_ok(n, &["evaluate", "--checkpoint", &ckpt, "--latest"]);
        results.push(parse_eval(&out));
    }
    let (samples, loss, acc) = results[0];
    assert_eq!(samples, 23);
    assert!(
        val_line.contains(&format!("val_loss: {loss:.4}")),
        "evaluate matches the last validation: {val_line} vs {loss}"
    );
    for r in &results {
        assert_eq!(r.0, 23);
        assert!((r.1 - loss).abs() <= 1e-5 * loss.max(1.0), "{results:?}");
        assert_eq!(r.2, acc, "{results:?}");
    }

    let preds = scratch.path("preds.csv").display().to_string();
    let out = train_ok(
        2,
        &[
            "predict",
            "--checkpoint",
            &ckpt,
            "--latest",
            "--output",
            &preds,
        ],
    );
    assert!(
        out.ranks[0].stdout.contains("23 predictions"),
        "{}",
        out.report()
    );
    let text = std::fs::read_to_string(&preds).unwrap();
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|f| f.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 23);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r[0], i as f64);
        assert!((0.0..10.0).contains(&r[2]));
        assert!(r[3] > 0.0 && r[3] <= 1.0, "probability {}", r[3]);
    }
    let correct = rows.iter().filter(|r| r[1] == r[2]).count();
    let csv_acc = 100.0 * correct as f64 / 23.0;
    assert!((csv_acc - acc).abs() < 0.01, "{csv_acc} vs {acc}");

    // A directory without a checkpoint: a clear error on every rank.
    let out = run_train(2, &["evaluate", "--checkpoint", &data_s]);
    for r in 0..2 {
        assert_eq!(code(&out, r), Some(1), "{}", out.report());
    }
    assert!(
        out.ranks[0].stderr.contains("no checkpoint here"),
        "{}",
        out.report()
    );
}
