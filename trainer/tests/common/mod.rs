//! Shared helpers of the trainer's multi-process tests: run the `train` binary on N ranks
//! (gaspi's test job runner, bounded in time) and read what it wrote.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gaspi::testing::{Job, JobOutcome};

/// A fresh scratch directory for one test (removed by `Scratch::drop`).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("tnt-trainer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `train <args>` on `n` ranks; at most 120 s, then every rank is killed.
pub fn run_train(n: u16, args: &[&str]) -> JobOutcome {
    run_train_env(n, args, &[])
}

/// [`run_train`] with extra environment variables.
pub fn run_train_env(n: u16, args: &[&str], env: &[(&str, &str)]) -> JobOutcome {
    let mut job = Job::new(n, env!("CARGO_BIN_EXE_train"));
    // Quiet by default; the caller's variables come after, so they win.
    job.env.push((tnt_env::LOG.into(), "warn".into()));
    for (k, v) in env {
        job.env.push((k.to_string(), v.to_string()));
    }
    job.args = args.iter().map(|s| s.to_string()).collect();
    job.args.push("--no-progress".into());
    job.timeout = Duration::from_secs(120);
    job.run()
}

/// Like [`run_train`], and asserts that every rank succeeded.
pub fn train_ok(n: u16, args: &[&str]) -> JobOutcome {
    let out = run_train(n, args);
    out.assert_success();
    out
}

/// One line of a `--record` file.
#[derive(Clone, Debug)]
pub struct Record {
    pub step: u64,
    pub loss: f64,
    pub checksum: String,
    pub fields: HashMap<String, String>,
}

impl Record {
    pub fn list(&self, key: &str) -> Vec<u64> {
        let v = &self.fields[key];
        if v.is_empty() {
            return Vec::new();
        }
        v.split(',').map(|x| x.parse().unwrap()).collect()
    }

    pub fn num(&self, key: &str) -> u64 {
        self.fields[key].parse().unwrap()
    }
}

/// The records of rank `rank` for `--record <prefix>`.
pub fn read_records(prefix: &Path, rank: u16) -> Vec<Record> {
    let path = PathBuf::from(format!("{}.rank{rank}", prefix.display()));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let fields: HashMap<String, String> = line
                .split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Record {
                step: fields["step"].parse().unwrap(),
                loss: fields["loss"].parse().unwrap(),
                checksum: fields["checksum"].clone(),
                fields,
            }
        })
        .collect()
}

/// Asserts that all `n` ranks recorded the same steps with bit-identical weights after each.
pub fn assert_replicas_identical(prefix: &Path, n: u16) -> Vec<Record> {
    let first = read_records(prefix, 0);
    assert!(!first.is_empty(), "no steps recorded");
    for rank in 1..n {
        let other = read_records(prefix, rank);
        assert_eq!(
            other.len(),
            first.len(),
            "rank {rank} ran a different number of steps"
        );
        for (a, b) in first.iter().zip(&other) {
            assert_eq!(a.step, b.step);
            assert_eq!(
                a.checksum, b.checksum,
                "weights of rank {rank} differ from rank 0 after step {}",
                a.step
            );
            assert_eq!(a.loss, b.loss, "ranks report different global losses");
        }
    }
    first
}

/// The tensors of the latest checkpoint's weights file in `checkpoint_dir`, by name.
pub fn load_weights(checkpoint_dir: &Path) -> HashMap<String, tch::Tensor> {
    trainer::checkpoint::read_latest_weights(checkpoint_dir)
        .unwrap()
        .into_iter()
        .collect()
}

/// The exit code of rank `rank`.
pub fn code(out: &JobOutcome, rank: usize) -> Option<i32> {
    out.ranks[rank].status.and_then(|s| s.code())
}

/// Every file under `dir` (recursively) with its bytes, to check that nothing changed.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path, bytes));
            }
        }
    }
    out.sort();
    out
}

/// Largest violation of `|a - b| <= atol + rtol * |b|` over all weights (<= 0 when within).
pub fn max_weight_excess(
    a: &HashMap<String, tch::Tensor>,
    b: &HashMap<String, tch::Tensor>,
    atol: f64,
    rtol: f64,
) -> f64 {
    assert_eq!(a.len(), b.len(), "different variable sets");
    let mut worst = f64::NEG_INFINITY;
    for (name, ta) in a {
        let tb = &b[name];
        assert_eq!(ta.size(), tb.size(), "{name}: shapes differ");
        let excess = ((ta - tb).abs() - (tb.abs() * rtol + atol))
            .max()
            .double_value(&[]);
        worst = worst.max(excess);
    }
    worst
}

/// How far a multi-rank run may be from the one-rank run: losses relative, weights
/// `|w_p - w_1| <= weight_atol + weight_rtol |w_1|`.
pub struct Tolerance {
    pub loss_rtol: f64,
    pub weight_atol: f64,
    pub weight_rtol: f64,
}

/// What a recorded run left: every step's record (identical on all ranks) and the final
/// weights when the run ended an epoch (and so wrote a checkpoint).
pub struct Run {
    _scratch: Scratch,
    pub records: Vec<Record>,
    pub weights: Option<HashMap<String, tch::Tensor>>,
}

/// Trains `args` on `n` ranks with `--record` and `--checkpoint-dir` in a fresh scratch
/// directory; asserts that the replicas stayed bit-identical.
pub fn train_recorded(name: &str, n: u16, args: &[&str]) -> Run {
    let scratch = Scratch::new(name);
    let (record, ckpt) = (scratch.path("rec"), scratch.path("ckpt"));
    let (record_s, ckpt_s) = (record.display().to_string(), ckpt.display().to_string());
    let mut all = args.to_vec();
    all.extend(["--record", &record_s, "--checkpoint-dir", &ckpt_s]);
    train_ok(n, &all);
    let records = assert_replicas_identical(&record, n);
    let saved = std::fs::read_dir(&ckpt).is_ok_and(|mut d| d.next().is_some());
    let weights = saved.then(|| load_weights(&ckpt));
    Run {
        _scratch: scratch,
        records,
        weights,
    }
}

/// Asserts that `run` matches the one-rank `reference` within `tol` at every step and in its
/// final weights, and that it trained at all.
pub fn assert_close(run: &Run, reference: &Run, tol: &Tolerance, what: &str) {
    assert_eq!(run.records.len(), reference.records.len());
    for (r, r1) in run.records.iter().zip(&reference.records) {
        let rel = (r.loss - r1.loss).abs() / r1.loss.abs();
        assert!(
            rel <= tol.loss_rtol,
            "{what}, step {}: loss {} vs {} on one rank",
            r.step,
            r.loss,
            r1.loss
        );
    }
    let (Some(weights), Some(reference_weights)) = (&run.weights, &reference.weights) else {
        panic!("{what}: both runs must end an epoch to compare their weights");
    };
    let excess = max_weight_excess(weights, reference_weights, tol.weight_atol, tol.weight_rtol);
    let largest = max_weight_excess(weights, reference_weights, 0.0, 0.0);
    println!("{what}: largest weight difference {largest:.3e}");
    assert!(
        excess <= 0.0,
        "{what}: weights off by {excess} beyond tolerance"
    );
    assert_ne!(
        run.records.first().unwrap().checksum,
        run.records.last().unwrap().checksum,
        "{what}: the weights never changed"
    );
}
