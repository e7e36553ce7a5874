//! Training throughput on the real Fashion-MNIST, 1 and 2 ranks (a benchmark, not a test):
//! LeNet-5, global batch 256, Adam, one libtorch thread per rank, 3 epochs without
//! validation; reports samples/s over all ranks per epoch and their median over epochs 2-3
//! (epoch 1 warms up). Run: `cargo bench -p tarantella-trainer --bench samples_per_second`.
//! Needs /usr/share/datasets/fashion-mnist (scripts/setup.sh installs it).

use std::time::Duration;

use gaspi::testing::Job;

fn samples_per_second(ranks: u16) -> Vec<f64> {
    let mut job = Job::new(ranks, env!("CARGO_BIN_EXE_train"));
    job.args = [
        "--dataset",
        "fashion-mnist",
        "--model",
        "lenet5",
        "--batch-size",
        "256",
        "--epochs",
        "3",
        "--optimizer",
        "adam",
        "--lr",
        "0.003",
        "--validation-freq",
        "0",
        "--no-progress",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    job.timeout = Duration::from_secs(300);
    job.env.push((tnt_env::LOG.into(), "warn".into()));
    let out = job.run();
    out.assert_success();
    out.ranks[0]
        .stdout
        .lines()
        .filter(|l| l.starts_with("Epoch "))
        .filter_map(|l| {
            let rate = l.rsplit(" - ").next()?.strip_suffix(" samples/s")?;
            rate.trim().parse().ok()
        })
        .collect()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to test here.
    }
    println!("| ranks | samples/s epoch 1, 2, 3 | median of epochs 2-3 |");
    println!("|---|---|---|");
    for ranks in [1u16, 2] {
        let rates = samples_per_second(ranks);
        let mut later: Vec<f64> = rates.iter().skip(1).copied().collect();
        later.sort_by(f64::total_cmp);
        let median = match later.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => later[n / 2],
            n => (later[n / 2 - 1] + later[n / 2]) / 2.0,
        };
        let list: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
        println!("| {ranks} | {} | {median:.0} |", list.join(", "));
    }
}
